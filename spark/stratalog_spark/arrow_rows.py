"""Raw record batches → Arrow ``RecordBatch``es of the (projected) Kafka schema.

Spark moves rows from a Python data source to the JVM as Arrow. Yielding
Arrow batches directly skips PySpark's per-row conversion (several times
faster than tuples). With the native record kernel, its ``ColumnBuilder``
walks each batch's records straight into Arrow's buffers (no Python object per
record); Arrow wraps them as they are. Without it, or when headers are asked
for, the engine's record walk (``stratalog.records.walk_records``) appends
records to per-column lists, only for the columns the query asked for, and
each list becomes one Arrow array per ~64k rows. The two give the same rows
and, for damaged records, the same error (tests/spark/test_arrow_rows_native.py);
only where they cut the rows into Arrow batches may differ (the native one also
hands its rows over before a v0/v1 entry, and at 64 MiB of keys and values).

What a Kafka consumer sees is what a row is: control batches (transaction
markers) are never rows; with ``read_committed`` isolation, data of aborted
transactions is not either (Kafka's ``isolation.level``; the default, as for
Spark's Kafka source, is ``read_uncommitted``). CRCs are checked by the store
before a batch gets here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from stratalog.records import (MAGIC_OFFSET, BatchHeader, Header, RecordColumns, TimestampType, decode_any, native,
                               native_walk, parse_header, parse_legacy_entry, walk_records)
from .schema import HEADERS
from .transactions import AbortedFilter

ROWS_PER_BATCH = 65_536
# A native batch is handed over once its keys and values hold this much, whatever its rows: Arrow's
# binary columns end at 2 GiB, and memory should not grow with record size.
DATA_BYTES_PER_BATCH = 64 << 20
_TS_MS = pa.timestamp("ms", tz="UTC")


def _empty(schema: pa.Schema) -> RecordColumns:
    names = set(schema.names)
    return RecordColumns(keys=[] if "key" in names else None, values=[] if "value" in names else None,
                         headers=[] if HEADERS in names else None, timestamp_types=[])


def to_record_batch(columns: RecordColumns, schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
    rows = len(columns)
    arrays = []
    for name in schema.names:
        field_type = schema.field(name).type
        if name == "key":
            arrays.append(pa.array(columns.keys, field_type))
        elif name == "value":
            arrays.append(pa.array(columns.values, field_type))
        elif name in _CONSTANT:
            arrays.append(_constant(name, field_type, topic, partition, rows))
        elif name == "offset":
            arrays.append(pa.array(columns.offsets, field_type))
        elif name == "timestamp":
            # Milliseconds as Kafka keeps them; Spark wants microseconds (a lossless cast).
            arrays.append(pa.array(columns.timestamps, _TS_MS).cast(field_type))
        elif name == "timestampType":
            assert columns.timestamp_types is not None
            arrays.append(pa.array(columns.timestamp_types, field_type))
        else:
            assert columns.headers is not None
            arrays.append(_headers_array(columns.headers, field_type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_CONSTANT = ("topic", "partition")   # one value for every row of a range


def _constant(name: str, field_type: pa.DataType, topic: str, partition: int, rows: int) -> pa.Array:
    return pa.repeat(pa.scalar(topic if name == "topic" else partition, field_type), rows)


def _headers_array(per_record: list[tuple[Header, ...]], field_type: pa.DataType) -> pa.Array:
    """list<struct<key, value>> built from flat arrays (no per-header Python dicts)."""
    offsets = [0]
    keys: list[str] = []
    values: list[bytes | None] = []
    for headers in per_record:
        for header in headers:
            keys.append(header.key)
            values.append(header.value)
        offsets.append(len(keys))
    struct_type = field_type.value_type
    entries = pa.StructArray.from_arrays(
        [pa.array(keys, struct_type.field(0).type), pa.array(values, struct_type.field(1).type)],
        fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=field_type)


def _add_legacy(columns: RecordColumns, data: bytes) -> None:
    """A v0/v1 entry (a compressed wrapper holds several records): through the engine's decoder."""
    timestamp_type = int(parse_legacy_entry(data, verify_crc=False).timestamp_type)
    records = decode_any(data, 0, verify_crc=False)[1]
    columns.offsets.extend(r.offset for r in records)
    columns.timestamps.extend(r.timestamp for r in records)
    if columns.keys is not None:
        columns.keys.extend(r.key for r in records)
    if columns.values is not None:
        columns.values.extend(r.value for r in records)
    if columns.headers is not None:
        columns.headers.extend(() for _ in records)
    assert columns.timestamp_types is not None
    columns.timestamp_types.extend([timestamp_type] * len(records))


def record_batches(raw_batches: Iterable[bytes], schema: pa.Schema, topic: str, partition: int, start: int,
                   end: int, *, aborted: AbortedFilter | None = None,
                   rows_per_batch: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The records with offsets in [start, end) of ``raw_batches``, as Arrow batches of ``schema``."""
    if native.kernel is not None and HEADERS not in schema.names:
        yield from _native_record_batches(native.kernel, raw_batches, schema, topic, partition, start, end,
                                          aborted, rows_per_batch)
        return
    columns = _empty(schema)
    for data in raw_batches:
        rows = len(columns)
        if data[MAGIC_OFFSET] >= 2:
            header = _data_header(data, aborted)
            if header is None:
                continue
            walk_records(data, 0, columns, header=header)  # the store checked the whole batch (CRC)
            inside = _inside(header, start, end)
        else:
            _add_legacy(columns, data)
            inside = False  # a wrapper's inner offsets are known only once decoded
        if not inside:
            columns.filter_range(rows, start, end)
        if len(columns) >= rows_per_batch:
            yield to_record_batch(columns, schema, topic, partition)
            columns = _empty(schema)
    if len(columns):
        yield to_record_batch(columns, schema, topic, partition)


def _data_header(data: bytes, aborted: AbortedFilter | None) -> BatchHeader | None:
    """The header of a v2 batch whose records are rows; None for a control batch (which the
    aborted-transaction filter still sees) or a batch of an aborted transaction."""
    header = parse_header(data)
    if header.is_control:
        if aborted is not None:
            aborted.on_control(header, data)
        return None
    if aborted is not None and aborted.is_aborted(header):
        return None
    return header


def _inside(header: BatchHeader, start: int, end: int) -> bool:
    """Whether every record of the batch is in [start, end) by its header: its records are then
    kept without looking at their own offsets."""
    return start <= header.base_offset and header.last_offset < end


def _native_record_batches(kernel: Any, raw_batches: Iterable[bytes], schema: pa.Schema, topic: str,
                           partition: int, start: int, end: int, aborted: AbortedFilter | None,
                           rows_per_batch: int) -> Iterator[pa.RecordBatch]:
    """``record_batches`` through the native ``ColumnBuilder``: same rows, same errors."""
    builder = kernel.ColumnBuilder("key" in schema.names, "value" in schema.names)

    def add(data: bytes, first: int, last: int, header: BatchHeader) -> int:
        append_time = header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        inside = _inside(header, start, end)
        return int(builder.add(data, first, last, header.records_count, header.base_offset, header.base_timestamp,
                               append_time, int(header.timestamp_type), None if inside else start,
                               None if inside else end))

    for data in raw_batches:
        if data[MAGIC_OFFSET] < 2:
            if len(builder):  # rows keep their order: what is built goes first
                yield _from_buffers(builder.take(), schema, topic, partition)
            columns = _empty(schema)
            _add_legacy(columns, data)
            columns.filter_range(0, start, end)
            if len(columns):
                yield to_record_batch(columns, schema, topic, partition)
            continue
        header = _data_header(data, aborted)
        if header is None:
            continue
        native_walk(data, 0, add, verify_crc=False, header=header)  # the store checked the whole batch (CRC)
        if len(builder) >= rows_per_batch or builder.data_bytes >= DATA_BYTES_PER_BATCH:
            yield _from_buffers(builder.take(), schema, topic, partition)
    if len(builder):
        yield _from_buffers(builder.take(), schema, topic, partition)


def _from_buffers(taken: tuple[Any, ...], schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
    rows, offsets, timestamps, timestamp_types, keys, values = taken
    arrays = []
    for name in schema.names:
        field_type = schema.field(name).type
        if name == "key" or name == "value":
            nulls, validity, value_offsets, data = keys if name == "key" else values
            arrays.append(pa.Array.from_buffers(field_type, rows, [
                None if validity is None else pa.py_buffer(validity), pa.py_buffer(value_offsets),
                pa.py_buffer(data)], null_count=nulls))
        elif name in _CONSTANT:
            arrays.append(_constant(name, field_type, topic, partition, rows))
        elif name == "offset":
            arrays.append(pa.Array.from_buffers(field_type, rows, [None, pa.py_buffer(offsets)]))
        elif name == "timestamp":
            # Milliseconds as Kafka keeps them; Spark wants microseconds (a lossless cast).
            arrays.append(pa.Array.from_buffers(_TS_MS, rows, [None, pa.py_buffer(timestamps)]).cast(field_type))
        else:
            assert name == "timestampType", name
            arrays.append(pa.Array.from_buffers(field_type, rows, [None, pa.py_buffer(timestamp_types)]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
