"""v2 records decoded straight into column lists: the data source's hot loop.

The engine's ``decode_records`` builds one ``Record`` per record and checks
every field against its record's bounds, which is right for the engine and
about half of a Spark read's time. Here each batch's records are walked once
and appended to per-column lists, and the columns a query did not ask for
(a projection without ``value``, say) are skipped without being copied.

This walk is only taken for batches whose CRC the store has already checked,
so the bytes are the ones the producer wrote and the engine validated. Still,
a batch that does not walk cleanly is never guessed at: whatever the fast walk
appended is dropped and the batch is decoded again by the engine's own
decoder, which either succeeds or raises ``CorruptRecordError`` naming the
byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stratalog.records import BatchHeader, Compression, Header, TimestampType, decode_records, decompress
from stratalog.records.varint import decode_varint

V2_HEADER_SIZE = 61


@dataclass
class Columns:
    """The decoded columns so far; a list is None when its column is not wanted."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] | None = None
    values: list[bytes | None] | None = None
    headers: list[tuple[Header, ...]] | None = None
    timestamp_types: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def _lists(self) -> list[list[Any]]:
        columns = (self.offsets, self.timestamps, self.keys, self.values, self.headers, self.timestamp_types)
        return [column for column in columns if column is not None]

    def truncate(self, rows: int) -> None:
        for column in self._lists():
            del column[rows:]

    def filter_range(self, first_row: int, start: int, end: int) -> None:
        """Drop rows from ``first_row`` on whose offsets are outside [start, end) (a range's edge batches)."""
        keep = [i for i in range(first_row, len(self.offsets)) if start <= self.offsets[i] < end]
        for column in self._lists():
            column[first_row:] = [column[i] for i in keep]


def _records_bytes(data: bytes, header: BatchHeader) -> bytes:
    codec = header.compression
    if codec == Compression.NONE:
        return data[V2_HEADER_SIZE:header.size]
    return decompress(codec, memoryview(data)[V2_HEADER_SIZE:header.size], position=V2_HEADER_SIZE)


def add_batch(columns: Columns, data: bytes, header: BatchHeader) -> None:
    """Append the records of one (CRC-checked) v2 data batch to ``columns``."""
    rows = len(columns)
    try:
        _walk(columns, _records_bytes(data, header), header)
    except Exception:  # noqa: BLE001 - anything odd: the engine's decoder decides, with a precise error
        columns.truncate(rows)
        _add_records(columns, data, header)


def _add_records(columns: Columns, data: bytes, header: BatchHeader) -> None:
    records = decode_records(data, 0, verify_crc=False)
    columns.offsets.extend(r.offset for r in records)
    columns.timestamps.extend(r.timestamp for r in records)
    if columns.keys is not None:
        columns.keys.extend(r.key for r in records)
    if columns.values is not None:
        columns.values.extend(r.value for r in records)
    if columns.headers is not None:
        columns.headers.extend(r.headers for r in records)
    columns.timestamp_types.extend([int(header.timestamp_type)] * len(records))


def _walk(columns: Columns, data: bytes, header: BatchHeader) -> None:
    # ZigZag varints of one and two bytes are decoded inline (lengths below 8 KiB, deltas below
    # 4096: nearly all of them), longer ones by decode_varint, as the engine's decoder does.
    count = header.records_count
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    append_time = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    offsets, timestamps = columns.offsets, columns.timestamps
    keys, values, headers = columns.keys, columns.values, columns.headers
    dv = decode_varint
    end = len(data)
    p = 0
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            length = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            length, p = dv(data, p)
        record_end = p + length
        if record_end > end or length < 6:
            raise ValueError("record overruns its batch")
        b = data[p + 1]  # after the attributes byte
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 2
        elif (c := data[p + 2]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            ts_delta = (u >> 1) ^ -(u & 1)
            p += 3
        else:
            ts_delta, p = dv(data, p + 1)
        b = data[p]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            offset_delta = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            offset_delta, p = dv(data, p)
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            size = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            size, p = dv(data, p)
        if size < 0:
            if keys is not None:
                keys.append(None)
        else:
            if keys is not None:
                keys.append(data[p : p + size])
            p += size
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := data[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            size = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            size, p = dv(data, p)
        if size < 0:
            if values is not None:
                values.append(None)
        else:
            if values is not None:
                values.append(data[p : p + size])
            p += size
        if p >= record_end:
            raise ValueError("record fields overrun the record")
        if headers is not None:
            headers.append(() if data[p] == 0 else _headers(data, p, record_end))
        offsets.append(base_offset + offset_delta)
        timestamps.append(base_ts + ts_delta if append_time is None else append_time)
        p = record_end
    if p != end:
        raise ValueError("bytes left after the declared records")
    columns.timestamp_types.extend([int(header.timestamp_type)] * count)


def _headers(data: bytes, p: int, record_end: int) -> tuple[Header, ...]:
    count, p = decode_varint(data, p)
    found = []
    for _ in range(count):
        size, p = decode_varint(data, p)
        key = data[p:p + size].decode("utf-8")
        p += size
        size, p = decode_varint(data, p)
        value: Any = None if size < 0 else data[p:p + size]
        if size > 0:
            p += size
        found.append(Header(key, value))
    if p != record_end:
        raise ValueError("headers do not end with their record")
    return tuple(found)
