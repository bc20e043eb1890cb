"""Where a topic's data comes from: data directories read directly, or a ``stratalog serve`` endpoint.

The data source, its planner and the jobs speak to one small interface,
``LogStore``, so that the two places data can live - a directory this machine
(or every executor) can read, or the HTTP API - are interchangeable. Every
call takes plain arguments and opens its own handles: a store is rebuilt from
its picklable ``Location`` wherever a task runs, and nothing stateful crosses
from the driver to the executors.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger("stratalog_spark")

# Called when a read must start above the offset it was asked for because retention removed the data:
# (topic, partition, requested offset, first offset still there). Raises, or warns and lets the read go on.
DataLossHandler = Callable[[str, int, int, int], None]


class DataLossError(RuntimeError):
    """Offsets a query asked for are gone (retention or DeleteRecords), with ``failOnDataLoss=true``."""


def data_loss_handler(fail: bool) -> DataLossHandler:
    def handle(topic: str, partition: int, requested: int, available: int) -> None:
        message = (f"{topic}-{partition}: offsets {requested}..{available - 1} were removed (retention or "
                   f"DeleteRecords) before they could be read; the log starts at {available}")
        if fail:
            raise DataLossError(message + ". Some data may have been lost. Set failOnDataLoss=false to skip it "
                                "with a warning instead.")
        logger.warning("%s; skipping them (failOnDataLoss=false)", message)
        warnings.warn(message + "; skipping them (failOnDataLoss=false)", stacklevel=2)

    return handle


@dataclass(frozen=True, slots=True)
class Location:
    """Picklable: data directories (read directly) or the URL of a ``stratalog serve``."""

    paths: tuple[str, ...] = ()
    url: str | None = None

    def describe(self) -> str:
        return self.url if self.url else ",".join(self.paths)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start: int
    # The high watermark (a standalone engine is its partitions' only replica: its log end offset); for
    # read_committed the last stable offset, before any transaction that may still abort.
    end: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """A planning unit of one partition: offsets [start, end) and roughly how many bytes hold them."""

    start: int
    end: int
    size: int


class Appender(Protocol):
    def __call__(self, topic: str, partition: int, batch: bytes) -> tuple[int, int]:
        """Append one producer batch; returns the (first, last) offsets it was given."""
        ...


class LogStore(Protocol):
    def topics(self) -> list[str]: ...

    def partitions(self, topic: str) -> list[int]: ...

    def offsets(self, topic: str, partition: int, *, read_committed: bool = False) -> PartitionOffsets: ...

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        """Kafka's ListOffsets by time: the first offset whose timestamp is ≥ ``timestamp``, None if none."""
        ...

    def chunks(self, topic: str, partition: int, start: int, end: int) -> list[Chunk]:
        """[start, end) cut where the data is naturally cut (segments), for planning tasks."""
        ...

    def read_batches(self, topic: str, partition: int, start: int, end: int,
                     on_data_loss: DataLossHandler) -> Iterator[bytes]:
        """Whole raw batches, in offset order, holding every offset of [start, end) that exists."""
        ...

    def appender(self) -> AbstractContextManager[Appender]:
        """A session appending producer batches through the engine's append path."""
        ...


def open_store(location: Location, *, lock_timeout_s: float = 600.0) -> LogStore:
    """The store for ``location``; ``lock_timeout_s`` bounds how long a directory append waits for its lock."""
    if location.url:
        from .http import HttpStore

        return HttpStore(location.url)
    from .directory import DirStore

    return DirStore(location.paths, lock_timeout_s=lock_timeout_s)
