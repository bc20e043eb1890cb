"""Log directories: placement, locks, topic configs, deletion, checkpoint files in Kafka's format."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import batch
from stratalog.common.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from stratalog.records import Record, build_batch
from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.broker.topics import TopicAdmin


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_new_partitions_go_to_the_directory_with_the_fewest(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with open_log_manager([a, b]) as manager:
        TopicAdmin(manager).create_topic("one", 3)
        TopicAdmin(manager).create_topic("two", 1)
        placed = {str(tp): log.dir.parent.name for tp, log in manager.logs().items()}
    assert placed == {"one-0": "a", "one-1": "b", "one-2": "a", "two-0": "b"}


def test_every_directory_gets_meta_properties_and_the_checkpoint_files(tmp_path):
    with open_log_manager([tmp_path / "d"]) as manager:
        TopicAdmin(manager).create_topic("orders", 2)
        manager.get_log("orders", 1).append(batch(3))
    d = tmp_path / "d"
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint", "meta.properties",
                 ".kafka_cleanshutdown", ".lock"):
        assert (d / name).exists(), name
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 1 3\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 1 3\n"
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    assert json.loads((d / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": 0}
    meta = (d / "meta.properties").read_text().splitlines()
    assert meta[0] == "#" and meta[1].startswith("#")
    assert {line.split("=")[0] for line in meta[2:]} == {"node.id", "directory.id", "version", "cluster.id"}


def test_the_log_start_offset_checkpoint_lists_only_partitions_past_their_first_segment(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("t", 2)
        log = manager.get_log("t", 0)
        log.append(batch(5))
        log.maybe_increment_log_start_offset(3)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    with open_log_manager([tmp_path]) as manager:
        assert manager.get_log("t", 0).log_start_offset == 3


def test_topic_configs_survive_a_restart(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    with open_log_manager([tmp_path]) as manager:
        description = manager.describe_topic("c")
        assert description.overrides == {"cleanup.policy": "compact", "segment.bytes": "1000"}
        assert description.config.segment_bytes == 1000 and description.config.compact


def test_altering_a_topic_config_applies_to_the_open_logs_and_persists(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("t", 2)
        TopicAdmin(manager).alter_topic_config("t", {"retention.ms": "1000"})
        assert manager.get_log("t", 1).config.retention_ms == 1000
    with open_log_manager([tmp_path]) as manager:
        assert manager.get_log("t", 0).config.retention_ms == 1000


def test_a_second_process_on_a_locked_directory_gets_a_clear_error_and_touches_nothing(tmp_path):
    manager = open_log_manager([tmp_path])
    TopicAdmin(manager).create_topic("t", 1)
    before = tree(tmp_path)
    script = textwrap.dedent(f"""
        from stratalog.storage.log_manager import open_log_manager
        from stratalog.common.errors import LogDirLockedError
        try:
            open_log_manager([{str(tmp_path)!r}])
        except LogDirLockedError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    after = tree(tmp_path)
    manager.close()
    assert f"data directory {tmp_path} is in use: process {os.getpid()} holds" in out.stdout
    assert after == before


def test_a_second_manager_in_the_same_process_is_refused_too(tmp_path):
    with open_log_manager([tmp_path]):
        with pytest.raises(LogDirLockedError):
            open_log_manager([tmp_path])


def test_deleting_a_topic_renames_its_directories_then_removes_them(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("gone", 2)
        TopicAdmin(manager).create_topic("kept", 1)
        renamed = TopicAdmin(manager).delete_topic("gone")
        assert all(p.name.startswith("gone-") and p.name.endswith("-delete") and p.exists() for p in renamed)
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.get_log("gone", 0)
        assert manager.delete_pending_dirs() == 2
        assert not any(p.exists() for p in renamed)
        assert manager.topics() == ["kept"]


def test_a_delete_directory_left_by_a_crash_is_removed_after_restart(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("gone", 1)
    (tmp_path / "gone-0").rename(tmp_path / "gone-0.0123456789abcdef0123456789abcdef-delete")
    with open_log_manager([tmp_path]) as manager:
        assert manager.topics() == []
        assert manager.delete_pending_dirs() == 1
    assert not (tmp_path / "gone-0.0123456789abcdef0123456789abcdef-delete").exists()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../escape", "x" * 250, "spaces here", "tab\t", "ünï"])
def test_illegal_topic_names_are_refused_and_nothing_is_created(tmp_path, name):
    with open_log_manager([tmp_path / "d"]) as manager:
        before = tree(tmp_path)
        with pytest.raises(InvalidTopicError):
            TopicAdmin(manager).create_topic(name, 1)
        assert tree(tmp_path) == before


def test_invalid_configs_and_partition_counts_are_refused_before_anything_is_written(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        before = tree(tmp_path)
        with pytest.raises(InvalidConfigError, match="retention.ms"):
            TopicAdmin(manager).create_topic("t", 1, {"retention.ms": "-5"})
        with pytest.raises(InvalidConfigError, match="no.such.key"):
            TopicAdmin(manager).create_topic("t", 1, {"no.such.key": "1"})
        with pytest.raises(InvalidPartitionsError):
            TopicAdmin(manager).create_topic("t", 0)
        assert tree(tmp_path) == before
        TopicAdmin(manager).create_topic("t", 2)
        with pytest.raises(TopicExistsError):
            TopicAdmin(manager).create_topic("t", 1)
        with pytest.raises(InvalidPartitionsError, match="can only grow"):
            TopicAdmin(manager).add_partitions("t", 1)


def test_topics_whose_names_differ_only_by_dot_and_underscore_collide(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("a.b", 1)
        with pytest.raises(InvalidTopicError, match="collides"):
            TopicAdmin(manager).create_topic("a_b", 1)


def test_adding_partitions_keeps_the_existing_ones(tmp_path):
    with open_log_manager([tmp_path / "a", tmp_path / "b"]) as manager:
        TopicAdmin(manager).create_topic("t", 1)
        manager.get_log("t", 0).append(batch(2))
        TopicAdmin(manager).add_partitions("t", 3)
        assert sorted(manager.describe_topic("t").partitions) == [0, 1, 2]
        assert manager.get_log("t", 0).log_end_offset == 2


def test_a_path_that_is_a_file_is_not_a_data_directory(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(LogDirError, match="is not a directory"):
        LogManager([file]).open()


def test_a_missing_directory_is_an_error_when_creation_is_not_asked_for(tmp_path):
    with pytest.raises(LogDirError, match="does not exist"):
        open_log_manager([tmp_path / "nope"], create_missing=False)


def test_an_unclean_shutdown_is_recovered_and_a_clean_one_is_not(tmp_path):
    manager = open_log_manager([tmp_path])
    TopicAdmin(manager).create_topic("t", 1)
    manager.get_log("t", 0).append(batch(4))
    manager.close()
    with open_log_manager([tmp_path]) as manager:
        assert manager.load_reports[next(iter(manager.logs()))].recovered_segments == []
    # A manager that is never closed leaves no marker: the next open recovers.
    crashed = open_log_manager([tmp_path])
    crashed.get_log("t", 0).append(batch(1))
    for data_dir in crashed._dirs:
        data_dir.lock.release()
    with open_log_manager([tmp_path]) as manager:
        report = manager.load_reports[next(iter(manager.logs()))]
        assert report.recovered_segments == [0]
        assert manager.get_log("t", 0).log_end_offset == 5


def test_a_log_that_fails_to_close_leaves_its_directory_without_the_clean_shutdown_marker(tmp_path):
    """As Kafka, whose shutdown writes the marker only for a directory where every log closed: here the
    producer snapshot of the shutdown cannot be written (a directory stands where its file goes). The
    other directory, whose logs closed, gets its marker."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = open_log_manager(dirs)
    TopicAdmin(manager).create_topic("t", 2)
    failing, closing = manager.get_log("t", 0), manager.get_log("t", 1)
    assert failing.log_dir != closing.log_dir
    failing.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")], producer_id=7, producer_epoch=0,
                               base_sequence=0))
    closing.append(batch(3))
    blocker = failing.dir / f"{failing.log_end_offset:020d}.snapshot"
    blocker.mkdir()
    report = manager.close()
    assert report.safe   # every record is on disk; only the marker is withheld
    assert report.warnings == [f"{failing.log_dir}: close of t-0 (EISDIR: {os.strerror(errno.EISDIR)}) failed; "
                               "no clean-shutdown marker written, its next start recovers its logs"]
    assert not (failing.log_dir / ".kafka_cleanshutdown").exists()
    assert (closing.log_dir / ".kafka_cleanshutdown").exists()
    blocker.rmdir()
    with open_log_manager(dirs) as manager:
        assert manager.had_clean_shutdown() == {failing.log_dir: False, closing.log_dir: True}
        assert [manager.get_log("t", p).log_end_offset for p in (0, 1)] == [1, 3]


def test_kafkas_kraft_metadata_log_is_never_loaded_nor_touched(tmp_path):
    metadata = tmp_path / "__cluster_metadata-0"
    metadata.mkdir()
    segment = metadata / f"{0:020d}.log"
    segment.write_bytes(batch(3))
    before = tree(tmp_path)
    with open_log_manager([tmp_path]) as manager:
        assert manager.topics() == []
        with pytest.raises(InvalidTopicError, match="reserved"):
            TopicAdmin(manager).create_topic("__cluster_metadata", 1)
    assert segment.read_bytes() == batch(3)
    assert [p for p in tree(tmp_path) if p.startswith("__cluster")] == [p for p in before if p.startswith("__cluster")]
    assert "__cluster_metadata" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_the_broker_epoch_of_the_clean_shutdown_marker_survives_an_open_and_close(tmp_path):
    (tmp_path / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":106}')
    with open_log_manager([tmp_path]) as manager:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()  # consumed before loading
        assert manager.topics() == []
    assert json.loads((tmp_path / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": 106}


def test_an_engine_can_hold_any_subset_of_a_topics_partitions(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        assert TopicAdmin(manager).ensure_partitions("orders", [0, 2], {"retention.ms": 1000}) == [0, 2]
        assert TopicAdmin(manager).ensure_partitions("orders", [0, 2, 4]) == [4]     # only the missing one is made
        described = manager.describe_topic("orders")
        assert sorted(described.partitions) == [0, 2, 4]
        assert described.overrides == {"retention.ms": "1000"}         # new partitions take the topic's config
        assert manager.get_log("orders", 4).config.retention_ms == 1000
    with open_log_manager([tmp_path]) as manager:                         # and it survives a restart
        assert sorted(manager.describe_topic("orders").partitions) == [0, 2, 4]


def test_deleting_some_partitions_keeps_the_rest_and_deleting_all_deletes_the_topic(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).ensure_partitions("orders", [0, 1, 2])
        manager.get_log("orders", 1).append(batch(1))
        renamed = TopicAdmin(manager).delete_partitions("orders", [0, 2])
        assert sorted(p.name.split(".")[0] for p in renamed) == ["orders-0", "orders-2"]
        assert sorted(manager.describe_topic("orders").partitions) == [1]
        assert manager.get_log("orders", 1).log_end_offset == 1
        TopicAdmin(manager).delete_partitions("orders", [1])
        assert manager.topics() == []
        assert manager.delete_pending_dirs() == 3


def test_holding_partitions_refuses_bad_numbers_and_colliding_names(tmp_path):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).ensure_partitions("a.b", [0])
        with pytest.raises(InvalidTopicError, match="collides"):
            TopicAdmin(manager).ensure_partitions("a_b", [0])
        with pytest.raises(InvalidPartitionsError):
            TopicAdmin(manager).ensure_partitions("c", [-1])
        assert manager.topics() == ["a.b"]


def test_a_start_that_fails_raises_its_own_error_and_frees_every_directory_whatever_a_log_close_raises(
        tmp_path, monkeypatch, caplog):
    from stratalog.common.errors import CorruptIndexError
    from stratalog.storage.log import Log

    good, bad = tmp_path / "a", tmp_path / "b"
    with open_log_manager([good, bad]) as manager:
        TopicAdmin(manager).create_topic("t", 2)
        placed = {p: manager.get_log("t", p).log_dir for p in (0, 1)}
    broken = next(p for p, d in placed.items() if d == bad)
    (bad / f"t-{broken}" / f"{0:020d}.log").unlink()
    (bad / f"t-{broken}" / f"{0:020d}.log").mkdir()   # a segment that cannot be read: the start fails
    real_close = Log.close

    def close_then_fail(log: Log) -> None:
        # Fault injection: the cleanup's close of a loaded log finds an index corrupt after closing it.
        real_close(log)
        raise CorruptIndexError(f"{log.dir}: corrupt (injected)")

    monkeypatch.setattr(Log, "close", close_then_fail)
    with pytest.raises(LogDirError) as refused:
        open_log_manager([good, bad])
    assert str(bad) in str(refused.value)
    assert "corrupt (injected)" in caplog.text   # the close's own error is told, not dropped
    monkeypatch.undo()
    with open_log_manager([good]) as manager:   # the failed start let go of the good directory's lock
        assert manager.get_log("t", 1 - broken).log_dir == good
