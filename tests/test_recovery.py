"""Opening a partition after a crash: each damage the loader repairs, as Kafka's LogLoader does (§4.4)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import batch
from stratalog.common.config import LogConfig
from stratalog.storage.loader import load_log
from stratalog.common.names import TopicPartition

TP = TopicPartition("t", 0)


def build(make_log, count: int = 12, **overrides):
    log = make_log(segment_bytes=overrides.pop("segment_bytes", 400), index_interval_bytes=1, **overrides)
    for i in range(count):
        log.append(batch(2, value_size=40, prefix=f"r{i}-".encode()))
    log.flush()
    log.close()
    return log.dir


def reopen(directory: Path, *, clean: bool = False, recovery_point: int = 0, **overrides):
    config = LogConfig.from_overrides({"segment.bytes": 400, "index.interval.bytes": 1,
                                       **{k.replace("_", "."): v for k, v in overrides.items()}})
    return load_log(directory, TP, config, recovery_point=recovery_point, had_clean_shutdown=clean)


def offsets(log) -> list[int]:
    return [r.offset for r in log.read_records(log.log_start_offset)]


def logs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def test_a_torn_tail_is_truncated_to_the_last_whole_batch(make_log):
    directory = build(make_log)
    last = logs(directory)[-1]
    with open(last, "ab") as file:
        file.write(batch(3)[:50])  # half a batch, as a crash mid-write leaves it
    log, report = reopen(directory)
    assert report.truncated_bytes == 50
    assert offsets(log) == list(range(24))
    assert log.append(batch(1)).first_offset == 24
    log.close()


def test_a_flipped_byte_truncates_at_that_batch_and_deletes_later_segments(make_log):
    directory = build(make_log)
    files = logs(directory)
    assert len(files) >= 3
    victim = files[1]
    data = bytearray(victim.read_bytes())
    data[70] ^= 0xFF  # inside the CRC-covered records of the first batch of the second segment
    victim.write_bytes(bytes(data))
    log, report = reopen(directory)
    second_base = int(victim.name[:20])
    assert report.deleted_segments_after_corruption == [int(f.name[:20]) for f in files[2:]]
    assert log.log_end_offset == second_base
    assert offsets(log) == list(range(second_base))
    log.close()


def test_recovery_starts_at_the_segment_holding_the_recovery_point(make_log):
    directory = build(make_log)
    files = logs(directory)
    first = bytearray(files[0].read_bytes())
    first[70] ^= 0xFF  # damage below the recovery point is not re-read, as in Kafka
    files[0].write_bytes(bytes(first))
    recovery_point = int(files[-1].name[:20])
    log, report = reopen(directory, recovery_point=recovery_point)
    assert report.recovered_segments == [recovery_point]
    assert log.recovery_point == recovery_point
    log.close()


def test_a_clean_shutdown_skips_recovery(make_log):
    directory = build(make_log)
    log, report = reopen(directory, clean=True)
    assert report.recovered_segments == [] and report.truncated_bytes == 0
    assert log.recovery_point == log.log_end_offset == 24
    log.close()


def test_a_deleted_index_is_rebuilt_from_the_log(make_log):
    directory = build(make_log)
    victim = sorted(directory.glob("*.index"))[0]
    expected = victim.read_bytes()
    victim.unlink()
    log, report = reopen(directory, clean=True)
    assert int(victim.name[:20]) in report.rebuilt_indexes
    assert victim.read_bytes() == expected
    assert offsets(log) == list(range(24))
    log.close()


def test_a_garbage_index_is_detected_and_rebuilt(make_log):
    directory = build(make_log)
    victim = sorted(directory.glob("*.index"))[0]
    expected = victim.read_bytes()
    victim.write_bytes(os.urandom(len(expected) + 3))
    time_victim = sorted(directory.glob("*.timeindex"))[1]
    time_expected = time_victim.read_bytes()
    time_victim.write_bytes(b"\xff" * 5)
    log, report = reopen(directory, clean=True)
    assert victim.read_bytes() == expected
    assert time_victim.read_bytes() == time_expected
    assert len(report.rebuilt_indexes) == 2
    assert offsets(log) == list(range(24))
    log.close()


def test_an_index_without_its_log_is_deleted(make_log):
    directory = build(make_log)
    orphan = directory / f"{999:020d}.index"
    orphan.write_bytes(b"\x00" * 8)
    log, report = reopen(directory, clean=True)
    assert not orphan.exists() and report.deleted_orphan_files == [orphan.name]
    log.close()


def test_leftover_deleted_and_cleaned_files_are_removed(make_log):
    directory = build(make_log)
    first = logs(directory)[0]
    (directory / (first.name + ".deleted")).write_bytes(first.read_bytes())
    (directory / f"{0:020d}.log.cleaned").write_bytes(b"partial")
    (directory / f"{0:020d}.index.cleaned").write_bytes(b"")
    log, report = reopen(directory)
    assert not list(directory.glob("*.deleted")) and not list(directory.glob("*.cleaned"))
    assert offsets(log) == list(range(24))
    log.close()


def test_a_complete_swap_replaces_the_segments_it_covers(make_log):
    directory = build(make_log)
    files = logs(directory)
    # Simulate a cleaner that merged the first two segments into one .swap and crashed before renaming.
    merged = files[0].read_bytes() + files[1].read_bytes()
    (directory / (files[0].name + ".swap")).write_bytes(merged)
    log, report = reopen(directory)
    assert report.completed_swaps == [0]
    assert not (directory / files[1].name).exists()
    assert [s.base_offset for s in log.segments][0] == 0
    assert offsets(log) == list(range(24))
    log.close()


def test_a_swap_at_or_above_a_cleaned_file_is_an_unfinished_split_and_is_dropped(make_log):
    directory = build(make_log)
    files = logs(directory)
    before = files[1].read_bytes()
    (directory / (files[1].name + ".cleaned")).write_bytes(b"x")
    (directory / (files[1].name + ".swap")).write_bytes(b"garbage that must never be used")
    log, report = reopen(directory)
    assert not list(directory.glob("*.swap"))
    assert files[1].read_bytes() == before
    assert offsets(log) == list(range(24))
    log.close()


def test_a_log_start_checkpoint_past_the_end_starts_an_empty_log_there(make_log):
    directory = build(make_log)
    config = LogConfig.from_overrides({"segment.bytes": 400})
    log, _ = load_log(directory, TP, config, log_start_offset=100, had_clean_shutdown=True)
    assert [s.base_offset for s in log.segments] == [100]
    assert log.log_start_offset == log.log_end_offset == 100
    log.close()


def test_an_empty_partition_directory_gets_a_first_segment(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    log, _ = reopen(directory)
    assert (directory / f"{0:020d}.log").exists()
    assert log.log_end_offset == 0
    log.close()
    shutil.rmtree(directory)
