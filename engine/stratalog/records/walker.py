"""The one walk over the records of a v2 batch: into columns, checked, copying only what is wanted.

Every reader of v2 records goes through ``walk_records``: the engine's ``decode_records`` (reads,
the cleaner, dump-log, verify, the server's JSON fetches) and the Spark data source's Arrow
columns. Records land in per-field lists (``RecordColumns``), not one object per record, and a
field whose list is None (a projection without ``value``, say) is stepped over without a copy.

Kafka's record-level rules are enforced on the way (``DefaultRecord.readFrom`` and the batch
iterator): the declared count equals the records present, each record consumes exactly its
length, keys, values and headers stay inside their record. Damage is a ``CorruptRecordError``
naming a byte position: for uncompressed batches the absolute position in ``buf``; for
compressed ones the batch start, with the offset inside the decompressed records in the message.
A walk that fails leaves the columns as they were before it.

ZigZag varints of one and two bytes (lengths below 8 KiB, deltas below 4096: nearly all of them)
are decoded inline, longer ones by ``decode_varint``. Fields are read before they are checked
against their record's end: a field running past its record fails the "consumed == length" test,
one running past the data raises IndexError, translated here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stratalog.common.errors import CorruptRecordError
from stratalog.records import native
from stratalog.records.batch_header import (
    RECORDS_COUNT_OFFSET,
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

T = TypeVar("T")

# attributes byte + one-byte timestampDelta, offsetDelta, keyLength,
# valueLength and headerCount: no record body can be shorter.
MIN_RECORD_BODY = 6


@dataclass(slots=True)
class RecordColumns:
    """Records as columns; a field whose list is None is not wanted and never copied.

    ``as_records`` collects ``Record`` objects instead of columns (``decode_records``): built
    in the walk itself, they cost no second pass over per-field lists.
    """

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] | None = None
    values: list[bytes | None] | None = None
    headers: list[tuple[Header, ...]] | None = None
    timestamp_types: list[int] | None = None  # per row, though the batch decides it (Spark's column)
    as_records: list[Record] | None = None

    @classmethod
    def every_field(cls) -> RecordColumns:
        return cls(keys=[], values=[], headers=[])

    @classmethod
    def records(cls) -> RecordColumns:
        return cls(as_records=[])

    def __len__(self) -> int:
        return len(self.offsets) if self.as_records is None else len(self.as_records)

    def lists(self) -> list[list[Any]]:
        columns = (self.offsets, self.timestamps, self.keys, self.values, self.headers, self.timestamp_types,
                   self.as_records)
        return [column for column in columns if column is not None]

    def truncate(self, rows: int) -> None:
        for column in self.lists():
            del column[rows:]

    def filter_range(self, first_row: int, start: int, end: int) -> None:
        """Drop rows from ``first_row`` on whose offsets are outside [start, end)."""
        keep = [i for i in range(first_row, len(self.offsets)) if start <= self.offsets[i] < end]
        for column in self.lists():
            column[first_row:] = [column[i] for i in keep]


def walk_records(buf: Buffer, pos: int, columns: RecordColumns, *, verify_crc: bool = True,
                 source: str | None = None, header: BatchHeader | None = None) -> BatchHeader:
    """Append the records of the v2 batch at ``pos`` to ``columns``; returns the batch's header.

    ``header``: the batch's header, parsed by a caller that has already checked the whole batch
    (its CRC, so its length too), which spares parsing it again.
    """
    if header is None:
        header = checked_header(buf, pos, verify_crc, source)
    elif header.records_count < 0:
        raise CorruptRecordError(pos + RECORDS_COUNT_OFFSET, f"Found invalid record count {header.records_count} "
                                 "in magic v2 batch", source=source)
    data, start, end, translate = records_region(buf, pos, header, source)
    rows = len(columns)
    try:
        _walk(data, start, end, header, columns)
    except CorruptRecordError as e:
        columns.truncate(rows)
        raise translate(e) from None
    except IndexError:
        columns.truncate(rows)
        raise translate(CorruptRecordError(end, "last record's fields run past the end of the records")) from None
    if columns.timestamp_types is not None:
        columns.timestamp_types.extend([int(header.timestamp_type)] * header.records_count)
    return header


def native_walk(buf: Buffer, pos: int, call: Callable[[bytes, int, int, BatchHeader], T], *,
                verify_crc: bool = True, source: str | None = None, header: BatchHeader | None = None) -> T:
    """``call(data, start, end, header)``: a native kernel's walk over the records of the batch at
    ``pos``, given exactly what ``walk_records`` checks first (header, CRC, decompression), its
    errors placed in ``buf`` as ``walk_records`` places them. ``header``: as for ``walk_records``."""
    kernel = native.kernel
    if kernel is None:
        raise RuntimeError("native_walk without the native kernel")
    if header is None:
        header = checked_header(buf, pos, verify_crc, source)
    elif header.records_count < 0:
        raise CorruptRecordError(pos + RECORDS_COUNT_OFFSET, f"Found invalid record count {header.records_count} "
                                 "in magic v2 batch", source=source)
    data, start, end, translate = records_region(buf, pos, header, source)
    try:
        return call(data, start, end, header)
    except kernel.RecordError as e:
        raise translate(CorruptRecordError(*e.args)) from None
    except IndexError:
        raise translate(CorruptRecordError(end, "last record's fields run past the end of the records")) from None


class ErrorPlacer:
    """Turns an error at a position inside the records' bytes into one about ``buf``."""

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


def checked_header(buf: Buffer, pos: int, verify_crc: bool, source: str | None) -> BatchHeader:
    if verify_crc:
        header = validate_batch(buf, pos, source=source)
    else:
        header = parse_header(buf, pos, source=source)
        require_complete(buf, pos, header, source=source)
    if header.records_count < 0:
        raise CorruptRecordError(
            pos + RECORDS_COUNT_OFFSET, f"Found invalid record count {header.records_count} in magic v2 batch", source=source
        )
    return header


def records_region(buf: Buffer, pos: int, header: BatchHeader, source: str | None
                   ) -> tuple[bytes, int, int, ErrorPlacer]:
    """The record bytes as ``bytes`` plus their bounds, and how to place error positions in ``buf``."""
    start = pos + V2_HEADER_SIZE
    end = pos + header.size
    codec = header.compression
    if codec != Compression.NONE:
        data = decompress(codec, memoryview(buf)[start:end], position=start, source=source)
        return data, 0, len(data), ErrorPlacer(0, pos, True, source)
    if isinstance(buf, bytes):
        return buf, start, end, ErrorPlacer(0, pos, False, source)
    # One copy to bytes: indexing and slicing bytes is the fastest, and the
    # record fields have to become bytes anyway.
    return bytes(buf[start:end]), 0, header.size - V2_HEADER_SIZE, ErrorPlacer(start, pos, False, source)


def bad_length(length: int, remaining: int) -> str:
    if length < MIN_RECORD_BODY:
        return f"Invalid record size: {length} is below the {MIN_RECORD_BODY}-byte minimum record body"
    return (
        f"Invalid record size: expected {length} bytes in record payload, "
        f"but instead the buffer has only {remaining} remaining bytes."
    )


def _walk(data: bytes, p: int, end: int, h: BatchHeader, columns: RecordColumns) -> None:
    count = h.records_count
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    append_time = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    dv = decode_varint
    add_offset = columns.offsets.append
    add_timestamp = columns.timestamps.append
    add_record = None if columns.as_records is None else columns.as_records.append
    add_key = None if columns.keys is None else columns.keys.append
    add_value = None if columns.values is None else columns.values.append
    add_headers = None if columns.headers is None else columns.headers.append
    copy_key = add_record is not None or add_key is not None  # a Record has every field
    copy_value = add_record is not None or add_value is not None
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()
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
            if copy_key:
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
            if copy_value:
                value = data[p : p + size]
            p += size
        else:
            raise CorruptRecordError(p, f"value of {size} bytes overruns its record by {p + size - rec_end} bytes")
        if p < rec_end and data[p] == 0:  # no headers: the common case
            p += 1
            headers = ()
        else:
            header_count, p = dv(data, p, end=rec_end)
            headers, p = read_headers(data, p, rec_end, header_count)
        if p != rec_end:
            raise CorruptRecordError(
                rec_start,
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {p - (rec_end - length)}",
            )
        if add_record is not None:
            add_record(Record(base_offset + offset_delta, base_ts + ts_delta if append_time is None else append_time,
                              key, value, headers))
            continue
        add_offset(base_offset + offset_delta)
        add_timestamp(base_ts + ts_delta if append_time is None else append_time)
        if add_key is not None:
            add_key(key)
        if add_value is not None:
            add_value(value)
        if add_headers is not None:
            add_headers(headers)
    if p != end:
        raise CorruptRecordError(
            p, f"Incorrect declared batch size, records still remaining in file: {end - p} bytes after {count} records"
        )


def nullable_bytes(data: bytes, p: int, rec_end: int) -> tuple[bytes | None, int]:
    size, p = decode_varint(data, p, end=rec_end)
    if size < 0:  # Kafka's Utils.readBytes: any negative length is null
        return None, p
    if p + size > rec_end:
        raise CorruptRecordError(p, f"field of {size} bytes overruns its record by {p + size - rec_end} bytes")
    return data[p : p + size], p + size


def read_headers(data: bytes, p: int, rec_end: int, count: int) -> tuple[tuple[Header, ...], int]:
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
        value, p = nullable_bytes(data, p + key_size, rec_end)
        headers.append(Header(key, value))
    return tuple(headers), p
