"""What every handler shares: the broker, the limits, the metrics, and whether the server is ready.

The HTTP layer is a transport: the data path, its thread pools and the wake-ups of waiting
fetches belong to the broker (``stratalog.broker.replica_manager``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from stratalog.broker.engine import Engine
from stratalog.broker.replica_manager import ReplicaManager
from stratalog.server.access.model import OPEN, AccessControl
from stratalog.server.api_request import ApiRequest
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
    partition_state_over_http: bool = True   # PUT /v1/replication/partitions/... (off on agents)


class ServerState:
    def __init__(self, engine: Engine, settings: Settings | None = None, access: AccessControl = OPEN) -> None:
        self.engine = engine
        self.settings = settings or Settings()
        self.broker = ReplicaManager(engine, io_threads=self.settings.io_threads,
                                     maintenance_threads=self.settings.maintenance_threads)
        self.metrics = ServerMetrics(engine, self.broker.signals.counts, lambda: self.broker.replicas)
        self.access = access
        if access.enabled:
            access.on_denied = lambda verb: self.metrics.access_denied.labels(verb).inc()
        self.started = False  # engine started and --create-topic done
        self.draining = False  # SIGTERM/SIGINT received: new requests get 503
        self._body_limit: int | None = None

    @property
    def ready(self) -> bool:
        return self.started and self.engine.ready and not self.draining

    def check_ready(self) -> None:
        if self.draining:
            raise NotReadyError("the server is shutting down")
        if not self.ready:
            raise NotReadyError("the engine is still opening its data directories (recovery); retry shortly")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking engine call on the broker's io pool."""
        return await self.broker.run(fn, *args)

    async def run_maintenance(self, fn: Callable[..., T], *args: object) -> T:
        return await self.broker.run_maintenance(fn, *args)

    def begin_draining(self) -> None:
        """SIGTERM/SIGINT: new requests get 503, waiting fetches answer now."""
        self.draining = True
        self.broker.begin_shutdown()

    # -- the request body limit ------------------------------------------------------------
    def body_limit(self) -> int:
        """Twice the largest ``max.message.bytes`` of any topic (or the default), plus slack.

        Kafka takes one batch per partition per produce request, so a raw body
        is one batch of at most ``max.message.bytes``; the factor 2 covers the
        JSON form of the same records (base64 adds a third, escapes more).
        Cached, and recomputed after each topic create / config change.
        """
        if self._body_limit is None:
            manager = self.engine.manager
            largest = manager.default_log_config.max_message_bytes
            for log in manager.logs().values():
                largest = max(largest, log.config.max_message_bytes)
            self._body_limit = 2 * largest + BODY_SLACK_BYTES
        return self._body_limit

    def topics_changed(self) -> None:
        self._body_limit = None

    def shutdown_pools(self) -> None:
        """Wait for every engine call already running (appends in flight finish), then stop the pools."""
        self.broker.shutdown_pools()


STATE = web.AppKey("stratalog_state", ServerState)


def state_of(request: ApiRequest) -> ServerState:
    return request.app[STATE]
