"""A producer killed with SIGKILL at random moments never costs flushed data or a usable directory."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stratalog.storage.log_manager import open_log_manager

PRODUCER = Path(__file__).parent / "processes" / "producer.py"
TRIALS = int(os.environ.get("STRATALOG_CRASH_TRIALS", "60"))


def run_and_kill(data_dir: Path, seed: int, delay: float) -> int:
    """Start the producer, SIGKILL it after ``delay`` seconds; return the highest offset it reported flushed."""
    process = subprocess.Popen([sys.executable, str(PRODUCER), str(data_dir), str(seed)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    flushed = [0]

    def reader() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("flushed "):
                flushed[0] = max(flushed[0], int(line.split()[1]))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    thread.join(timeout=30)
    stderr = process.stderr.read() if process.stderr else ""
    assert "Traceback" not in stderr, stderr
    return flushed[0]


@pytest.mark.crash
def test_sigkill_at_random_moments_loses_nothing_flushed_and_keeps_offsets_contiguous(tmp_path):
    rng = random.Random(20261121)
    data_dir = tmp_path / "data"
    kills_with_data = 0
    for trial in range(TRIALS):
        # Early kills land in start-up and recovery, later ones in appends, rolls and checkpoint writes.
        delay = rng.choice([rng.uniform(0.0, 0.4), rng.uniform(0.4, 1.5)])
        flushed = run_and_kill(data_dir, seed=trial, delay=delay)
        if not (data_dir / "crash-0").exists():
            continue
        with open_log_manager([data_dir]) as manager:
            log = manager.get_log("crash", 0)
            offsets = []
            for record in log.read_records(0):
                assert record.value is not None and record.key == str(record.offset).encode(), (trial, record)
                assert record.value.startswith(record.key)
                offsets.append(record.offset)
            assert offsets == list(range(log.log_end_offset)), f"trial {trial}: offsets not contiguous"
            assert log.log_end_offset >= flushed, f"trial {trial}: flushed data below {flushed} was lost"
            kills_with_data += flushed > 0
    assert kills_with_data >= TRIALS // 3, "too few kills landed after data was flushed to test anything"
