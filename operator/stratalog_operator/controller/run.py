"""``stratalog operator``: run the controller until SIGTERM / SIGINT.

One asyncio loop holds kopf (watches, indexes, handlers), the metrics / liveness server,
and the reconcile worker thread. Standalone by default (the chart runs one replica with
the Recreate strategy, so two controllers never overlap); ``--peering`` opts into kopf's
peering for other layouts.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import kopf
from kopf._core.intents.registries import SmartOperatorRegistry  # OperatorRegistry + the default login handlers

from ..children import AgentOptions
from .offsets_topic import OffsetsTopicOptions
from ..kube import Kube
from ..metrics import OperatorMetrics, start_metrics_server
from .handlers import Controller
from .logdirs import CONTROLLER_MANAGER

__all__ = ["OperatorOptions", "run_operator", "main"]

logger = logging.getLogger("stratalog.operator")


@dataclass(frozen=True)
class OperatorOptions:
    namespaces: Sequence[str] = ()          # empty: all namespaces
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    agent: AgentOptions = field(default_factory=AgentOptions)
    offsets_topic: OffsetsTopicOptions = field(default_factory=OffsetsTopicOptions)
    resync_seconds: float = 300.0
    peering: str | None = None


def settings_for(peering: str | None) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Handlers log a lot; only warnings become Kubernetes events. Our own events are explicit.
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = "stratalog-operator"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    if peering:
        settings.peering.name = peering
        settings.peering.mandatory = True
    return settings


async def run_operator(options: OperatorOptions) -> int:
    metrics = OperatorMetrics("operator")
    kube = Kube(field_manager=CONTROLLER_MANAGER, on_write=metrics.wrote, on_conflict=metrics.conflicted)
    controller = Controller(kube, options.agent, metrics, resync_seconds=options.resync_seconds,
                            offsets_topic=options.offsets_topic)
    registry = SmartOperatorRegistry()
    controller.register(registry)
    # No stop_flag: kopf installs its own SIGTERM/SIGINT handlers (replacing any set here), and
    # the waiter of a stop_flag that is never set would be a "hung task" kopf waits 5 s for on exit.
    ready = asyncio.Event()
    operator_task: asyncio.Task[None] | None = None

    def healthy() -> bool:
        return operator_task is not None and not operator_task.done() and ready.is_set()

    runner = await start_metrics_server(options.metrics_host, options.metrics_port, metrics, healthy)
    logger.info("metrics and /healthz on http://%s:%d", options.metrics_host, options.metrics_port)
    operator_task = asyncio.create_task(kopf.operator(
        registry=registry, settings=settings_for(options.peering), standalone=options.peering is None,
        clusterwide=not options.namespaces, namespaces=list(options.namespaces),
        ready_flag=ready))
    try:
        await operator_task
    finally:
        await runner.cleanup()
    return 0


def main(options: OperatorOptions, *, log_level: str = "INFO") -> int:
    logging.basicConfig(level=log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level != "DEBUG":   # kopf logs every handler run at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # `kill -USR1` prints every thread's stack to the log: how to see where a stop hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return asyncio.run(run_operator(options))
