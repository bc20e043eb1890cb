"""Shared builders: batches, logs and log managers on real temporary directories; one local Spark.

Starting Spark costs seconds, and the first Python data-source query several
more (it spawns Spark's Python daemons), so every test that needs Spark (the
Spark suite, and the kube suite's pipeline through a failover) shares one
session-scoped ``local[2]`` session. Its Python workers run this interpreter.

The session finds ``format("stratalog")`` the way an installed package is
found: by Spark's static lookup of top-level ``pyspark_*`` modules. An
editable install serves the packages through an import hook that module
listing cannot see, so the source root is put on the workers' ``PYTHONPATH``,
which is where a wheel install would have put ``pyspark_stratalog``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from stratalog.common.config import LogConfig
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log
from stratalog.common.names import TopicPartition
from stratalog.records import Compression, Header, Record, build_batch

REPO = Path(__file__).resolve().parent.parent
SPARK_ROOT = REPO / "spark"
ENGINE_ROOT = REPO / "engine"


def records(values: list[tuple[bytes | None, bytes | None]], *, timestamp: int = 1_700_000_000_000,
            headers: tuple[Header, ...] = ()) -> list[Record]:
    return [Record(i, timestamp + i, k, v, headers) for i, (k, v) in enumerate(values)]


def batch(n: int = 1, *, key: bytes | None = b"k", value_size: int = 10, timestamp: int = 1_700_000_000_000,
          compression: Compression = Compression.NONE, prefix: bytes = b"v") -> bytes:
    """A producer batch of ``n`` records (offsets 0..n-1) with distinct values."""
    recs = [Record(i, timestamp + i, key, (prefix + str(i).encode()).ljust(value_size, b"."))
            for i in range(n)]
    return build_batch(recs, compression=compression)


@contextmanager
def held_elsewhere(lock: Any) -> Iterator[None]:
    """``lock`` held by another thread while the block runs (an append or a task in progress there)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        yield
    finally:
        release.set()
        holder.join()


class Clock:
    """A test clock the logs read instead of the wall clock (time itself is not mocked elsewhere)."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


LogFactory = Callable[..., Log]


@pytest.fixture
def make_log(tmp_path: Path, clock: Clock) -> Iterator[LogFactory]:
    opened: list[Log] = []

    def factory(name: str = "t-0", *, recovery_point: int = 0, clean: bool = False, **overrides: object) -> Log:
        directory = tmp_path / name
        directory.mkdir(exist_ok=True)
        config = LogConfig.from_overrides({k.replace("_", "."): v for k, v in overrides.items()})
        topic, _, partition = name.rpartition("-")
        log, _ = load_log(directory, TopicPartition(topic, int(partition)), config,
                          recovery_point=recovery_point, had_clean_shutdown=clean, clock=clock)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()


def run_cli(*args: str, input: str | None = None) -> "subprocess.CompletedProcess[str]":
    import subprocess

    return subprocess.run([sys.executable, "-m", "stratalog.cli", *args], input=input, capture_output=True,
                          text=True, timeout=120)


def spark_kafka_connector() -> Path:
    """The jars of Spark's Kafka connector (scripts/spark-kafka-connector fetches them once); fails,
    never skips, when they cannot be had."""
    import subprocess

    script = Path(__file__).resolve().parent.parent / "scripts" / "spark-kafka-connector"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail(f"Spark's Kafka connector unavailable ({script}, exit {done.returncode}):\n{done.stderr}",
                    pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = [str(SPARK_ROOT), str(ENGINE_ROOT), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    from pyspark.sql import SparkSession

    # Spark's own Kafka connector rides along, for the tests that point format("kafka") at
    # stratalog's Kafka listener (tests/spark/test_kafka_source.py); it only adds that format.
    session = (SparkSession.builder.master("local[2]").appName("stratalog-spark-tests")
               .config("spark.jars", ",".join(str(jar) for jar in sorted(spark_kafka_connector().glob("*.jar"))))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g").config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def started_broker(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """A ReplicaManager over a real, started engine (``settings`` its config), stopped after the test."""
    from stratalog.broker.engine import Engine
    from stratalog.broker.replica_manager import ReplicaManager

    made: list[ReplicaManager] = []

    def make(**settings: str) -> ReplicaManager:
        engine = Engine([tmp_path / f"engine-{len(made)}"], settings, schedule=False)
        engine.start()
        made.append(ReplicaManager(engine))
        return made[-1]

    yield make
    for broker in made:
        broker.shutdown_pools()
        broker.engine.stop()


def region_bytes(region: Any) -> bytes:
    """A file region's bytes, read from its own descriptor (what sendfile would send)."""
    return os.pread(region.file.fileno(), region.size, region.position)
