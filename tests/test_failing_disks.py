"""Disks that fill up or fail, on real file systems: the directory goes offline, the others serve.

Each write the engine makes is made to fail for real: a tmpfs filled to the last page or inode
(ENOSPC), an ext4 that ext4 itself remounts read-only under the open files (EROFS). A rename that
fails with EIO cannot be had on demand from a real disk, so that one case uses the TEST-ONLY
fault hook (``crash_points.TEST_ONLY_EIO_AT``). After every failure: the named error, the other
directory still serving, and after a restart with room every acknowledged record at its offset
and ``stratalog verify`` clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli
from filesystems import Ext4, Tmpfs, ext4, small  # noqa: F401 - fixtures
from stratalog.broker.topics import TopicAdmin
from stratalog.common import crash_points
from stratalog.common.config import EngineConfig
from stratalog.common.errors import KafkaStorageError
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.log import Log
from stratalog.storage.log_manager import LogManager
from stratalog.storage.retention import delete_old_segments

NOW = 1_700_000_000_000


@pytest.fixture
def tiny_inodes(tmp_path: Path) -> Iterator[Tmpfs]:
    fs = Tmpfs(tmp_path / "inodes", size="8m", inodes=64)
    yield fs
    fs.unmount()


class Acked:
    """What the engine acknowledged, per partition: offset → value."""

    def __init__(self) -> None:
        self.records: dict[TopicPartition, dict[int, bytes]] = {}

    def append(self, log: Log, value: bytes, key: bytes | None = b"k") -> None:
        info = log.append(build_batch([Record(0, NOW, key, value)]))
        self.records.setdefault(log.topic_partition, {})[info.first_offset] = value

    def check(self, manager: LogManager) -> None:
        for tp, expected in self.records.items():
            log = manager.get_log(tp.topic, tp.partition)
            found = {r.offset: r.value for r in log.read_records(min(expected))}
            missing = {o: v for o, v in expected.items() if found.get(o) != v}
            assert not missing, f"{tp}: acknowledged records not readable at their offsets: {sorted(missing)[:10]}"


def open_manager(*dirs: Path, **settings: object) -> LogManager:
    config = EngineConfig.from_properties({k.replace("_", "."): v for k, v in settings.items()})
    return LogManager(list(dirs), config, clock=lambda: NOW).open()


def two_dirs(failing: Path, healthy: Path, topic_config: dict[str, str] | None = None,
             **settings: object) -> tuple[LogManager, Log, Log]:
    """A manager over both directories and one partition in each (the failing one first)."""
    manager = open_manager(failing, healthy, **settings)
    TopicAdmin(manager).create_topic("t", 2, topic_config or {})
    logs = sorted(manager.logs().values(), key=lambda log: log.log_dir != failing.resolve())
    assert logs[0].log_dir == failing.resolve() and logs[1].log_dir == healthy.resolve()
    return manager, logs[0], logs[1]


def assert_offline(error: pytest.ExceptionInfo[KafkaStorageError], directory: Path, errno_name: str) -> None:
    assert error.value.code == "KAFKA_STORAGE_ERROR"
    message = str(error.value)
    assert str(directory.resolve()) in message and errno_name in message and "restart" in message, message


def assert_still_serving(log: Log, acked: Acked) -> None:
    acked.append(log, b"after the other directory failed")
    assert list(log.read_records(log.log_end_offset - 1))[0].value == b"after the other directory failed"


def restart_and_check(dirs: list[Path], acked: Acked) -> None:
    manager = open_manager(*dirs)
    try:
        acked.check(manager)
        assert manager.offline_dirs() == {}
    finally:
        report = manager.close()
    assert report.safe and report.warnings == []
    for directory in dirs:
        result = run_cli("verify", "--data-dir", str(directory))
        assert result.returncode == 0, result.stdout + result.stderr
    assert not [p for d in dirs for p in d.rglob("*.tmp")], "a .tmp file was left behind"


def test_an_append_on_a_full_disk_takes_its_directory_offline_and_the_other_keeps_serving(small, tmp_path):
    acked = Acked()
    manager, failing, healthy = two_dirs(small.path, tmp_path / "healthy")
    with pytest.raises(KafkaStorageError) as error:
        for i in range(10_000):
            acked.append(failing, b"%05d" % i + b"x" * 8000)
    assert_offline(error, small.path, "ENOSPC")
    assert len(acked.records[failing.topic_partition]) > 10
    end = failing.log_end_offset
    # Room again does not bring it back: nothing more is written there, and reads refuse too.
    with pytest.raises(KafkaStorageError):
        failing.append(build_batch([Record(0, NOW, b"k", b"small")]))
    with pytest.raises(KafkaStorageError):
        failing.read(0, 1 << 20)
    assert failing.log_end_offset == end
    assert set(manager.offline_dirs()) == {small.path.resolve()}
    assert manager.offline_dirs()[small.path.resolve()].errno_name == "ENOSPC"
    assert_still_serving(healthy, acked)
    # The partial batch was cut: the segment ends at the last acknowledged batch.
    last = failing.active_segment
    assert last.log.path.stat().st_size == last.size
    report = manager.close()
    assert report.safe  # tmpfs: what was acknowledged is in memory already
    assert any(str(small.path.resolve()) in w for w in report.warnings)
    small.grow("64m")
    restart_and_check([small.path, tmp_path / "healthy"], acked)


def test_a_roll_that_cannot_create_its_segment_takes_the_directory_offline(tiny_inodes, tmp_path):
    acked = Acked()
    manager, failing, healthy = two_dirs(tiny_inodes.path, tmp_path / "healthy", {"segment.bytes": "4096"})
    acked.append(failing, b"a" * 1000)
    tiny_inodes.use_up_inodes()
    with pytest.raises(KafkaStorageError) as error:
        for _ in range(10):
            acked.append(failing, b"b" * 1000)
    assert "roll of t-" in str(error.value)
    assert_offline(error, tiny_inodes.path, "ENOSPC")
    assert_still_serving(healthy, acked)
    manager.close()
    for leftover in tiny_inodes.path.glob("inode-*"):
        leftover.unlink()
    restart_and_check([tiny_inodes.path, tmp_path / "healthy"], acked)


def test_an_index_write_on_a_full_disk_takes_the_directory_offline(small, tmp_path):
    acked = Acked()
    manager, failing, healthy = two_dirs(small.path, tmp_path / "healthy", {"index.interval.bytes": "1"})
    for i in range(20):  # an index entry per batch, still in memory: the index file is a hole
        acked.append(failing, b"%03d" % i)
    ballast = small.fill()
    with pytest.raises(KafkaStorageError) as error:
        failing.flush()
    assert "flush of t-" in str(error.value)
    assert_offline(error, small.path, "ENOSPC")
    assert_still_serving(healthy, acked)
    manager.close()
    ballast.unlink()
    restart_and_check([small.path, tmp_path / "healthy"], acked)


def test_a_checkpoint_write_on_a_full_disk_leaves_no_tmp_and_the_other_directory_is_written(small, tmp_path):
    acked = Acked()
    manager, failing, healthy = two_dirs(small.path, tmp_path / "healthy")
    acked.append(failing, b"before")
    acked.append(healthy, b"before")
    failing.flush()
    healthy.flush()
    ballast = small.fill()
    with pytest.raises(KafkaStorageError) as error:
        manager.write_checkpoints()
    assert_offline(error, small.path, "ENOSPC")
    assert not list(small.path.glob("*.tmp"))
    healthy_checkpoint = (tmp_path / "healthy" / "recovery-point-offset-checkpoint").read_text()
    assert f"t {healthy.topic_partition.partition} 1" in healthy_checkpoint
    assert_still_serving(healthy, acked)
    manager.close()
    ballast.unlink()
    restart_and_check([small.path, tmp_path / "healthy"], acked)


def compacted_log_with_two_segments(log: Log, acked: Acked) -> None:
    for i in range(200):
        acked.append(log, b"v%03d" % i, key=b"k%d" % (i % 5))
    log.roll()
    for i in range(5):  # the latest value of each key, in the active segment
        acked.append(log, b"last%d" % i, key=b"k%d" % i)


def test_a_cleaner_write_on_a_full_disk_takes_the_directory_offline_and_leaves_no_cleaned_file(small, tmp_path):
    acked = Acked()
    compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    manager, failing, healthy = two_dirs(small.path, tmp_path / "healthy", compact)
    compacted_log_with_two_segments(failing, acked)
    ballast = small.fill()
    reports = LogCleaner(manager).run_pass(force=True)
    assert failing.topic_partition not in {r.topic_partition for r in reports}  # its pass failed
    assert set(manager.offline_dirs()) == {small.path.resolve()}
    assert "cleaning of t-" in manager.offline_dirs()[small.path.resolve()].during
    assert not list(failing.dir.glob("*.cleaned")), "a .cleaned file was left behind"
    assert_still_serving(healthy, acked)
    manager.close()
    ballast.unlink()
    restart_and_check([small.path, tmp_path / "healthy"], acked)


def test_a_swap_that_fails_half_way_is_completed_at_the_next_start(tmp_path):
    # TEST-ONLY fault: a rename failing with EIO half-way through the swap (no real disk here
    # fails a rename on demand). The swap protocol must make the restart finish it.
    acked = Acked()
    compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    manager, failing, healthy = two_dirs(tmp_path / "failing", tmp_path / "healthy", compact)
    compacted_log_with_two_segments(failing, acked)
    crash_points.TEST_ONLY_EIO_AT.add("swap.old_deleted")
    try:
        LogCleaner(manager).run_pass(force=True, topic="t")
    finally:
        crash_points.TEST_ONLY_EIO_AT.clear()
    offline = manager.offline_dirs()
    assert set(offline) == {(tmp_path / "failing").resolve()} and offline[(tmp_path / "failing").resolve()].errno_name == "EIO"
    assert_still_serving(healthy, acked)
    manager.close()
    # Compaction keeps each key's latest value; earlier values may be gone, as they should.
    latest = {tp: {o: v for o, v in values.items() if not v.startswith(b"v")} for tp, values in acked.records.items()}
    acked.records = latest
    restart_and_check([tmp_path / "failing", tmp_path / "healthy"], acked)


def test_retention_on_a_disk_remounted_read_only_takes_the_directory_offline(ext4, tmp_path):
    acked = Acked()
    manager, failing, healthy = two_dirs(ext4.path, tmp_path / "healthy", {"retention.ms": "1000"})
    old = Record(0, NOW - 10_000, b"k", b"expired")
    failing.append(build_batch([old]))
    failing.roll()
    acked.append(failing, b"kept")
    failing.flush()
    ext4.fail()
    assert ext4.read_only()
    with pytest.raises(KafkaStorageError) as error:
        delete_old_segments(failing, NOW)
    assert_offline(error, ext4.path, "EROFS")
    assert_still_serving(healthy, acked)
    report = manager.close()
    assert report.warnings  # no clean-shutdown marker on the read-only directory
    ext4.repair_and_remount()
    restart_and_check([ext4.path, tmp_path / "healthy"], acked)


def test_a_start_on_a_read_only_directory_refuses_with_one_line_saying_what_to_do(ext4, tmp_path):
    manager = open_manager(ext4.path)
    TopicAdmin(manager).create_topic("t", 1)
    manager.get_log("t", 0).append(build_batch([Record(0, NOW, b"k", b"v")]))
    manager.close()
    ext4.fail()
    result = run_cli("topics", "describe", "--data-dir", str(ext4.path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: KAFKA_STORAGE_ERROR: ") and str(ext4.path.resolve()) in lines[0]
    assert ("EROFS" in lines[0] or "read-only" in lines[0].lower()) and "start the engine again" in lines[0]
    assert "Traceback" not in result.stderr
