"""The partition log: offsets, segments, indexes, reads, timestamps, truncation, validation."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from conftest import batch, held_elsewhere, region_bytes
from stratalog.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from stratalog.common.config import LogConfig
from stratalog.storage.log import Log
from stratalog.storage.timestamp_search import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from stratalog.records import Compression, Record, TimestampType, build_batch, decode_records, parse_header


def _open_paths() -> set[str]:
    """The paths this process holds open (its /proc/self/fd), a descriptor closed meanwhile left out."""
    paths = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            paths.add(str(fd.readlink()))
        except OSError:
            pass
    return paths


def snapshot(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def all_offsets(log) -> list[int]:
    return [r.offset for r in log.read_records(log.log_start_offset)]


def test_appends_get_contiguous_offsets_starting_at_the_log_end(make_log):
    log = make_log()
    first = log.append(batch(3))
    second = log.append(batch(2))
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5 == log.high_watermark
    assert all_offsets(log) == [0, 1, 2, 3, 4]


def test_offset_assignment_rewrites_only_the_header_of_an_uncompressed_batch(make_log):
    log = make_log()
    log.append(batch(1))
    produced = batch(4)
    log.append(produced)
    stored = log.read(1, 1 << 20).data
    assert stored[61:] == produced[61:]
    assert parse_header(stored).base_offset == 1
    assert parse_header(stored).crc == parse_header(produced).crc


def test_a_read_inside_a_batch_returns_the_whole_batch(make_log):
    log = make_log()
    log.append(batch(5))
    fetch = log.read(3, 1 << 20)
    assert parse_header(fetch.data).base_offset == 0
    assert [r.offset for r in decode_records(fetch.data)] == [0, 1, 2, 3, 4]


def test_reading_outside_the_log_is_offset_out_of_range(make_log):
    log = make_log()
    log.append(batch(2))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 3 is out of range; the log holds \[0, 2\)"):
        log.read(3, 100)
    assert log.read(2, 100).data == b""


def test_segments_roll_on_size_with_twenty_digit_names(make_log):
    log = make_log(segment_bytes=200)
    for _ in range(6):
        log.append(batch(1, value_size=60))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 1 and bases == sorted(bases)
    assert all(s.size <= 200 for s in log.segments)
    names = sorted(p.name for p in log.dir.glob("*.log"))
    assert names == [f"{b:020d}.log" for b in bases]
    assert all_offsets(log) == list(range(6))


def test_indexes_are_preallocated_while_active_and_trimmed_when_rolled(make_log):
    log = make_log(segment_bytes=300, segment_index_bytes=4096, index_interval_bytes=1)
    for _ in range(4):
        log.append(batch(1, value_size=100))
    inactive, active = log.segments[0], log.segments[-1]
    assert active.offset_index.path.stat().st_size == 4096
    assert active.time_index.path.stat().st_size == 4096 // 12 * 12
    assert inactive.offset_index.path.stat().st_size == 8 * inactive.offset_index.entries
    assert inactive.time_index.path.stat().st_size == 12 * inactive.time_index.entries


def test_the_offset_index_is_sparse_every_index_interval_bytes(make_log):
    log = make_log(index_interval_bytes=1000)
    for _ in range(10):
        log.append(batch(1, value_size=300))  # ~380-byte batches
    entries = log.active_segment.offset_index.entries_list()
    # No entry for the first append; then one each time more than 1000 bytes went by.
    assert len(entries) == 3
    positions = [p for _, p in entries]
    assert all(b - a > 1000 for a, b in zip([0] + positions, positions))
    for offset, position in entries:
        info = next(log.active_segment.log.batches(position))
        assert info.last_offset == offset


def test_roll_on_time_uses_record_timestamps_not_the_wall_clock(make_log):
    log = make_log(segment_ms=1000)
    log.append(batch(1, timestamp=10_000))
    log.append(batch(1, timestamp=10_500))
    assert len(log.segments) == 1
    log.append(batch(1, timestamp=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_relative_offsets_would_overflow_int32(make_log):
    log = make_log()
    log.append_raw(_batch_at(0))
    log.append_raw(_batch_at(2**31 + 5))
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]


def _batch_at(base: int) -> bytes:
    return build_batch([Record(base, 1_700_000_000_000, b"k", b"v")], base_offset=base)


def test_timestamp_lookup_finds_the_first_record_at_or_after_the_target(make_log):
    log = make_log(segment_bytes=400, index_interval_bytes=1)
    for i in range(20):
        log.append(batch(2, timestamp=1000 + 10 * i))
    found = log.offset_for_timestamp(1055)
    assert (found.offset, found.timestamp) == (12, 1060)
    assert log.offset_for_timestamp(1000).offset == 0
    assert log.offset_for_timestamp(1191).offset == 39
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 40
    assert log.offset_for_timestamp(MAX_TIMESTAMP).offset == 39


def test_truncation_removes_the_whole_batch_containing_the_target(make_log):
    log = make_log(segment_bytes=300)
    for _ in range(6):
        log.append(batch(2, value_size=40))
    assert log.truncate_to(5)
    assert log.log_end_offset == 4  # the batch [4, 5] straddled offset 5
    assert all_offsets(log) == [0, 1, 2, 3]
    log.append(batch(1))
    assert all_offsets(log) == [0, 1, 2, 3, 4]


def test_a_clean_reopen_needs_no_recovery_and_keeps_everything(make_log, tmp_path):
    log = make_log(segment_bytes=300)
    for _ in range(8):
        log.append(batch(1, value_size=50))
    log.flush()
    log.close()
    reopened = make_log(clean=True, segment_bytes=300)
    assert all_offsets(reopened) == list(range(8))
    reopened.append(batch(1))
    assert reopened.log_end_offset == 9


def test_flush_moves_the_recovery_point_and_flush_messages_flushes_on_append(make_log):
    log = make_log("a-0")
    log.append(batch(3))
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 3
    eager = make_log("b-0", flush_messages=1)
    eager.append(batch(2))
    assert eager.recovery_point == 2


def test_log_append_time_topics_stamp_the_broker_time(make_log, clock):
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append(batch(2, timestamp=5))
    assert info.log_append_time == clock.now
    data = log.read(0, 1 << 20).data
    header = parse_header(data)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME and header.max_timestamp == clock.now
    assert [r.timestamp for r in decode_records(data)] == [clock.now, clock.now]


def test_a_topic_compression_type_recompresses_the_batch(make_log):
    log = make_log(compression_type="gzip")
    log.append(batch(3))
    data = log.read(0, 1 << 20).data
    assert parse_header(data).compression == Compression.GZIP
    assert [r.value for r in decode_records(data)] == [r.value for r in decode_records(batch(3))]


@pytest.mark.parametrize(
    ("overrides", "bad", "error", "message"),
    [
        ({"max_message_bytes": 100}, batch(1, value_size=200), RecordTooLargeError, "max.message.bytes"),
        ({"segment_bytes": 100}, batch(1, value_size=200), RecordBatchTooLargeError, "segment.bytes"),
        ({"cleanup_policy": "compact"}, batch(2, key=None), InvalidRecordError, "record 0 of the batch has none"),
        ({}, batch(1, timestamp=1_700_000_000_000 + 7_200_000), InvalidTimestampError, "after.max.ms"),
        ({"message_timestamp_before_max_ms": 1000}, batch(1, timestamp=1_000), InvalidTimestampError,
         "before.max.ms"),
        ({}, batch(1)[:-1] + b"X", CorruptRecordError, "(?i)crc"),
        ({}, batch(1)[:40], CorruptRecordError, "byte"),
        ({}, batch(1) + batch(1), InvalidRecordError, "exactly one record batch"),
    ],
    ids=["too-large", "larger-than-segment", "keyless-on-compacted", "future-timestamp", "old-timestamp",
         "bad-crc", "truncated", "two-batches"],
)
def test_a_refused_batch_names_the_problem_and_changes_nothing_on_disk(make_log, overrides, bad, error, message):
    log = make_log(**overrides)
    log.append(batch(1))
    log.flush()
    before = snapshot(log.dir)
    with pytest.raises(error, match=message):
        log.append(bad)
    assert snapshot(log.dir) == before
    assert log.log_end_offset == 1


def test_several_batches_are_appended_contiguously_or_not_at_all(make_log):
    log = make_log()
    infos = log.append_batches([batch(2), batch(3)])
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 1), (2, 4)]
    log.flush()
    before = snapshot(log.dir)
    with pytest.raises(CorruptRecordError, match=r"^batch 2 of 3: .*(?i:crc)"):
        log.append_batches([batch(1), batch(1)[:-1] + b"X", batch(1)])
    assert snapshot(log.dir) == before  # the good first batch was not written either
    assert log.log_end_offset == 5


def test_batches_prepared_under_one_config_are_validated_again_after_it_changes(make_log):
    log = make_log()
    prepared = log.prepare_append([batch(1, key=None)])  # fine while the topic is not compacted
    log.update_config(LogConfig.from_overrides({"cleanup.policy": "compact"}))
    with pytest.raises(InvalidRecordError, match="record 0 of the batch has none"):
        log.append_prepared(prepared)
    assert log.log_end_offset == 0


def test_the_log_start_offset_never_passes_the_high_watermark(make_log):
    log = make_log()
    log.append(batch(3))
    assert log.maybe_increment_log_start_offset(2)
    assert log.read(2, 100).data
    with pytest.raises(OffsetOutOfRangeError, match="past the high watermark 3"):
        log.maybe_increment_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)


def test_a_read_whose_segment_files_vanish_mid_read_starts_again_on_the_current_segments(make_log):
    log = make_log(segment_bytes=300, file_delete_delay_ms=0)
    for _ in range(6):
        log.append(batch(2, value_size=40))
    stale = log.segments[0]
    # Retention removes the first segment and deletes its files while a reader still holds it.
    log.maybe_increment_log_start_offset(log.segments[1].base_offset)
    log.remove_segments([stale])
    log.delete_expired_files()
    original = log.local.segments_from   # the segments' half of the log, which a read walks
    calls = []

    def stale_first(offset):
        calls.append(offset)
        return iter([stale, *original(offset)]) if len(calls) == 1 else original(offset)

    log.local.segments_from = stale_first
    fetch = log.read(log.log_start_offset, 1 << 20)
    assert len(calls) == 2 and fetch.data
    assert parse_header(fetch.data).base_offset == log.log_start_offset


def test_a_rolled_segment_keeps_only_its_log_file_open(make_log):
    log = make_log(segment_bytes=200)
    for _ in range(30):
        log.append(batch(1, value_size=60))
    open_files = _open_paths()
    inactive = log.segments[:-1]
    assert len(inactive) > 10
    assert not any(str(s.offset_index.path) in open_files or str(s.time_index.path) in open_files for s in inactive)
    assert all(r.offset == i for i, r in enumerate(log.read_records(0)))  # still readable


# -- appends that must not block (an event loop's) ---------------------------------------------------
def test_an_append_that_only_writes_to_the_page_cache_is_made_at_once_like_any_other(make_log):
    log, twin = make_log("a-0"), make_log("b-0")
    log.append(batch(1))                                # the first append of epoch 0 writes its checkpoint
    twin.append(batch(1))
    for n in (3, 2):
        inline = log.try_append_prepared(log.prepare_append([batch(n)]))
        assert inline is not None
        assert inline == twin.append_batches([batch(n)])
    assert log.read(0, 1 << 20).data == twin.read(0, 1 << 20).data
    assert log.log_end_offset == 6 == log.high_watermark


def test_an_append_that_would_wait_for_the_lock_is_not_made(make_log):
    log = make_log()
    log.append(batch(1))
    with held_elsewhere(log.lock):
        assert log.try_append_prepared(log.prepare_append([batch(1)])) is None
    assert log.log_end_offset == 1
    assert log.try_append_prepared(log.prepare_append([batch(1)])) is not None


def test_an_append_that_would_roll_flush_or_write_the_epoch_checkpoint_is_left_to_a_thread(make_log):
    small = make_log("small-0", segment_bytes=300)
    small.append(batch(2))
    big = small.prepare_append([batch(4, value_size=40)])   # does not fit: the segment would roll
    assert small.try_append_prepared(big) is None
    assert small.log_end_offset == 2 and len(small.segments) == 1
    small.append_prepared(big)
    assert len(small.segments) == 2

    flushing = make_log("flushing-0", flush_messages=3)
    flushing.append(batch(1))                          # offset 0 (and epoch 0's checkpoint)
    assert flushing.try_append_prepared(flushing.prepare_append([batch(2)])) is None   # offset 3 is due a flush
    assert flushing.try_append_prepared(flushing.prepare_append([batch(1)])) is not None

    epoch = make_log("epoch-0")
    epoch.append(batch(1))
    epoch.leader_epoch = 4                             # a new epoch: its first append writes the checkpoint
    assert epoch.try_append_prepared(epoch.prepare_append([batch(1)])) is None
    epoch.append(batch(1))
    assert epoch.epoch_cache.latest_epoch() == 4
    assert epoch.try_append_prepared(epoch.prepare_append([batch(1)])) is not None

    several = make_log("several-0")
    several.append(batch(1))
    assert several.try_append_prepared(several.prepare_append([batch(1), batch(1)])) is None
    assert several.log_end_offset == 1


def test_only_a_small_uncompressed_batch_kept_as_sent_is_tried_on_an_event_loop(make_log):
    log = make_log("plain-0")
    assert log.may_append_inline([batch(3)])
    assert not log.may_append_inline([batch(3, compression=Compression.ZSTD)])   # a codec may expand without bound
    assert not log.may_append_inline([batch(1, value_size=(1 << 20) + 1)])
    assert not log.may_append_inline([batch(1), batch(1)])
    assert not make_log("recompressed-0", compression_type="zstd").may_append_inline([batch(3)])


def test_a_header_scan_yields_every_batch_with_its_header_and_steps_over_large_ones(make_log):
    from stratalog.storage.file_records import HEADER_SCAN_CHUNK
    log = make_log()
    sizes = [10, 3 * HEADER_SCAN_CHUNK, 100, 2 * HEADER_SCAN_CHUNK + 7, 10]   # large ones straddle the reads
    for n, size in enumerate(sizes):
        log.append(build_batch([Record(0, 1000 + n, None, b"v" * size)]))
    records = log.active_segment.log
    whole = list(records.batches_with_data())
    heads = list(records.batch_headers())
    assert [info for info, _ in heads] == [info for info, _ in whole]
    assert [head for _, head in heads] == [data[:61] for _, data in whole]
    with open(records.path, "ab") as file:    # a torn tail: a header whose batch never made it whole
        file.write(whole[-1][1][:70])
    records.size += 70
    assert [info for info, _ in records.batch_headers()] == [info for info, _ in whole]


@pytest.mark.parametrize("tail", [
    b"\x00" * 8 + (5000).to_bytes(4, "big") + b"\x00\x00\x00\x00\x07" + b"\x00" * 50,   # the start of a batch that never came
    b"\x00" * 11,                                                          # too short to hold a size
])
def test_a_header_scan_stops_at_a_torn_tail_as_the_full_scan_does(make_log, tail):
    log = make_log()
    for n in range(3):
        log.append(build_batch([Record(0, 1000 + n, None, b"v" * 100)]))
    records = log.active_segment.log
    whole = [info for info in records.batches()]
    with open(records.path, "ab") as file:
        file.write(tail)
    records.size += len(tail)
    assert [info for info in records.batches()] == whole
    assert [info for info, _ in records.batch_headers()] == whole


def test_a_header_scan_reads_legacy_messages_too(tmp_path):
    from stratalog.storage.file_records import FileRecords
    from test_dump_log import legacy_entry
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(legacy_entry(0, 0, b"k", b"v") + legacy_entry(1, 1, None, b"w" * 70_000, 1001)
                     + legacy_entry(2, 1, b"a", None, 1002))
    records = FileRecords(path)
    try:
        assert [info for info, _ in records.batch_headers()] == list(records.batches())
    finally:
        records.close()


# -- zero-copy reads: regions of the segment file ----------------------------------------------------
def test_a_zero_copy_read_is_the_region_of_the_segment_file_a_copying_read_returns(make_log):
    from stratalog.records import iter_batch_infos
    from stratalog.storage.batch_scan import HEADER_SCAN_CHUNK as _HEADERS_CHUNK
    log = make_log()
    # Small batches several to a header read, large ones costing a header read each, mixed.
    for n, size in enumerate([10, 3 * _HEADERS_CHUNK, 100, 100, 2 * _HEADERS_CHUNK + 7, 10, 5000, 10]):
        log.append(build_batch([Record(i, 1000 + n, b"k", b"v" * size) for i in range(1 + n % 3)]))
    for offset in range(log.log_end_offset):
        for max_bytes in (1, 200, _HEADERS_CHUNK, 1 << 20):
            copied = log.read(offset, max_bytes)
            zero_copy = log.read(offset, max_bytes, zero_copy=True)
            assert zero_copy.data == b"" and zero_copy.region is not None
            try:
                assert region_bytes(zero_copy.region) == copied.data
                assert zero_copy.size == len(copied.data)
                # Its batches, walked by their headers, are those of the bytes: a batch cut by the end is not one.
                assert zero_copy.region.batches() == list(iter_batch_infos(copied.data))
            finally:
                zero_copy.region.close()


def test_a_zero_copy_reads_bytes_stay_readable_after_its_segment_file_is_deleted_and_closed(make_log):
    log = make_log()
    log.append(batch(3))
    expected = log.read(0, 1 << 20).data
    region = log.read(0, 1 << 20, zero_copy=True).region
    segment = log.active_segment
    segment.log.path.unlink()
    log.close()
    try:
        assert region_bytes(region) == expected
    finally:
        region.close()
    assert segment.log._fd is None


def _broken_second_header(make_log) -> tuple[Log, int]:
    """A log of three batches whose second one's size field is below any batch's; and where it starts."""
    import os
    log = make_log()
    for _ in range(3):
        log.append(batch(2))
    second = log.active_segment.log.batches().__next__().size
    descriptor = os.open(log.active_segment.log.path, os.O_WRONLY)
    os.pwrite(descriptor, (5).to_bytes(4, "big"), second + 8)
    os.close(descriptor)
    # The file changed under the log: the header of a batch it appended now differs from what it
    # remembers of it, and a reopened log would remember nothing. The header is read again, as
    # after a restart (a running log trusts its own appends, as it trusts its index).
    log.active_segment.forget_positions()
    return log, second


def test_a_zero_copy_reads_batch_walk_names_the_file_position_of_a_broken_header(make_log):
    log, second = _broken_second_header(make_log)
    region = log.active_segment.log.region(second, 1 << 20)   # a region from mid-file, as most are
    try:
        with pytest.raises(CorruptRecordError) as raised:
            region.batches()
        assert raised.value.position == second + 8
        assert str(log.active_segment.log.path) in str(raised.value)
    finally:
        region.close()


def test_finding_an_offsets_batch_agrees_with_walking_every_header_whatever_the_index_holds(make_log):
    # Batches below and above index.interval.bytes: the index points at some batches, before others.
    log = make_log(index_interval_bytes=300)
    for n, size in [(1, 10), (3, 200), (2, 10), (1, 400), (4, 10), (2, 90), (1, 10)] * 3:
        log.append(batch(n, value_size=size))
    segment = log.active_segment
    headers = list(segment.log.batches())
    for offset in range(log.log_end_offset + 2):
        expected = next((h for h in headers if h.last_offset >= offset), None)
        assert segment.translate_offset(offset) == expected, offset


def test_finding_a_batch_past_a_broken_header_names_the_headers_file_position(make_log):
    log, second = _broken_second_header(make_log)
    assert log.active_segment.translate_offset(1).position == 0   # before the broken header: found
    with pytest.raises(CorruptRecordError) as raised:
        log.active_segment.translate_offset(2)
    assert raised.value.position == second + 8
    assert str(log.active_segment.log.path) in str(raised.value)


def test_a_read_that_must_not_block_reads_the_active_segment_and_declines_what_might_block(make_log):
    from stratalog.storage.isolation import FetchIsolation
    log = make_log(segment_bytes=400)
    while len(log.segments) < 3:
        log.append(batch(3, value_size=40))
    tail = log.active_segment.base_offset
    # The active segment's batches: what ``read`` gives, without a thread.
    assert log.try_read(tail, 1 << 20).data == log.read(tail, 1 << 20).data != b""
    # Older segments may have left the page cache: left to a thread.
    assert log.try_read(0, 1 << 20) is None
    # Out of range is said at once, as ``read`` says it.
    with pytest.raises(OffsetOutOfRangeError):
        log.try_read(log.log_end_offset + 1, 1 << 20)
    # An append (or anyone) holding the log's lock: declined rather than waited for.
    with held_elsewhere(log.lock):
        assert log.try_read(tail, 1 << 20) is None
    # read_committed needs the transactions scanned: the first read scans on a thread, later ones need not.
    assert log.try_read(tail, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED) is None
    assert log.read(tail, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).data
    assert log.try_read(tail, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).data == \
        log.read(tail, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).data


def test_batches_written_in_one_append_are_indexed_as_if_appended_one_by_one(tmp_path):
    from stratalog.storage.segment import LogSegment

    batches = [build_batch([Record(i * 3 + j, 1_000 + (i * 7) % 5, b"k", b"v" * 900) for j in range(3)],
                           base_offset=i * 3) for i in range(40)]
    entries = [(parse_header(b).last_offset, parse_header(b).max_timestamp, len(b)) for b in batches]
    files = {}
    for way in ("one-by-one", "at-once"):
        directory = tmp_path / way
        directory.mkdir()
        segment = LogSegment(directory, 0, index_interval_bytes=4096, max_index_size=1 << 20, create=True,
                             now_ms=0)
        if way == "at-once":
            segment.append_batches(b"".join(batches[:25]), entries[:25])
            segment.append_batches(b"".join(batches[25:]), entries[25:])
        else:
            for data, (last, max_ts, _) in zip(batches, entries):
                segment.append(last, max_ts, last, data)
        segment.on_become_inactive()
        segment.close()
        files[way] = {p.suffix: p.read_bytes() for p in directory.iterdir()}
    assert files["at-once"] == files["one-by-one"]
    assert len(files["at-once"][".index"]) >= 8 * 8   # the test indexes many batches


def test_batches_written_in_one_append_are_all_checked_against_the_segments_offset_range_first(tmp_path):
    from stratalog.storage.segment import LogSegment, SegmentOffsetOverflowError

    batches = [build_batch([Record(offset, 1_000, b"k", b"v")], base_offset=offset) for offset in (0, 1 << 40, 2)]
    segment = LogSegment(tmp_path, 0, index_interval_bytes=4096, max_index_size=1 << 20, create=True, now_ms=0)
    with pytest.raises(SegmentOffsetOverflowError, match=f"offset {1 << 40} cannot go in segment 0"):
        segment.append_batches(b"".join(batches), [(parse_header(b).last_offset, 1_000, len(b)) for b in batches])
    assert segment.size == 0   # nothing written
    segment.close()


def test_a_close_that_fails_on_one_segment_still_releases_every_other_segments_files(make_log, monkeypatch):
    from stratalog.common.errors import CorruptIndexError
    from stratalog.storage.segment import LogSegment

    log = make_log(segment_bytes=200)
    for _ in range(6):
        log.append(batch(1, value_size=60))
    first, rest = log.segments[0], log.segments[1:]
    assert rest, "the test needs several segments"
    real_close = LogSegment.close

    def close_failing_on_the_first(segment: LogSegment) -> None:
        # Fault injection: the first segment's close finds its index corrupt after releasing its files.
        real_close(segment)
        if segment is first:
            raise CorruptIndexError(f"{segment.offset_index.path}: corrupt (injected)")

    monkeypatch.setattr(LogSegment, "close", close_failing_on_the_first)
    with pytest.raises(CorruptIndexError, match="injected"):
        log.close()
    assert log.closed
    still_open = {str(p) for s in rest for p in s.files()} & _open_paths()
    assert still_open == set()


def test_a_close_whose_producer_snapshot_fails_still_closes_every_segment(make_log, monkeypatch):
    log = make_log(segment_bytes=200)
    for _ in range(6):
        log.append(batch(1, value_size=60))

    def failing_snapshot(offset: int) -> None:
        raise RuntimeError("snapshot failed (injected)")   # fault injection: not an OSError

    monkeypatch.setattr(log.producer_state, "take_snapshot", failing_snapshot)
    with pytest.raises(RuntimeError, match="injected"):
        log.close()
    assert log.closed
    assert {str(p) for s in log.segments for p in s.files()} & _open_paths() == set()
