"""The engine applying a compaction plan (a sorted keep file): exact results, and refusals that change nothing.

Spark computes plans in tests/spark (which also SIGKILLs the apply); here the
plans are written directly, so the engine side is tested without a JVM.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from stratalog.storage.cleaner.plan import apply_compaction_plan, apply_to_partition
from stratalog.storage.cleaner.plan_file import (
    CompactionPlanError,
    KeepFileWriter,
    iter_keep_offsets,
    sidecar_path,
    write_keep_file,
)
from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.records import Compression, Record, build_batch
from stratalog.broker.topics import TopicAdmin


def records_of(manager: LogManager) -> dict[int, tuple[bytes | None, bytes | None]]:
    return {r.offset: (r.key, r.value) for r in manager.get_log("c", 0).read_records(0)}


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    opened = open_log_manager([tmp_path / "data"])
    TopicAdmin(opened).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    rng = random.Random(2)
    log = opened.get_log("c", 0)
    for n in range(150):
        batch = [Record(i, 1_700_000_000_000, b"k%d" % rng.randrange(20),
                        None if rng.random() < 0.1 else b"v%d" % n) for i in range(rng.randint(1, 3))]
        log.append(build_batch(batch, compression=list(Compression)[n % 5]))
    yield opened
    opened.close()


def latest_offsets(records: dict[int, tuple[bytes | None, bytes | None]], below: int) -> list[int]:
    latest: dict[bytes | None, int] = {}
    for offset, (key, _) in sorted(records.items()):
        if offset < below:
            latest[key] = offset
    return sorted(latest.values())


def test_a_plan_keeps_exactly_its_offsets_below_the_active_segment_and_moves_the_cleaner_checkpoint(manager, tmp_path):
    log = manager.get_log("c", 0)
    before = records_of(manager)
    high = log.log_end_offset
    keep = latest_offsets(before, high)
    plan = write_keep_file(tmp_path, "c", 0, keep, high_watermark=high, log_start_offset=0)
    active = log.active_segment.base_offset
    report = apply_to_partition(manager, "c", 0, plan)
    assert report.end_offset == active and report.stats.records_removed > 0
    expected = {o: r for o, r in before.items() if o >= active or o in set(keep)}
    assert records_of(manager) == expected
    assert manager.checkpoints.cleaner_offset(log.topic_partition) == active


@pytest.mark.parametrize("damage, message", [
    ("no-sidecar", "is missing: the plan was never completed"),
    ("short", "announces"),
    ("unsorted", "must strictly increase"),
    ("past-end", "past the end of"),
    ("other-partition", "is a plan for c-1, not c-0"),
])
def test_a_damaged_or_foreign_plan_is_refused_before_anything_changes(manager, tmp_path, damage, message):
    log = manager.get_log("c", 0)
    before = records_of(manager)
    high = log.log_end_offset
    keep = latest_offsets(before, high)
    plan = write_keep_file(tmp_path, "c", 1 if damage == "other-partition" else 0, keep,
                           high_watermark=high + (100 if damage == "past-end" else 0), log_start_offset=0)
    if damage == "no-sidecar":
        sidecar_path(plan).unlink()
    elif damage == "short":
        plan.write_bytes(plan.read_bytes()[:-8])
    elif damage == "unsorted":
        data = plan.read_bytes()
        plan.write_bytes(data[:-16] + data[-8:] + data[-16:-8])  # the last two offsets swapped
    with pytest.raises(CompactionPlanError, match=message):
        apply_compaction_plan(log, plan, 1_700_000_000_000)
    assert records_of(manager) == before and len(list(log.dir.glob("*.cleaned"))) == 0


def test_the_plan_files_are_plain_big_endian_offsets_and_readable_json(tmp_path):
    plan = write_keep_file(tmp_path, "t", 3, [2, 7], high_watermark=10, log_start_offset=1)
    assert json.loads(sidecar_path(plan).read_text()) == {
        "format": "stratalog-keep-v1", "topic": "t", "partition": 3, "highWatermark": 10, "count": 2,
        "logStartOffset": 1}
    assert plan.read_bytes() == (2).to_bytes(8, "big") + (7).to_bytes(8, "big")


def test_a_plan_larger_than_the_write_buffer_round_trips(tmp_path):
    offsets = list(range(0, 3 * 50_000, 3))  # several 64 KiB chunks, written in uneven pieces
    writer = KeepFileWriter(tmp_path / "p.keep")
    for start in range(0, len(offsets), 7_777):
        writer.write(offsets[start : start + 7_777])
    assert writer.close() == len(offsets)
    assert list(iter_keep_offsets(tmp_path / "p.keep")) == offsets
