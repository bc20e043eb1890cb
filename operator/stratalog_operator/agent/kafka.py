"""An agent's Kafka listener: the engine's listener, describing the namespace's cluster
(``AgentCluster``) and coordinating the groups of the ``__consumer_offsets`` partitions this
engine leads. Its advertised address goes on the agent's Lease, where every agent finds it.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stratalog.broker.engine import Engine
from stratalog.broker.groups.coordinator import GroupCoordinator
from stratalog.broker.groups.ownership import replicated_placement
from stratalog.broker.producer_ids import ProducerIdAllocator
from stratalog.common.names import OFFSETS_TOPIC
from stratalog.server.access.tls import ReloadingTLS
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.listener import KafkaListener
from stratalog.server.state import ServerState

from ..kube import Kube
from ..names import OFFSETS_TOPIC_REQUESTED_ANNOTATION
from ..replica_records import broker_id
from .cluster import AgentCluster
from .replicas import ReplicaDriver

__all__ = ["KafkaSettings", "listen_kafka"]

logger = logging.getLogger("stratalog.agent")


@dataclass(frozen=True)
class KafkaSettings:
    logdir: str
    namespace: str
    listen: tuple[str, int]
    advertise: tuple[str, int] | None = None   # default: this host's name (or the listen host) and the bound port


async def listen_kafka(options: KafkaSettings, state: ServerState, engine: Engine, tls: ReloadingTLS | None,
                       topics: dict[str, dict[str, Any]], driver: Callable[[], ReplicaDriver | None],
                       kube: Kube, topic_defaults: Callable[[], Mapping[str, str]]
                       ) -> tuple[KafkaListener, tuple[str, int]]:
    """The Kafka listener, describing the namespace's cluster and coordinating the groups of the
    ``__consumer_offsets`` partitions this engine leads; its advertised (host, port)."""
    host, port = options.listen
    node_id = broker_id(options.logdir)

    def listeners() -> dict[str, tuple[str, int]]:
        current = driver()
        return current.kafka_listeners if current is not None else {}

    cluster = AgentCluster(options.namespace, options.logdir, (host, port), topics, listeners,
                           _once(functools.partial(_request_offsets_topic, kube, options)), topic_defaults)
    groups = GroupCoordinator(state.broker, placement=replicated_placement(state.broker, cluster.offsets_partitions))
    await groups.start()
    ctx = KafkaContext(state.broker, engine, node_id, host, port, state.settings.max_fetch_wait_ms,
                       ProducerIdAllocator(engine.manager.data_dirs[0], node_id), groups, state.access, cluster)
    listener = KafkaListener(ctx)
    try:
        addresses = await listener.start(host, port, ssl=tls.context if tls else None)
    except OSError as error:
        await groups.close()
        raise OSError(error.errno, f"cannot listen for Kafka clients on {host}:{port}: {error.strerror}") from None
    bound_host, bound_port = addresses[0][0], addresses[0][1]
    advertised = options.advertise or (socket.gethostname() if host in ("0.0.0.0", "::") else host, bound_port)
    ctx.advertised_host, ctx.advertised_port = cluster.own_listener = advertised
    logger.info("LogDir %s: Kafka listener on %s:%d (advertised as %s:%d, broker id %d; %s)", options.logdir,
                bound_host, bound_port, advertised[0], advertised[1], node_id,
                {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                 (True, True): "SASL_SSL"}[(tls is not None, state.access.enabled)])
    return listener, advertised


def _request_offsets_topic(kube: Kube, options: KafkaSettings) -> None:
    """Mark this agent's LogDir: the controller makes the namespace's __consumer_offsets Topic."""
    kube.patch("LogDir", options.namespace, options.logdir,
               {"metadata": {"annotations": {OFFSETS_TOPIC_REQUESTED_ANNOTATION: "true"}}})
    logger.info("LogDir %s: asked the controller for the namespace's %s Topic (a client asked for a group's "
                "coordinator)", options.logdir, OFFSETS_TOPIC)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """``action`` until it first succeeds (called on the pool; a failure is retried at the next call)."""
    done = threading.Event()
    lock = threading.Lock()

    def call() -> None:
        if done.is_set():
            return
        with lock:
            if done.is_set():
                return
            try:
                action()
            except Exception as error:   # noqa: BLE001 - the client retries FindCoordinator, and so this
                logger.warning("cannot ask for the %s Topic: %s", OFFSETS_TOPIC, error)
                return
            done.set()
    return call
