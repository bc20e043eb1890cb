"""The Spark data source's rows built by the native kernel (``ColumnBuilder``, records straight into
Arrow's buffers) against the pure-Python walk: the same rows for any batches, codecs, ranges and
projections, and for damaged records the same ``CorruptRecordError`` at the same byte position."""

from __future__ import annotations

from types import ModuleType

import pyarrow as pa
import pytest
import stratalog_native
from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CorruptRecordError
from stratalog.records import Compression, Header, Record, TimestampType, build_batch, native
from stratalog.records.control import ControlRecordType, build_end_txn_marker_batch
from stratalog_spark.arrow_rows import record_batches
from stratalog_spark.schema import ALL_COLUMNS, KAFKA_COLUMNS, arrow_schema
from test_records import legacy_entry
from kernel_choice import kernel

T0 = 1_700_000_000_000
RECORDS_START = 61

_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2),
              st.integers(-(1 << 20), 1 << 20)),
    min_size=1, max_size=12)
_projections = st.sampled_from([KAFKA_COLUMNS, ("partition", "offset", "key"), ("value",), ("offset", "timestamp"),
                                ("timestampType", "topic")])


def rows(module: ModuleType | None, raw: list[bytes], columns: tuple[str, ...], start: int, end: int,
         rows_per_batch: int = 65_536) -> object:
    """The table ``record_batches`` yields with this kernel, or the error it raises."""
    schema = arrow_schema(columns)
    with kernel(module):
        try:
            batches = list(record_batches(raw, schema, "t", 3, start, end, rows_per_batch=rows_per_batch))
        except CorruptRecordError as error:
            return ("CorruptRecordError", error.position, error.reason)
        except (ValueError, OverflowError):  # a timestamp or offset past 64 bits: unrepresentable either way
            return ("unrepresentable",)
    for batch in batches:
        assert batch.schema.equals(schema)
    return pa.Table.from_batches(batches, schema=schema).combine_chunks()


def alike(raw: list[bytes], columns: tuple[str, ...], start: int = 0, end: int = 1 << 62, **kw: int) -> object:
    python, rust = rows(None, raw, columns, start, end, **kw), rows(stratalog_native, raw, columns, start, end, **kw)
    if isinstance(python, pa.Table):
        assert isinstance(rust, pa.Table) and rust.equals(python), (rust, python)
    else:
        assert rust == python
    return python


def batches(groups: list[list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]],
            codec: Compression = Compression.NONE, timestamp_type: TimestampType = TimestampType.CREATE_TIME
            ) -> list[bytes]:
    raw, offset = [], 0
    for fields in groups:
        records = [Record(offset + i, T0 + ts, k, v, tuple(Header(hk, hv) for hk, hv in hs))
                   for i, (k, v, hs, ts) in enumerate(fields)]
        raw.append(build_batch(records, base_offset=offset, compression=codec, timestamp_type=timestamp_type))
        offset += len(fields)
    return raw


def test_the_spark_tests_run_the_native_kernel():
    assert native.kernel is stratalog_native


@settings(max_examples=200, deadline=None)
@given(st.lists(_records, min_size=1, max_size=4), st.sampled_from(list(Compression)),
       st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]), _projections, st.integers(0, 30), st.integers(0, 40),
       st.integers(1, 20))
def test_any_batches_give_the_same_rows_for_any_range_and_projection(groups, codec, timestamp_type, columns, start,
                                                                       length, rows_per_batch):
    table = alike(batches(groups, codec, timestamp_type), columns, start, start + length,
                  rows_per_batch=rows_per_batch)
    assert isinstance(table, pa.Table)
    assert table.num_rows == max(0, min(start + length, sum(map(len, groups))) - start)


@settings(max_examples=400, deadline=None)
@given(_records, st.data())
def test_a_byte_damaged_anywhere_in_the_records_fails_alike(fields, draw):
    data = bytearray(batches([fields])[0])
    for _ in range(draw.draw(st.integers(1, 3))):
        position = draw.draw(st.integers(RECORDS_START, len(data) - 1))
        data[position] = draw.draw(st.integers(0, 255))
    alike([bytes(data)], KAFKA_COLUMNS)


def test_a_damaged_batch_is_named_at_its_byte_after_good_ones_were_read():
    good, bad = batches([[(b"k", b"v", [], 0)], [(b"k2", b"v2", [], 0)]])
    broken = bytearray(bad)
    broken[RECORDS_START] = 0x7F  # the record's length: far past the records
    outcome = alike([good, bytes(broken)], KAFKA_COLUMNS)
    assert outcome[:2] == ("CorruptRecordError", RECORDS_START)


def test_legacy_entries_between_v2_batches_keep_their_place():
    first, _, last = batches([[(b"a", b"1", [], 0)], [(b"x", b"x", [], 0)], [(b"c", b"3", [], 0)]])
    legacy = legacy_entry(1, 1, b"b", b"2", timestamp=T0)  # in place of the batch at offset 1
    table = alike([first, legacy, last], KAFKA_COLUMNS)
    assert table.column("offset").to_pylist() == [0, 1, 2]
    assert table.column("key").to_pylist() == [b"a", b"b", b"c"]


def test_control_batches_are_never_rows_and_nulls_stay_null():
    data = batches([[(None, b"v", [], 0), (b"k", None, [], 1)]])
    marker = build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0,
                                        coordinator_epoch=0, base_offset=2, timestamp=T0)
    table = alike([*data, marker], KAFKA_COLUMNS)
    assert table.column("offset").to_pylist() == [0, 1]
    assert table.column("key").to_pylist() == [None, b"k"]
    assert table.column("value").to_pylist() == [b"v", None]


def test_headers_are_read_by_the_python_walk_whichever_kernel_is_installed():
    data = batches([[(b"k", b"v", [("h", b"1")], 0)]])
    table = alike(data, ALL_COLUMNS)
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}]]


@pytest.mark.parametrize(("rows_per_batch", "sizes"), [(1, [2, 2, 2]), (3, [4, 2]), (65_536, [6])])
def test_rows_are_handed_over_once_a_whole_batch_reaches_the_asked_rows(rows_per_batch, sizes):
    data = batches([[(b"k", b"v", [], 0)] * 2] * 3)
    for module in (None, stratalog_native):
        with kernel(module):
            assert [b.num_rows for b in record_batches(data, arrow_schema(KAFKA_COLUMNS), "t", 0, 0, 6,
                                                        rows_per_batch=rows_per_batch)] == sizes


def test_records_past_the_range_near_int64s_end_are_dropped_before_their_offsets_must_fit():
    base = (1 << 63) - 3
    raw = build_batch([Record(base + i, T0, b"k%d" % i, b"v") for i in range(6)], base_offset=base)
    table = alike([raw], ("offset", "key"), base, (1 << 63) - 1)
    assert table.column("offset").to_pylist() == [base, base + 1]
