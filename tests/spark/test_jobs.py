"""The Spark jobs: verify finds corruption, the compaction plan compacts exactly (even through SIGKILL), export."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stratalog.storage.cleaner.plan_file import read_header
from stratalog.records import Compression, Record
from stratalog_spark.jobs.cli import main as jobs_main
from stratalog_spark.jobs.compaction_plan import plan_topic
from stratalog_spark.store import Location
from stratalog.broker.topics import TopicAdmin

from .conftest import append, engine, reader

BASE_TS = 1_700_000_000_000
CRASH_POINTS = ["clean.segment_copied", "clean.before_swap", "swap.begin", "swap.renamed_to_swap",
                "swap.old_deleted", "swap.renamed_to_final"]


def records_of(data: Path, topic: str) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    """Every record of the topic as the engine reads it after opening (and recovering) the directory."""
    with engine(data) as manager:
        found = {}
        for partition in manager.describe_topic(topic).partitions:
            previous = -1
            for record in manager.get_log(topic, partition).read_records(0):
                assert record.offset > previous
                previous = record.offset
                found[(partition, record.offset)] = (record.key, record.value)
        return found


def apply_cli(data: Path, topic: str, partition: int, plan: Path, crash_at: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if crash_at:
        env["STRATALOG_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "stratalog.cli", "apply-compaction-plan", "--data-dir", str(data),
                           "--topic", topic, "--partition", str(partition), "--plan", str(plan)],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def planned(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A compacted topic, a plan Spark computed for it, then more data above the plan's high watermark."""
    base = tmp_path_factory.mktemp("plan")
    data, plans = base / "data", base / "plans"
    rng = random.Random(3)
    with engine(data) as manager:
        TopicAdmin(manager).create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "1200",
                                      "file.delete.delay.ms": "0"})
        for n in range(260):
            records = [Record(i, BASE_TS + n, b"key-%d" % rng.randrange(45),
                              None if rng.random() < 0.12 else b"value-%d-%d" % (n, i))
                       for i in range(rng.randint(1, 4))]
            append(manager, "c", n % 2, records, compression=list(Compression)[n % 5])
        for partition in range(2):
            manager.get_log("c", partition).roll()
    before_plan = records_of(data, "c")
    report = plan_topic(spark, Location(paths=(str(data),)), "c", plans)
    with engine(data) as manager:  # after the plan: superseding records above its high watermark, rolled
        for n in range(30):
            append(manager, "c", n % 2, [Record(0, BASE_TS + 10_000 + n, b"key-%d" % rng.randrange(45), b"late")])
        for partition in range(2):
            manager.get_log("c", partition).roll()
    pristine = base / "pristine"
    shutil.copytree(data, pristine)
    return {"data": data, "plans": plans, "report": report, "before_plan": before_plan,
            "before_apply": records_of(pristine, "c"), "pristine": pristine}


def expected_after_apply(planned: dict[str, Any]) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    """The dict model: below each plan's high watermark the latest record of each key; above it, everything."""
    highs = {p: s["highWatermark"] for p, s in planned["report"]["partitions"].items()}
    latest: dict[tuple[int, bytes | None], int] = {}
    for (partition, offset), (key, _) in sorted(planned["before_plan"].items()):
        latest[(partition, key)] = offset
    keep = set((p, o) for (p, _), o in latest.items())
    return {(p, o): kv for (p, o), kv in planned["before_apply"].items() if o >= highs[p] or (p, o) in keep}


def test_the_plan_has_one_sorted_offset_per_key_below_its_high_watermark(planned):
    report = planned["report"]
    keys = {(p, k) for (p, _), (k, _) in planned["before_plan"].items()}
    assert report["keptOffsets"] == len(keys)
    assert report["keyedRecordsScanned"] == len(planned["before_plan"])
    for partition, summary in report["partitions"].items():
        header = read_header(Path(summary["plan"]))
        assert header.topic == "c" and header.partition == partition and header.count == summary["keptOffsets"]
        assert header.high_watermark == max(o for p, o in planned["before_plan"] if p == partition) + 1


def test_the_engine_applying_the_plan_leaves_exactly_the_latest_value_per_key(planned, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(planned["pristine"], data)
    for partition, summary in planned["report"]["partitions"].items():
        done = apply_cli(data, "c", partition, Path(summary["plan"]))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["recordsRemoved"] > 0
    after = records_of(data, "c")
    assert after == expected_after_apply(planned)
    # The key → value view is the log's, tombstones included (their horizon is days away).
    model: dict[tuple[int, bytes | None], bytes | None] = {}
    for (partition, _), (key, value) in sorted(planned["before_apply"].items()):
        model[(partition, key)] = value
    view = {}
    for (partition, _), (key, value) in sorted(after.items()):
        view[(partition, key)] = value
    assert view == model and None in view.values()
    # The regular cleaner now counts the planned range as clean.
    checkpoint = (data / "cleaner-offset-checkpoint").read_text().split("\n")
    assert any(line.startswith("c 0 ") for line in checkpoint)


def test_a_plan_applied_through_sigkills_at_every_swap_step_loses_nothing_and_converges(planned, tmp_path):
    expected = expected_after_apply(planned)
    before = planned["before_apply"]
    rng = random.Random(11)
    outcomes = set()
    for trial, point in enumerate(CRASH_POINTS + CRASH_POINTS[:2]):
        data = tmp_path / f"trial-{trial}"
        shutil.copytree(planned["pristine"], data)
        plan = Path(planned["report"]["partitions"][0]["plan"])
        crashed = apply_cli(data, "c", 0, plan, crash_at=f"{point}:{rng.randint(1, 3)}")
        assert crashed.returncode == -9, (point, crashed.returncode, crashed.stderr)
        found = records_of(data, "c")
        assert all(before[key] == record for key, record in found.items()), f"{point}: a record changed or appeared"
        assert not set(expected) - set(found), f"{point}: a record the plan keeps was lost"
        outcomes.add("untouched" if found == before else "partial")
        for partition in (0, 1):  # finishing the job converges on exactly the planned result
            done = apply_cli(data, "c", partition, Path(planned["report"]["partitions"][partition]["plan"]))
            assert done.returncode == 0, done.stderr
        assert records_of(data, "c") == expected, f"{point}: rerunning did not converge"
    assert "partial" in outcomes


def test_a_plan_for_another_partition_or_a_shorter_log_is_refused(planned, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(planned["pristine"], data)
    plan = Path(planned["report"]["partitions"][0]["plan"])
    wrong = apply_cli(data, "c", 1, plan)
    assert wrong.returncode == 1 and "is a plan for c-0, not c-1" in wrong.stderr
    assert records_of(data, "c") == planned["before_apply"]


def test_verify_checks_every_segment_in_its_own_task_and_finds_a_flipped_byte(spark, planned, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(planned["pristine"], data)
    assert jobs_main(["verify", "--data-dir", str(data), "--topic", "c", "--json"]) == 0
    clean = json.loads(capsys.readouterr().out)
    segments = sorted((data / "c-0").glob("*.log")) + sorted((data / "c-1").glob("*.log"))
    assert clean["errors"] == 0 and clean["tasks"] == clean["segments"] == len(segments)
    victim = sorted((data / "c-1").glob("*.log"))[2]
    raw = bytearray(victim.read_bytes())
    raw[80] ^= 0xFF  # inside the first batch's records: only its CRC can tell
    victim.write_bytes(bytes(raw))
    assert jobs_main(["verify", "--data-dir", str(data), "--topic", "c"]) == 1
    text = capsys.readouterr().out
    assert f"error: {victim}" in text and "corrupt" in text.splitlines()[-1]


def test_export_writes_a_range_to_parquet_equal_to_the_read(spark, planned, tmp_path, capsys):
    out = tmp_path / "export"
    data = planned["pristine"]
    ending = json.dumps({"c": {"0": 100, "1": -1}})
    assert jobs_main(["export", "--data-dir", str(data), "--topic", "c", "--out", str(out),
                      "--endingOffsets", ending]) == 0
    report = json.loads(capsys.readouterr().out)
    exported = spark.read.parquet(str(out))
    read = reader(spark, data, subscribe="c", endingOffsets=ending).load()
    columns = ["partition", "offset", "key", "value", "timestamp"]
    assert report["rows"] == read.count() > 0
    assert sorted(exported.select(*columns).collect()) == sorted(read.select(*columns).collect())
