"""What a consumer keeps of a fetch: the whole batches at its start (``records.info.whole_batches``).

A fetch of ``max_bytes`` may end inside a batch; a consumer keeps the batches before it and
fetches again from the next offset. Both kernels walk the headers; these tests hold the native
walk to the Python one on any run of batches, cut anywhere and damaged anywhere in the header
bytes the walk reads: the same summary, or the same ``CorruptRecordError`` at the same byte.
"""

from __future__ import annotations

import struct
from types import ModuleType

import stratalog_native
from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CorruptRecordError
from stratalog.records import Record, build_batch
from stratalog.records.info import WholeBatches, iter_batch_infos, whole_batches

from kernel_choice import kernel
from test_records import legacy_entry

T0 = 1_700_000_000_000


def run_of_batches(counts: list[int], base: int = 0) -> bytes:
    """Batches of ``counts`` records each, at consecutive offsets from ``base``."""
    out = []
    for count in counts:
        out.append(build_batch([Record(base + i, T0, None, b"v" * (i % 7)) for i in range(count)], base_offset=base))
        base += count
    return b"".join(out)


def walked(module: ModuleType | None, data: bytes | bytearray | memoryview) -> object:
    with kernel(module):
        try:
            return whole_batches(data)
        except CorruptRecordError as error:
            return ("CorruptRecordError", error.position, error.reason)


def both(data: bytes | bytearray | memoryview) -> object:
    python, rust = walked(None, data), walked(stratalog_native, data)
    assert rust == python
    return python


def test_a_fetch_cut_inside_its_third_batch_keeps_the_first_two():
    data = run_of_batches([3, 5, 4], base=100)
    third_starts = len(run_of_batches([3, 5]))
    cut = data[: third_starts + 30]
    assert both(cut) == WholeBatches(third_starts, 2, 8, 107)


def test_a_fetch_of_whole_batches_is_kept_whole_and_an_empty_one_keeps_nothing():
    data = run_of_batches([1, 2])
    assert both(data) == WholeBatches(len(data), 2, 3, 2)
    assert both(b"") == WholeBatches(0, 0, 0, -1)
    assert both(data[:17]) == WholeBatches(0, 0, 0, -1)   # no more than the bytes up to a magic


def test_legacy_entries_are_walked_by_the_python_kernel_and_have_no_record_count():
    data = legacy_entry(0, 1, None, b"a", timestamp=T0) + run_of_batches([2], base=1)
    assert both(data) == WholeBatches(len(data), 2, None, 2)


def test_a_size_field_below_the_minimum_fails_alike_and_names_its_byte():
    data = bytearray(run_of_batches([2, 2]))
    second = len(run_of_batches([2]))
    struct.pack_into(">i", data, second + 8, 13)
    assert both(bytes(data)) == ("CorruptRecordError", second + 8,
                                 "Found record size 13 smaller than minimum record overhead (14)")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=8), st.integers(0, 1 << 40), st.data())
def test_any_run_of_batches_cut_anywhere_is_walked_alike(counts, base, draw):
    data = run_of_batches(counts, base)
    cut = data[: draw.draw(st.integers(0, len(data)))]
    kept = both(cut)
    assert isinstance(kept, WholeBatches)
    assert kept.size == sum(info.size for info in iter_batch_infos(cut))   # the reference, batch by batch


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.data())
def test_a_header_damaged_where_the_walk_reads_it_is_walked_or_refused_alike(counts, draw):
    data = bytearray(run_of_batches(counts))
    starts = [0]
    for info in iter_batch_infos(bytes(data)):
        starts.append(info.position + info.size)
    at = draw.draw(st.sampled_from(starts[:-1])) + draw.draw(st.sampled_from([0, 7, 8, 11, 16, 23, 26, 57, 60]))
    data[at] = draw.draw(st.integers(0, 255))
    both(bytes(data[: draw.draw(st.integers(0, len(data)))]))


def test_a_last_offset_past_int64_is_left_to_the_python_walk_and_read_as_it_reads_it():
    data = bytearray(run_of_batches([2]))
    struct.pack_into(">q", data, 0, (1 << 63) - 1)   # base offset at the top of int64, delta 1
    assert both(bytes(data)) == WholeBatches(len(data), 1, 2, 1 << 63)


def test_any_buffer_of_batches_is_walked_alike_whatever_holds_it():
    data = run_of_batches([3, 2])
    for held in (bytearray(data), memoryview(data)):
        assert both(held) == WholeBatches(len(data), 2, 5, 4)
