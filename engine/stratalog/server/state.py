"""What every handler shares: the engine, the thread pools, the append signals and the limits.

Two pools, because their work differs in kind: ``io`` runs short calls on the
request path (appends, fsyncs, reads, topic admin), ``maintenance`` runs the
long passes (cleaning, retention) one or two at a time, so a slow cleaner pass
triggered over HTTP can never occupy the threads that appends need.

Long polls wait on the event loop, not in a thread: each partition has an
``asyncio.Event`` that an append through the API sets (then replaces), so a
waiting fetch wakes as soon as data arrives and costs nothing while it waits.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from stratalog.storage.log_manager import LogManager
from stratalog.common.names import TopicPartition
from stratalog.broker.engine import Engine
from stratalog.server.errors import NotReadyError
from stratalog.server.metrics import ServerMetrics

T = TypeVar("T")

BODY_SLACK_BYTES = 64 * 1024
ADMIN_BODY_LIMIT = 1 << 20


@dataclass(frozen=True)
class Settings:
    """Server limits, all published in the OpenAPI document so clients (and fuzzers) can see them."""

    io_threads: int = 16
    maintenance_threads: int = 2
    max_fetch_wait_ms: int = 30_000
    max_fetch_bytes: int = 64 * 1024 * 1024
    default_fetch_bytes: int = 1024 * 1024
    max_partitions_per_topic: int = 1000


class AppendSignals:
    """One ``asyncio.Event`` per partition, set when an append lands; used only on the loop thread."""

    def __init__(self) -> None:
        self._events: dict[TopicPartition, asyncio.Event] = {}

    def event(self, tp: TopicPartition) -> asyncio.Event:
        """Take the event *before* reading, so an append between the read and the wait is not missed."""
        event = self._events.get(tp)
        if event is None:
            event = self._events[tp] = asyncio.Event()
        return event

    def notify(self, tp: TopicPartition) -> None:
        event = self._events.pop(tp, None)
        if event is not None:
            event.set()

    def notify_all(self) -> None:
        events, self._events = self._events, {}
        for event in events.values():
            event.set()


class ServerState:
    def __init__(self, engine: Engine, settings: Settings | None = None) -> None:
        self.engine = engine
        self.settings = settings or Settings()
        self.io = ThreadPoolExecutor(self.settings.io_threads, thread_name_prefix="stratalog-io")
        self.maintenance = ThreadPoolExecutor(self.settings.maintenance_threads,
                                              thread_name_prefix="stratalog-maintenance")
        self.signals = AppendSignals()
        self.metrics = ServerMetrics(engine)
        self.started = False  # engine started and --create-topic done
        self.draining = False  # SIGTERM/SIGINT received: new requests get 503
        self._round_robin: dict[str, Iterator[int]] = {}
        self._body_limit: int | None = None

    @property
    def manager(self) -> LogManager:
        return self.engine.manager

    @property
    def ready(self) -> bool:
        return self.started and self.engine.ready and not self.draining

    def check_ready(self) -> None:
        if self.draining:
            raise NotReadyError("the server is shutting down")
        if not self.ready:
            raise NotReadyError("the engine is still opening its data directories (recovery); retry shortly")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking engine call on the io pool."""
        return await asyncio.get_running_loop().run_in_executor(self.io, functools.partial(fn, *args))

    async def run_maintenance(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.maintenance, functools.partial(fn, *args))

    def next_round_robin(self, topic: str) -> int:
        counter = self._round_robin.get(topic)
        if counter is None:
            counter = self._round_robin[topic] = itertools.count()
        return next(counter)

    # -- the request body limit ------------------------------------------------------------
    def body_limit(self) -> int:
        """Twice the largest ``max.message.bytes`` of any topic (or the default), plus slack.

        Kafka takes one batch per partition per produce request, so a raw body
        is one batch of at most ``max.message.bytes``; the factor 2 covers the
        JSON form of the same records (base64 adds a third, escapes more).
        Cached, and recomputed after each topic create / config change.
        """
        if self._body_limit is None:
            largest = self.manager.default_log_config.max_message_bytes
            for log in self.manager.logs().values():
                largest = max(largest, log.config.max_message_bytes)
            self._body_limit = 2 * largest + BODY_SLACK_BYTES
        return self._body_limit

    def topics_changed(self) -> None:
        self._body_limit = None

    def shutdown_pools(self) -> None:
        """Wait for every engine call already running (appends in flight finish), then stop the pools."""
        self.io.shutdown(wait=True)
        self.maintenance.shutdown(wait=True)


STATE = web.AppKey("stratalog_state", ServerState)


def state_of(request: web.Request) -> ServerState:
    return request.app[STATE]
