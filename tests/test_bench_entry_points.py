"""Every benchmark's command starts: its module imports and answers ``--help`` (the benchmarks
themselves run outside the test command, so a broken import would otherwise show only when someone
next measures)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every module run with ``python -m`` (bench.compare_storage is bench.compare's child, and takes --help
# too); bench.append_child, the append benchmark's child, takes its arguments by position only.
COMMANDS = sorted(path.stem for path in (ROOT / "bench").glob("*.py")
                  if '__name__ == "__main__"' in path.read_text() and path.stem != "append_child")


def test_the_benchmark_commands_are_found() -> None:
    assert {"compare", "compare_storage", "replication", "spark_peer", "http_cost", "storage"} <= set(COMMANDS)


@pytest.mark.parametrize("module", COMMANDS)
def test_a_benchmark_command_answers_help(module: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        str(ROOT / part) for part in ("engine", "operator", "spark", ".", "tests"))}
    done = subprocess.run([sys.executable, "-m", f"bench.{module}", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout.lower()
