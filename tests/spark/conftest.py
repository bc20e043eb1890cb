"""Builders of real topics on real directories for the Spark suite.

The one local Spark session every Spark test shares (the suites under kube/ too) is the
``spark`` fixture of tests/conftest.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.records import Record, build_batch


def engine(data_dir: Path) -> LogManager:
    return open_log_manager([data_dir])


def append(manager: LogManager, topic: str, partition: int, records: list[Record], **build: Any) -> None:
    """One producer batch (offsets relative, as a producer sends them)."""
    relative = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    manager.get_log(topic, partition).append(build_batch(relative, **build))


def consume(data_dir: Path, topic: str, partition: int, from_offset: int | None = None,
            max_records: int | None = None) -> list[dict[str, Any]]:
    """What ``stratalog consume`` prints, parsed: the CLI is the reference a read must equal."""
    command = [sys.executable, "-m", "stratalog.cli", "consume", "--data-dir", str(data_dir), "--topic", topic,
               "--partition", str(partition)]
    if from_offset is not None:
        command += ["--from-offset", str(from_offset)]
    if max_records is not None:
        command += ["--max-records", str(max_records)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def reader(spark: Any, data_dir: Path, **options: str) -> Any:
    frame = spark.read.format("stratalog").option("path", str(data_dir))
    for name, value in options.items():
        frame = frame.option(name, value)
    return frame
