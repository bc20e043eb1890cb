"""A cleaner killed with SIGKILL at any instant of a pass leaves, per segment group, the old or the new content."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Record, build_batch
from stratalog.broker.topics import TopicAdmin

CLEANER = Path(__file__).parent / "processes" / "cleaner.py"
TRIALS = int(os.environ.get("STRATALOG_CRASH_TRIALS", "60"))
# Every named instant of a pass; the count picks which group's swap it lands in.
CRASH_POINTS = ["clean.segment_copied", "clean.before_swap", "swap.begin", "swap.renamed_to_swap",
                "swap.old_deleted", "swap.renamed_to_final"]


def records_of(data_dir: Path) -> dict[int, tuple[bytes | None, bytes | None]]:
    with open_log_manager([data_dir], create_missing=False) as manager:
        found = {}
        previous = -1
        for record in manager.get_log("c", 0).read_records(0):
            assert record.offset > previous, "offsets must strictly increase"
            previous = record.offset
            found[record.offset] = (record.key, record.value)
        return found


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, dict, dict]:
    """A compacted topic ready to clean, its records before, and after one complete pass."""
    base = tmp_path_factory.mktemp("pristine") / "data"
    rng = random.Random(5)
    with open_log_manager([base]) as manager:
        TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "2000",
                                      "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
        log = manager.get_log("c", 0)
        for _ in range(250):
            records = [Record(i, 1_700_000_000_000, b"key-%d" % rng.randrange(60), b"v" * rng.randint(1, 60))
                       for i in range(rng.randint(1, 4))]
            log.append(build_batch(records, compression=rng.choice(list(Compression))))
        log.roll()
    before = records_of(base)
    cleaned = base.parent / "cleaned"
    shutil.copytree(base, cleaned)
    with open_log_manager([cleaned]) as manager:
        LogCleaner(manager).run_pass(force=True)
    after = records_of(cleaned)
    assert len(after) < len(before) / 2
    return base, before, after


def run_cleaner(data_dir: Path, *, crash_at: str | None = None, kill_after: float | None = None) -> None:
    env = dict(os.environ)
    if crash_at:
        env["STRATALOG_CRASH_AT"] = crash_at
    process = subprocess.Popen([sys.executable, str(CLEANER), str(data_dir)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if kill_after is not None:
        assert process.stdout is not None
        process.stdout.readline()  # "ready": the kill lands inside the pass, not in start-up
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=120)
    stderr = process.stderr.read() if process.stderr else ""
    assert "Traceback" not in stderr, stderr


@pytest.mark.crash
def test_a_cleaner_killed_anywhere_in_a_pass_never_loses_a_latest_value(tmp_path, pristine):
    base, before, after = pristine
    rng = random.Random(99)
    outcomes = {"partial": 0, "untouched": 0, "complete": 0}
    for trial in range(TRIALS):
        data_dir = tmp_path / f"trial-{trial}"
        shutil.copytree(base, data_dir)
        if trial % 3 == 2:
            run_cleaner(data_dir, kill_after=rng.uniform(0.0, 0.6))
        else:
            point = CRASH_POINTS[trial % len(CRASH_POINTS)]
            run_cleaner(data_dir, crash_at=f"{point}:{rng.randint(1, 6)}")
        found = records_of(data_dir)
        # Nothing invented, nothing moved: every record is the pre-clean record at its offset...
        assert all(before.get(offset) == record for offset, record in found.items()), f"trial {trial}"
        # ...and every record a complete clean keeps (the latest value of each key) is still there.
        missing = set(after) - set(found)
        assert not missing, f"trial {trial}: lost latest values at offsets {sorted(missing)[:5]}"
        outcomes["untouched" if found == before else "complete" if found == after else "partial"] += 1
        # Finishing the pass afterwards converges on exactly the clean result.
        with open_log_manager([data_dir], create_missing=False) as manager:
            LogCleaner(manager).run_pass(force=True)
        assert records_of(data_dir) == after, f"trial {trial}: a rerun did not converge"
        shutil.rmtree(data_dir)
    assert outcomes["partial"] > 0 and outcomes["untouched"] + outcomes["complete"] > 0, outcomes
