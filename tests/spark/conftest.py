"""One real local Spark for the whole Spark suite, and builders of real topics on real directories.

Starting Spark costs seconds, and the first Python data-source query several
more (it spawns Spark's Python daemons), so every test shares one
session-scoped ``local[2]`` session. Its Python workers run this interpreter.

The session finds ``format("stratalog")`` the way an installed package is
found: by Spark's static lookup of top-level ``pyspark_*`` modules. An
editable install serves the packages through an import hook that module
listing cannot see, so the source root is put on the workers' ``PYTHONPATH``,
which is where a wheel install would have put ``pyspark_stratalog``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.records import Record, build_batch

REPO = Path(__file__).resolve().parents[2]
SPARK_ROOT = REPO / "spark"
ENGINE_ROOT = REPO / "engine"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = [str(SPARK_ROOT), str(ENGINE_ROOT), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("stratalog-spark-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g").config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
