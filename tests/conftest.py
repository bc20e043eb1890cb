"""Shared builders: batches, logs and log managers on real temporary directories."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stratalog.common.config import LogConfig
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log
from stratalog.common.names import TopicPartition
from stratalog.records import Compression, Header, Record, build_batch

REPO = Path(__file__).resolve().parent.parent


def records(values: list[tuple[bytes | None, bytes | None]], *, timestamp: int = 1_700_000_000_000,
            headers: tuple[Header, ...] = ()) -> list[Record]:
    return [Record(i, timestamp + i, k, v, headers) for i, (k, v) in enumerate(values)]


def batch(n: int = 1, *, key: bytes | None = b"k", value_size: int = 10, timestamp: int = 1_700_000_000_000,
          compression: Compression = Compression.NONE, prefix: bytes = b"v") -> bytes:
    """A producer batch of ``n`` records (offsets 0..n-1) with distinct values."""
    recs = [Record(i, timestamp + i, key, (prefix + str(i).encode()).ljust(value_size, b"."))
            for i in range(n)]
    return build_batch(recs, compression=compression)


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
