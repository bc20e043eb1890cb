"""Blocks reserved past a growing segment's end (``storage.disk_reservation``): on real files of this
machine's file system (and a real full tmpfs), with each record kernel, since both write through
``FileRecords``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import stratalog_native

from filesystems import Tmpfs
from kernel_choice import kernel
from kernel_logs import Clock, open_log
from stratalog.broker.topics import TopicAdmin
from stratalog.common.config import EngineConfig, LogConfig
from stratalog.common.errors import KafkaStorageError
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.storage import disk_reservation
from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.disk_reservation import MAX_WINDOW, MIN_WINDOW, window
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log
from stratalog.storage.log_manager import LogManager
from stratalog.storage.segment import LogSegment

KERNELS = [pytest.param(None, id="python"), pytest.param(stratalog_native, id="native")]


def batch(value_size: int = 1000, count: int = 4) -> bytes:
    return build_batch([Record(i, 1_700_000_000_000 + i, None, b"v" * value_size) for i in range(count)])


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def whole_blocks(size: int) -> int:
    return -(-size // 4096) * 4096


def fill(log: Log, size: int) -> None:
    while log.active_segment.size < size:
        log.append(batch())


def test_the_window_is_the_file_size_within_its_bounds():
    assert window(0) == MIN_WINDOW
    assert window(MIN_WINDOW + 1) == MIN_WINDOW + 1
    assert window(3 << 20) == 3 << 20
    assert window(1 << 30) == MAX_WINDOW


@pytest.mark.parametrize("module", KERNELS)
def test_a_growing_segment_holds_blocks_past_its_end_and_keeps_its_size(tmp_path, module):
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        log.append(batch())
        segment = log.active_segment.log
        # The size on disk is the log's: nothing that reads the file sees the reservation.
        assert os.stat(segment.path).st_size == segment.size == len(batch())
        assert allocated(segment.path) == MIN_WINDOW
        fill(log, 300 << 10)
        size = segment.size
        assert os.stat(segment.path).st_size == size
        # Held past the end, and never more than the file's own size ahead of it.
        assert whole_blocks(size) < allocated(segment.path) <= whole_blocks(2 * size + len(batch()))
        log.close()


@pytest.mark.parametrize("module", KERNELS)
def test_a_roll_and_a_close_release_the_blocks_held_past_the_end(tmp_path, module):
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"segment.bytes": 200 << 10}), Clock())
        fill(log, 100 << 10)
        while len(log.segments) < 2:
            log.append(batch())
        rolled, active = log.segments[0].log, log.segments[1].log
        fill(log, 100 << 10)
        assert allocated(active.path) > whole_blocks(active.size) + 4096   # held while active
        assert allocated(rolled.path) == whole_blocks(rolled.size)
        log.close()
        assert allocated(active.path) == whole_blocks(active.size)


@pytest.mark.parametrize("module", KERNELS)
def test_a_truncation_releases_the_blocks_held_past_the_new_end(tmp_path, module):
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        fill(log, 200 << 10)
        log.truncate_to(log.log_end_offset // 2)
        segment = log.active_segment.log
        assert allocated(segment.path) == whole_blocks(segment.size)
        fill(log, 300 << 10)   # and a later append reserves again
        assert allocated(segment.path) > whole_blocks(segment.size) + 4096
        log.close()


def test_blocks_a_killed_process_left_past_the_end_are_released_at_the_next_close(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
    fill(log, 100 << 10)
    path = log.active_segment.log.path
    log.close()
    # What a SIGKILL leaves: the reservation, past a file never trimmed.
    fd = os.open(path, os.O_RDWR)
    try:
        assert disk_reservation.reserve(fd, os.fstat(fd).st_size, 1 << 20) == 0
    finally:
        os.close(fd)
    assert allocated(path) > whole_blocks(path.stat().st_size) + (512 << 10)
    reopened, _ = load_log(path.parent, TopicPartition("t", 0), LogConfig.from_overrides({}), recovery_point=0,
                           had_clean_shutdown=True, clock=Clock())
    reopened.close()   # no append in between
    assert allocated(path) == whole_blocks(path.stat().st_size)


@pytest.mark.parametrize("module", KERNELS)
def test_on_a_full_disk_appends_fill_the_reserved_blocks_and_then_fail_with_one_reservation_tried_a_window(
        tmp_path, module, monkeypatch):
    small = Tmpfs(tmp_path / "small", size="2m")
    calls: list[tuple[int, int, int]] = []
    real_reserve = disk_reservation.reserve

    def counted(fd: int, offset: int, length: int) -> int:
        failure = real_reserve(fd, offset, length)
        calls.append((offset, length, failure))
        return failure

    monkeypatch.setattr(disk_reservation, "reserve", counted)
    try:
        with kernel(module):
            log = open_log(small.path / "t-0", LogConfig.from_overrides({}), Clock())
            log.append(batch())
            held_to = calls[-1][0] + calls[-1][1]
            assert calls[-1][2] == 0
            small.fill()
            # Every batch that fits the blocks reserved before the disk filled is written.
            while log.active_segment.size + len(batch()) <= held_to:
                log.append(batch())
            reserved_calls = len(calls)
            with pytest.raises(KafkaStorageError):
                for _ in range(100):
                    log.append(batch())
            # The one reservation tried past the held blocks failed; the write then failed by itself.
            assert len(calls) == reserved_calls + 1 and calls[-1][2] == errno.ENOSPC
            assert os.stat(log.active_segment.log.path).st_size == log.active_segment.size
            log.close()
    finally:
        small.unmount()


@pytest.mark.parametrize("module", KERNELS)
def test_releasing_the_blocks_at_a_roll_and_a_close_keeps_each_segments_mtime(tmp_path, module):
    """Retention and the cleaner read a segment's mtime where it has no timestamps: it stays the time
    of its last write, not the time its blocks were released."""
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        fill(log, 100 << 10)
        first = log.active_segment.log.path
        os.utime(first, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))   # written long ago
        log.roll()
        assert first.stat().st_mtime_ns == 1_000_000_000_000_000_000
        assert allocated(first) == whole_blocks(first.stat().st_size)
        fill(log, 100 << 10)
        second = log.active_segment.log.path
        os.utime(second, ns=(1_100_000_000_000_000_000, 1_100_000_000_000_000_000))
        log.close()
        assert second.stat().st_mtime_ns == 1_100_000_000_000_000_000
        assert allocated(second) == whole_blocks(second.stat().st_size)


def test_a_segment_deleted_on_a_full_disk_leaves_no_file_and_does_not_write_its_pending_index_entries(tmp_path):
    """A segment dropped while active (a follower's full truncation, a cleaner's failed pass) goes when
    the disk is full: the index entries of files about to be deleted are not written first."""
    small = Tmpfs(tmp_path / "small", size="2m")
    try:
        segment = LogSegment(small.path, 0, index_interval_bytes=4096, max_index_size=1 << 20, create=True,
                             now_ms=0)
        for i in range(10):   # an index entry every 4 KiB, none written yet
            data = build_batch([Record(i, 1_000 + i, None, b"v" * 4000)], base_offset=i)
            segment.append(i, 1_000 + i, i, data)
        assert segment.offset_index.entries > 0
        small.fill()
        # A fetch still sending from the segment holds its blocks: deleting the .log frees nothing.
        reader = os.open(segment.log.path, os.O_RDONLY)
        try:
            segment.delete_files()
        finally:
            os.close(reader)
        assert not [p for p in small.path.iterdir() if not p.name.startswith("ballast")]
    finally:
        small.unmount()


def test_the_cleaners_segments_hold_no_blocks_past_their_end_once_swapped_in(tmp_path):
    """The cleaner writes its segments through the same appends (each reserves ahead), and its swap
    trims them: a compacted log holds only the blocks of its bytes."""
    manager = LogManager([tmp_path], EngineConfig.from_properties({}), clock=Clock()).open()
    TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": str(256 << 10),
                                              "min.cleanable.dirty.ratio": "0.01"})
    try:
        log = manager.get_log("c", 0)
        for i in range(600):
            log.append(build_batch([Record(0, 1_700_000_000_000 + i, b"key-%d" % (i % 50), b"v" * 1000)]))
        log.roll()
        (report,) = LogCleaner(manager).run_pass()
        assert report.stats.records_removed > 0
        inactive = [segment.log.path for segment in log.segments[:-1]]
        assert inactive and all(allocated(path) == whole_blocks(path.stat().st_size) for path in inactive)
    finally:
        manager.close()
