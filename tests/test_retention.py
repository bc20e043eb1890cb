"""Retention: log start offset, size and time breaches, as Kafka runs them (seeds 000 and 003)."""

from __future__ import annotations

import os

import pytest

from conftest import batch
from stratalog.common.config import LogConfig
from stratalog.common.errors import OffsetOutOfRangeError
from stratalog.records import Record, build_batch
from stratalog.storage.retention import (
    LOG_START_OFFSET_BREACH,
    RETENTION_SIZE_BREACH,
    RETENTION_TIME_BREACH,
    SegmentFacts,
    delete_old_segments,
    delete_records,
    plan_retention,
)

DAY = 86_400_000


def facts(*sizes: int, bases: list[int] | None = None, timestamp: int = 0) -> list[SegmentFacts]:
    bases = bases or [10 * i for i in range(len(sizes))]
    return [SegmentFacts(b, s, timestamp) for b, s in zip(bases, sizes)]


def test_seed_003_worked_example_deletes_only_the_113_byte_segment():
    config = LogConfig.from_overrides({"retention.bytes": "128", "segment.bytes": "128", "retention.ms": "-1"})
    # diff = 113 + 77 + 75 - 128 = 137: the 113-byte segment goes (137 - 113 = 24 ≥ 0), the 77-byte one stays.
    plan = plan_retention(facts(113, 77, 75, bases=[34, 37, 40]), config, log_start_offset=34,
                          log_end_offset=43, high_watermark=43, now_ms=0)
    assert plan.deleted_bases == [34]
    assert plan.deletions[0].reason == RETENTION_SIZE_BREACH
    assert "diff 137" in plan.deletions[0].detail
    # The first state of the seed: diff = 112 + 75 - 128 = 22 < 112, nothing goes.
    plan = plan_retention(facts(112, 75), config, log_start_offset=0, log_end_offset=2, high_watermark=2, now_ms=0)
    assert plan.deletions == ()


def test_seed_003_arithmetic_holds_on_real_segment_sizes(make_log):
    log = make_log(segment_bytes=128, retention_bytes=128, retention_ms=-1)
    for i in range(9):
        value = b"x" * (i % 3 * 2)  # segments of slightly different sizes, as in the seed
        log.append(build_batch([Record(0, 1_700_000_000_000, b"k%d" % i, value)]))
    sizes = [os.path.getsize(p) for p in sorted(log.dir.glob("*.log"))]
    bases = [s.base_offset for s in log.segments]
    assert len(sizes) == 9 and all(size <= 128 for size in sizes)
    diff = sum(sizes) - 128
    expected = []
    for base, size in zip(bases, sizes):
        if diff - size < 0:
            break
        expected.append(base)
        diff -= size
    deleted = delete_old_segments(log)
    assert [d.base_offset for d in deleted] == expected
    assert log.log_start_offset == bases[len(expected)]
    assert log.size == sum(sizes[len(expected):])


def test_seed_000_log_start_offset_25_removes_the_segments_at_0_and_11():
    config = LogConfig.from_overrides({})
    plan = plan_retention(facts(100, 100, 100, bases=[0, 11, 23]), config, log_start_offset=25,
                          log_end_offset=30, high_watermark=30, now_ms=0)
    assert plan.deleted_bases == [0, 11]
    assert {d.reason for d in plan.deletions} == {LOG_START_OFFSET_BREACH}


def test_delete_records_moves_the_start_and_deletes_whole_segments_below_it(make_log):
    log = make_log()
    for count in (11, 12, 7):  # segments at 0, 11, 23 as in seed 000
        log.append(batch(count))
        log.roll()
    assert [s.base_offset for s in log.segments] == [0, 11, 23, 30]
    assert delete_records(log, 25) == 25
    assert [s.base_offset for s in log.segments] == [23, 30]
    assert [r.offset for r in log.read_records(25)][:2] == [25, 26]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(24, 100)
    with pytest.raises(OffsetOutOfRangeError, match="past the high watermark"):
        delete_records(log, 31)


def test_time_retention_uses_the_largest_record_timestamp_not_the_file_mtime(make_log, clock):
    log = make_log(retention_ms=DAY)
    old, recent = clock.now - 2 * DAY, clock.now - DAY // 2
    log.append(batch(1, timestamp=old))
    log.roll()
    log.append(batch(1, timestamp=recent))
    log.roll()
    log.append(batch(1, timestamp=old))  # an old timestamp in a newer segment: still a prefix rule
    log.roll()
    for path in log.dir.glob("*.log"):
        os.utime(path, (0, 0))  # ancient mtimes must not matter
    deleted = delete_old_segments(log)
    assert [d.base_offset for d in deleted] == [0]
    assert deleted[0].reason == RETENTION_TIME_BREACH


def test_segments_without_timestamps_fall_back_to_the_file_mtime(make_log, clock):
    log = make_log(retention_ms=DAY)
    log.append(build_batch([Record(0, -1, b"k", b"v")]))
    log.roll()
    log.append(batch(1, timestamp=clock.now))
    first = log.segments[0].log.path
    os.utime(first, ((clock.now - 2 * DAY) / 1000,) * 2)
    assert [d.base_offset for d in delete_old_segments(log)] == [0]


def test_when_every_segment_expires_the_log_rolls_and_keeps_one_empty_segment(make_log, clock):
    log = make_log(retention_ms=DAY)
    log.append(batch(3, timestamp=clock.now - 2 * DAY))
    log.roll()
    log.append(batch(2, timestamp=clock.now - 2 * DAY))
    deleted = delete_old_segments(log)
    assert [d.base_offset for d in deleted] == [0, 3]
    assert [s.base_offset for s in log.segments] == [5]
    assert log.log_start_offset == log.log_end_offset == 5
    assert log.append(batch(1)).first_offset == 5


def test_nothing_at_or_above_the_high_watermark_is_deleted():
    config = LogConfig.from_overrides({"retention.ms": "1"})
    plan = plan_retention(facts(10, 10, 10), config, log_start_offset=0, log_end_offset=30,
                          high_watermark=15, now_ms=10**9)
    assert plan.deleted_bases == [0]


def test_compacted_topics_only_apply_the_log_start_offset_rule():
    config = LogConfig.from_overrides({"cleanup.policy": "compact", "retention.ms": "1", "retention.bytes": "1"})
    plan = plan_retention(facts(10, 10, 10), config, log_start_offset=0, log_end_offset=30,
                          high_watermark=30, now_ms=10**9)
    assert plan.deletions == ()
    both = LogConfig.from_overrides({"cleanup.policy": "compact,delete", "retention.ms": "1"})
    assert plan_retention(facts(10, 10, 10), both, log_start_offset=0, log_end_offset=30,
                          high_watermark=30, now_ms=10**9).deleted_bases == [0, 10, 20]


def test_deleted_segments_are_renamed_at_once_and_removed_after_the_delay(make_log, clock):
    log = make_log(retention_ms=DAY, file_delete_delay_ms=60_000)
    log.append(batch(1, timestamp=clock.now - 2 * DAY))
    log.roll()
    log.append(batch(1, timestamp=clock.now))
    delete_old_segments(log)
    renamed = sorted(p.name for p in log.dir.glob("*.deleted"))
    assert renamed == [f"{0:020d}.index.deleted", f"{0:020d}.log.deleted", f"{0:020d}.timeindex.deleted"]
    assert log.delete_expired_files(clock.now + 59_999) == 0
    assert log.delete_expired_files(clock.now + 60_000) == 1
    assert not list(log.dir.glob("*.deleted"))


def test_only_a_prefix_of_segments_is_deleted(make_log, clock):
    log = make_log(retention_ms=DAY)
    log.append(batch(1, timestamp=clock.now))
    log.roll()
    log.append(batch(1, timestamp=clock.now - 2 * DAY))
    log.roll()
    log.append(batch(1))
    assert delete_old_segments(log) == []


def test_delete_records_minus_one_means_the_high_watermark_and_below_that_is_refused(make_log):
    log = make_log()
    log.append(batch(4))
    with pytest.raises(OffsetOutOfRangeError, match="offset -2"):
        delete_records(log, -2)
    assert log.log_start_offset == 0
    assert delete_records(log, -1) == 4
