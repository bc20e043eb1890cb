"""Reading the records inside a v2 batch: full decoding and a fast validating walk.

``decode_records`` yields ``Record`` objects (reads, compaction, dumps);
``summarize_records`` is the append path's check: it walks record boundaries
reading only the fields validation needs.  Both enforce Kafka's record-level
rules (``DefaultRecord.readFrom`` and the batch iterator: declared count ==
records present, each record consumes exactly its length) and report any
damage as CorruptRecordError naming a byte position: for uncompressed batches
the absolute position in ``buf``; for compressed ones the batch start, with the
offset inside the decompressed stream in the message.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratalog.common.errors import CorruptRecordError
from stratalog.records.batch_header import (
    NO_TIMESTAMP,
    V2_HEADER_SIZE,
    BatchHeader,
    TimestampType,
    parse_header,
    require_complete,
    validate_batch,
)
from stratalog.records.compression import Compression, decompress
from stratalog.records.record import Header, Record
from stratalog.records.varint import VARLONG_MAX_BYTES, Buffer, decode_varint

_BEFORE_ANY_TIMESTAMP = -(1 << 63) - 1
_AFTER_ANY_TIMESTAMP = 1 << 63

# attributes byte + one-byte timestampDelta, offsetDelta, keyLength,
# valueLength and headerCount: no record body can be shorter.
_MIN_RECORD_BODY = 6


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
    header = _checked_header(buf, pos, verify_crc, source)
    data, start, end, translate = _records_region(buf, pos, header, source)
    try:
        return _decode(data, start, end, header)
    except CorruptRecordError as e:
        raise translate(e) from None
    except IndexError:
        # _decode reads record fields before checking them against the
        # record's end; only a record cut by the end of the data gets here.
        raise translate(CorruptRecordError(end, "last record's fields run past the end of the records")) from None


def summarize_records(buf: Buffer, pos: int = 0, *, source: str | None = None) -> RecordsSummary:
    """Walk the records of the batch at ``pos`` without building them.

    Reads per record only length, timestampDelta, offsetDelta and keyLength and
    jumps over the rest; checks offset deltas strictly increase up to
    lastOffsetDelta, the count matches and nothing overruns.  It does not
    check the CRC (``validate_batch`` does) nor the inside of keys, values and
    headers (``decode_records`` does).
    """
    header = _checked_header(buf, pos, False, source)
    data, start, end, translate = _records_region(buf, pos, header, source)
    try:
        return _summarize(data, start, end, header)
    except CorruptRecordError as e:
        raise translate(e) from None
    except IndexError:
        # _summarize reads record fields before checking them against the
        # record's end; only a record cut by the end of the data gets here.
        raise translate(CorruptRecordError(end, "last record's fields run past the end of the records")) from None


class _Translate:
    """Turns an error at a position inside ``data`` into one about ``buf``."""

    __slots__ = ("base", "batch_pos", "compressed", "source")

    def __init__(self, base: int, batch_pos: int, compressed: bool, source: str | None) -> None:
        self.base = base
        self.batch_pos = batch_pos
        self.compressed = compressed
        self.source = source

    def __call__(self, e: CorruptRecordError) -> CorruptRecordError:
        if self.compressed:
            return CorruptRecordError(
                self.batch_pos,
                f"{e.reason} (at offset {e.position} in decompressed records of batch at {self.batch_pos})",
                source=self.source,
            )
        return CorruptRecordError(self.base + e.position, e.reason, source=self.source)


def _checked_header(buf: Buffer, pos: int, verify_crc: bool, source: str | None) -> BatchHeader:
    if verify_crc:
        header = validate_batch(buf, pos, source=source)
    else:
        header = parse_header(buf, pos, source=source)
        require_complete(buf, pos, header, source=source)
    if header.records_count < 0:
        raise CorruptRecordError(
            pos + 57, f"Found invalid record count {header.records_count} in magic v2 batch", source=source
        )
    return header


def _records_region(
    buf: Buffer, pos: int, header: BatchHeader, source: str | None
) -> tuple[bytes, int, int, _Translate]:
    """The record bytes as ``bytes`` plus their bounds, and how to map error positions back."""
    start = pos + V2_HEADER_SIZE
    end = pos + header.size
    codec = header.compression
    if codec != Compression.NONE:
        data = decompress(codec, memoryview(buf)[start:end], position=start, source=source)
        return data, 0, len(data), _Translate(0, pos, True, source)
    if isinstance(buf, bytes):
        return buf, start, end, _Translate(0, pos, False, source)
    # One copy to bytes: indexing and slicing bytes is the fastest, and the
    # record fields have to become bytes anyway.
    return bytes(buf[start:end]), 0, header.size - V2_HEADER_SIZE, _Translate(start, pos, False, source)


def _decode(data: bytes, p: int, end: int, h: BatchHeader) -> list[Record]:
    # Same inline one/two-byte varint decoding and deferred bounds checks as
    # _summarize: a varint read past its record fails the "bytes consumed ==
    # length" test, one past the data raises IndexError (translated).  Keys and
    # values are checked before slicing so a bogus size never copies much.
    count = h.records_count
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    append_time = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    dv = decode_varint
    records: list[Record] = []
    append = records.append
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
        if length < _MIN_RECORD_BODY or rec_end > end:
            raise CorruptRecordError(rec_start, _bad_length(length, end - p))
        p += 1  # record attributes: unused
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
            size = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            size = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            size, p = dv(data, p, end=rec_end)
        if size < 0:  # Kafka's Utils.readBytes: any negative length is null
            key = None
        elif p + size <= rec_end:
            key = data[p : p + size]
            p += size
        else:
            raise CorruptRecordError(p, f"key of {size} bytes overruns its record by {p + size - rec_end} bytes")
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            size = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            size, p = dv(data, p, end=rec_end)
        if size < 0:
            value = None
        elif p + size <= rec_end:
            value = data[p : p + size]
            p += size
        else:
            raise CorruptRecordError(p, f"value of {size} bytes overruns its record by {p + size - rec_end} bytes")
        if p < rec_end and data[p] == 0:  # no headers: the common case
            headers: tuple[Header, ...] = ()
            p += 1
        else:
            header_count, p = dv(data, p, end=rec_end)
            headers, p = _headers(data, p, rec_end, header_count)
        if p != rec_end:
            raise CorruptRecordError(
                rec_start,
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {p - (rec_end - length)}",
            )
        timestamp = base_ts + ts_delta if append_time is None else append_time
        append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if p != end:
        raise CorruptRecordError(
            p, f"Incorrect declared batch size, records still remaining in file: {end - p} bytes after {count} records"
        )
    return records


def _nullable_bytes(data: bytes, p: int, rec_end: int) -> tuple[bytes | None, int]:
    size, p = decode_varint(data, p, end=rec_end)
    if size < 0:  # Kafka's Utils.readBytes: any negative length is null
        return None, p
    if p + size > rec_end:
        raise CorruptRecordError(p, f"field of {size} bytes overruns its record by {p + size - rec_end} bytes")
    return data[p : p + size], p + size


def _headers(data: bytes, p: int, rec_end: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0:
        raise CorruptRecordError(p, f"Found invalid number of record headers {count}")
    if count > rec_end - p:
        raise CorruptRecordError(
            p, f"Found invalid number of record headers. {count} is larger than the remaining size of the buffer"
        )
    headers = []
    for _ in range(count):
        key_start = p
        key_size, p = decode_varint(data, p, end=rec_end)
        if key_size < 0:
            raise CorruptRecordError(key_start, f"Invalid negative header key size {key_size}")
        if p + key_size > rec_end:
            raise CorruptRecordError(key_start, f"header key of {key_size} bytes overruns its record")
        try:
            key = data[p : p + key_size].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(p + e.start, f"header key is not valid UTF-8: {e.reason}") from None
        value, p = _nullable_bytes(data, p + key_size, rec_end)
        headers.append(Header(key, value))
    return tuple(headers), p


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
        if length < _MIN_RECORD_BODY or rec_end > end:
            raise CorruptRecordError(rec_start, _bad_length(length, end - p))
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
    if count == 0:
        return RecordsSummary(0, NO_TIMESTAMP, NO_TIMESTAMP, -1, -1)
    if h.timestamp_type == TimestampType.LOG_APPEND_TIME:
        # Decoded LogAppendTime records all carry the batch's maxTimestamp,
        # so the first record is the first one holding it.
        first_delta = _first_offset_delta(data, records_start)
        return RecordsSummary(count, h.max_timestamp, h.max_timestamp, first_delta, first_keyless)
    return RecordsSummary(count, min_ts, max_ts, max_ts_delta, first_keyless)


def _first_offset_delta(data: bytes, p: int) -> int:
    """Offset delta of the record at ``p`` (already validated by the walk)."""
    _, p = decode_varint(data, p)
    _, p = decode_varint(data, p + 1, limit=VARLONG_MAX_BYTES)
    return decode_varint(data, p)[0]


def _bad_length(length: int, remaining: int) -> str:
    if length < _MIN_RECORD_BODY:
        return f"Invalid record size: {length} is below the {_MIN_RECORD_BODY}-byte minimum record body"
    return (
        f"Invalid record size: expected {length} bytes in record payload, "
        f"but instead the buffer has only {remaining} remaining bytes."
    )
