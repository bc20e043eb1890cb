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
# Commands a person runs; bench.append_child is the append benchmark's own child, started with its arguments.
COMMANDS = sorted(path.stem for path in (ROOT / "bench").glob("*.py")
                  if "def main(" in path.read_text() and path.stem != "append_child")


def test_the_benchmark_commands_are_found() -> None:
    assert {"compare", "replication", "spark_peer", "http_cost", "storage"} <= set(COMMANDS)


@pytest.mark.parametrize("module", COMMANDS)
def test_a_benchmark_command_answers_help(module: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        str(ROOT / part) for part in ("engine", "operator", "spark", ".", "tests"))}
    done = subprocess.run([sys.executable, "-m", f"bench.{module}", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout.lower()
