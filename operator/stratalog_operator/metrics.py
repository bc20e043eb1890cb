"""Prometheus metrics and the liveness endpoint of the controller (and the agents' kopf side).

The write counter is fed by :class:`~stratalog_operator.kube.Kube` for every create, patch,
status apply and delete, so "how many writes per minute does this operator make" is a
metric rather than a guess; the scale test reads it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["OperatorMetrics", "start_metrics_server"]


class OperatorMetrics:
    def __init__(self, role: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        prefix = f"stratalog_{role}"
        self.reconciles = Counter(f"{prefix}_reconciles", "Reconciles by kind and result.",
                                  ["kind", "result"], registry=self.registry)
        self.reconcile_seconds = Histogram(f"{prefix}_reconcile_seconds", "Time per reconcile.", ["kind"],
                                           registry=self.registry)
        self.api_writes = Counter(f"{prefix}_api_writes", "Writes to the API server by verb and kind.",
                                  ["verb", "kind"], registry=self.registry)
        self.api_conflicts = Counter(f"{prefix}_api_conflicts", "Writes the API server refused with 409 "
                                     "Conflict (a compare-and-swap that lost), by kind.", ["kind"],
                                     registry=self.registry)
        self.objects = Gauge(f"{prefix}_objects", "Objects known to the operator, by kind.", ["kind"],
                             registry=self.registry)
        self.errors = Counter(f"{prefix}_reconcile_errors", "Reconciles that failed (and are retried).",
                              ["kind"], registry=self.registry)
        self.elections = Counter(f"{prefix}_partition_elections", "Partition records changed by the controller, "
                                 "by reason (LeaderLost, ControlledShutdown, IsrShrink, PreferredLeader, ...).",
                                 ["reason"], registry=self.registry)
        # Kafka's controller gauges (OfflinePartitionsCount, and the cluster's under-replicated count),
        # from the partition records as the controller last saw them.
        self.offline_partitions = Gauge(f"{prefix}_offline_partitions_count", "Partitions without a leader "
                                        "(Kafka's OfflinePartitionsCount).", registry=self.registry)
        self.under_replicated = Gauge(f"{prefix}_under_replicated_partitions", "Partitions whose ISR is smaller "
                                      "than their replicas, over every managed Topic.", registry=self.registry)
        self.last_activity = time.monotonic()

    def wrote(self, verb: str, kind: str) -> None:
        self.api_writes.labels(verb, kind).inc()

    def conflicted(self, kind: str) -> None:
        self.api_conflicts.labels(kind).inc()

    def writes_total(self) -> float:
        return sum(s.value for m in self.api_writes.collect() for s in m.samples if s.name.endswith("_total"))


async def start_metrics_server(host: str, port: int, metrics: OperatorMetrics,
                               healthy: Callable[[], bool]) -> web.AppRunner:
    """Serve ``/metrics`` and ``/healthz`` (200 while ``healthy()``, else 503)."""

    async def metrics_handler(_: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        ok = healthy()
        return web.json_response({"status": "ok" if ok else "unhealthy"}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_address=True).start()
    return runner
