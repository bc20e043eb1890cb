"""Reading the records inside a v2 batch: as ``Record`` objects, and the append path's summary.

``decode_records`` yields ``Record`` objects (reads, compaction, dumps) from the one record
walk (``walker``). ``summarize_records`` is the append path's check: it steps over record
boundaries reading only the fields validation needs (lengths, timestamp and offset deltas,
whether a key is there) and copies nothing. Both enforce Kafka's record-level rules and
report damage as ``CorruptRecordError`` naming a byte position, as ``walker`` describes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

from stratalog.common.errors import CorruptRecordError
from stratalog.records import native
from stratalog.records.batch_header import NO_TIMESTAMP, V2_HEADER_SIZE, BatchHeader, TimestampType
from stratalog.records.record import Record
from stratalog.records.varint import VARLONG_MAX_BYTES, Buffer, decode_varint
from stratalog.records.walker import (
    MIN_RECORD_BODY,
    RecordColumns,
    bad_length,
    checked_header,
    native_walk,
    records_region,
    walk_records,
)

_BEFORE_ANY_TIMESTAMP = -(1 << 63) - 1
_AFTER_ANY_TIMESTAMP = 1 << 63


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~3x to build, and these are built per batch/record
class RecordsSummary:
    """What the append path needs to know about a batch's records.

    Timestamps follow the decoded view: in a LogAppendTime batch every record
    has the batch maxTimestamp.  With no records the timestamps and the offset
    delta are -1.  ``first_keyless_index`` is the index of the first record with
    a null key, -1 if all are keyed (compacted topics reject keyless records).
    """

    count: int
    min_timestamp: int
    max_timestamp: int
    offset_delta_of_max_timestamp: int
    first_keyless_index: int


def decode_records(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True, source: str | None = None
) -> list[Record]:
    """Decode every record of the v2 batch at ``pos`` (absolute offsets and timestamps)."""
    columns = RecordColumns.records()
    walk_records(buf, pos, columns, verify_crc=verify_crc, source=source)
    assert columns.as_records is not None
    return columns.as_records


def summarize_records(buf: Buffer, pos: int = 0, *, source: str | None = None) -> RecordsSummary:
    """Walk the records of the batch at ``pos`` without building them.

    Reads per record only length, timestampDelta, offsetDelta and keyLength and
    jumps over the rest; checks offset deltas strictly increase up to
    lastOffsetDelta, the count matches and nothing overruns.  It does not
    check the CRC (``validate_batch`` does) nor the inside of keys, values and
    headers (``decode_records`` does).
    """
    kernel = native.kernel
    if kernel is not None:
        return native_walk(buf, pos, functools.partial(_summarize_natively, kernel), verify_crc=False, source=source)
    header = checked_header(buf, pos, False, source)
    data, start, end, translate = records_region(buf, pos, header, source)
    try:
        return _summarize(data, start, end, header)
    except CorruptRecordError as e:
        raise translate(e) from None
    except IndexError:
        # _summarize reads record fields before checking them against the
        # record's end; only a record cut by the end of the data gets here.
        raise translate(CorruptRecordError(end, "last record's fields run past the end of the records")) from None


def _summarize_natively(kernel: ModuleType, data: bytes, start: int, end: int, h: BatchHeader) -> RecordsSummary:
    """``_summarize`` in the native kernel: the same walk, checks and errors, one call per batch."""
    min_ts, max_ts, max_ts_delta, first_keyless = kernel.summarize_records(
        data, start, end, h.records_count, h.base_timestamp, h.last_offset_delta)
    return _summary(data, start, h, min_ts, max_ts, max_ts_delta, first_keyless)


def _summary(data: Buffer, records_start: int, h: BatchHeader, min_ts: int, max_ts: int, max_ts_delta: int,
             first_keyless: int) -> RecordsSummary:
    count = h.records_count
    if count == 0:
        return RecordsSummary(0, NO_TIMESTAMP, NO_TIMESTAMP, -1, -1)
    if h.timestamp_type == TimestampType.LOG_APPEND_TIME:
        # Decoded LogAppendTime records all carry the batch's maxTimestamp,
        # so the first record is the first one holding it.
        first_delta = _first_offset_delta(data, records_start)
        return RecordsSummary(count, h.max_timestamp, h.max_timestamp, first_delta, first_keyless)
    return RecordsSummary(count, min_ts, max_ts, max_ts_delta, first_keyless)


def _summarize(data: bytes, p: int, end: int, h: BatchHeader) -> RecordsSummary:
    # Hot path of every append: varints of one or two bytes (lengths below 8 KiB,
    # deltas below 4096) are decoded inline, longer ones by decode_varint.
    count = h.records_count
    base_ts = h.base_timestamp
    last_delta = h.last_offset_delta
    dv = decode_varint
    min_ts = _AFTER_ANY_TIMESTAMP
    max_ts = _BEFORE_ANY_TIMESTAMP
    max_ts_delta = -1
    previous_delta = -1
    first_keyless = -1
    records_start = p
    for i in range(count):
        if p >= end:
            raise CorruptRecordError(
                p, f"Incorrect declared batch size, premature EOF reached: {count} records declared, {i} present"
            )
        rec_start = p
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        elif p + 1 < end and (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            length = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            length, p = dv(data, p, end=end)
        rec_end = p + length
        if length < MIN_RECORD_BODY or rec_end > end:
            raise CorruptRecordError(rec_start, bad_length(length, end - p))
        p += 1  # record attributes: unused
        # The fields below are read without per-byte bounds checks: a record
        # whose fields run past its end is caught by the overrun test after
        # them, and a read past the whole buffer by the IndexError handler.
        b = data[p]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            ts_delta = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            ts_delta, p = dv(data, p, limit=VARLONG_MAX_BYTES, end=rec_end)
        b = data[p]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            offset_delta = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            offset_delta, p = dv(data, p, end=rec_end)
        b = data[p]
        if b < 0x80:
            key_size = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            key_size = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            key_size, p = dv(data, p, end=rec_end)
        # +2: valueLength and headerCount still follow the key.
        if key_size < 0:
            if p + 2 > rec_end:
                raise CorruptRecordError(rec_start, "record fields overrun its declared length")
            if first_keyless < 0:
                first_keyless = i
        elif p + key_size + 2 > rec_end:
            raise CorruptRecordError(rec_start, f"record fields (key of {key_size} bytes) overrun its declared length")
        if offset_delta <= previous_delta or offset_delta > last_delta:
            raise CorruptRecordError(
                rec_start,
                f"record offset delta {offset_delta} not in ({previous_delta}, {last_delta}] "
                "(deltas must increase up to lastOffsetDelta)",
            )
        previous_delta = offset_delta
        ts = base_ts + ts_delta
        if ts > max_ts:
            max_ts = ts
            max_ts_delta = offset_delta
        if ts < min_ts:
            min_ts = ts
        p = rec_end
    if p != end:
        raise CorruptRecordError(
            p, f"Incorrect declared batch size, records still remaining in file: {end - p} bytes after {count} records"
        )
    return _summary(data, records_start, h, min_ts, max_ts, max_ts_delta, first_keyless)


def _first_offset_delta(data: Buffer, p: int) -> int:
    """Offset delta of the record at ``p`` (already validated by the walk)."""
    _, p = decode_varint(data, p)
    _, p = decode_varint(data, p + 1, limit=VARLONG_MAX_BYTES)
    return decode_varint(data, p)[0]


def checked_batch(buf: Buffer) -> tuple[BatchHeader, RecordsSummary | None] | None:
    """``buf`` as one whole v2 batch, checked in one native call: its header, its CRC (as
    ``validate_batch``) and, uncompressed, its records' summary (as ``summarize_records``; None when
    compressed). None without the native kernel or when anything is wrong: the caller then runs
    those two, which name what is wrong."""
    kernel = native.kernel
    if kernel is None:
        return None
    checked = kernel.check_batch(buf)
    if checked is None:
        return None
    (first, second), summary = checked
    header = BatchHeader(*first, *second)
    if summary is None:
        return header, None
    return header, _summary(buf, V2_HEADER_SIZE, header, *summary)
