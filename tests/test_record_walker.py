"""The one walk over v2 records: into columns, only the wanted ones copied, damage named exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CorruptRecordError
from stratalog.records import (
    Compression,
    Header,
    Record,
    RecordColumns,
    build_batch,
    decode_records,
    walk_records,
)

T0 = 1_700_000_000_000


def test_the_walk_gives_every_field_of_every_codec_and_field_shape():
    records = [Record(i, T0 + i * 777, None if i % 5 == 0 else b"k" * (i * 40),
                      None if i % 7 == 0 else b"v" * (i * 300), (Header("h", None), Header("h", b"x")) if i % 3 else ())
               for i in range(40)]
    for codec in Compression:
        data = build_batch(records, compression=codec)
        columns = RecordColumns.every_field()
        walk_records(data, 0, columns)
        assert columns.offsets == [r.offset for r in records]
        assert columns.timestamps == [r.timestamp for r in records]
        assert (columns.keys, columns.values, columns.headers) == (
            [r.key for r in records], [r.value for r in records], [r.headers for r in records])
        assert decode_records(data) == records


def test_a_field_nobody_asked_for_is_stepped_over():
    data = build_batch([Record(i, T0, b"key", b"value" * 10) for i in range(3)])
    columns = RecordColumns(keys=[], timestamp_types=[])
    walk_records(data, 0, columns)
    assert columns.keys == [b"key"] * 3 and columns.values is None and columns.headers is None
    assert columns.timestamp_types == [0, 0, 0]


def test_a_record_running_past_its_batch_is_named_and_leaves_the_columns_as_they_were():
    good = build_batch([Record(0, T0, b"k", b"v")])
    data = bytearray(build_batch([Record(0, 0, b"k", b"v" * 50), Record(1, 0, b"k", b"w")]))
    data[61] = 0x7E  # the first record's length: 63 bytes, past its batch
    columns = RecordColumns(keys=[], values=[])
    walk_records(good, 0, columns)
    with pytest.raises(CorruptRecordError, match="Invalid record size") as caught:
        walk_records(bytes(data), 0, columns, verify_crc=False, source="seg.log")
    assert caught.value.position == 61 and "seg.log" in str(caught.value)
    assert columns.offsets == [0] and columns.keys == [b"k"] and columns.values == [b"v"]


_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2)),
    min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(_records, st.sampled_from(list(Compression)), st.sets(st.sampled_from(["keys", "values", "headers"])))
def test_any_projection_of_any_batch_agrees_with_the_full_decode(fields, codec, wanted):
    records = [Record(i, T0 + i, k, v, tuple(Header(hk, hv) for hk, hv in hs)) for i, (k, v, hs) in enumerate(fields)]
    data = build_batch(records, compression=codec)
    columns = RecordColumns(**{name: [] for name in wanted})
    walk_records(data, 0, columns)
    assert columns.offsets == [r.offset for r in records] and columns.timestamps == [r.timestamp for r in records]
    for name, attribute in (("keys", "key"), ("values", "value"), ("headers", "headers")):
        assert getattr(columns, name) == ([getattr(r, attribute) for r in records] if name in wanted else None)


@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_a_damaged_batch_is_a_corrupt_record_error_and_adds_no_row(fields, draw):
    records = [Record(i, T0 + i, k, v, tuple(Header(hk, hv) for hk, hv in hs)) for i, (k, v, hs) in enumerate(fields)]
    data = bytearray(build_batch(records))
    position = draw.draw(st.integers(61, len(data) - 1))  # inside the records, past the header
    data[position] = draw.draw(st.integers(0, 255).filter(lambda b: b != data[position]))
    columns = RecordColumns.every_field()
    try:
        walk_records(bytes(data), 0, columns, verify_crc=False)
    except CorruptRecordError as error:
        assert 61 <= error.position <= len(data)
        assert len(columns) == 0 and columns.keys == [] and columns.values == [] and columns.headers == []
    else:  # a byte of a key or value changed: still well formed, every row there
        assert len(columns) == len(records)
