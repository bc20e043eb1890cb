"""Metadata: the brokers and, per topic, its partitions with leader and ISR, from the ``ClusterView``.

A lone engine lists itself and leads every partition it holds; an agent lists every engine of
its namespace and every Topic's partitions as the operator recorded them. Topic ids are all
zero: the engine keeps none yet, and Kafka's zero id means "unknown" to a client. Topics are
never created by Metadata (``allow_auto_topic_creation`` is not honoured): they are made with
CreateTopics, ``stratalog topics`` or, on Kubernetes, a Topic resource.
"""

from __future__ import annotations

from typing import Any

from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC
from stratalog.common.errors import StratalogError
from stratalog.server.kafka.cluster import ClusterView, PartitionView
from stratalog.server.kafka.codec import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_TOPIC_ID,
    Request,
    code_named,
    error_code,
    field,
)
from stratalog.server.kafka.context import KafkaContext


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    requested = field(request.body, "topics")
    names = None if requested is None else [t.name for t in requested if t.name is not None]
    view = ctx.view
    # On the pool: a lone engine's listing waits for the manager's lock.
    brokers, topics = await ctx.broker.run(_describe, view, names)
    return {"throttle_time": 0, "cluster_id": view.cluster_id, "controller_id": view.controller_id(),
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "error_code": 0,
            "brokers": brokers, "topics": topics}


def _describe(view: ClusterView, names: list[str] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    brokers = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in view.nodes()]
    topics = [_topic(view, name) for name in (view.topic_names() if names is None else names)]
    return brokers, topics


def _topic(view: ClusterView, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "topic_id": NO_TOPIC_ID, "is_internal": name == OFFSETS_TOPIC,
                             "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    try:
        partitions = view.partitions(name)
    except StratalogError as error:
        return {**entry, "error_code": error_code(error), "partitions": []}
    return {**entry, "error_code": 0, "partitions": [_partition(p) for p in partitions]}


def _partition(p: PartitionView) -> dict[str, Any]:
    return {"error_code": code_named(p.error), "partition_index": p.partition, "leader_id": p.leader,
            "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas), "isr_nodes": list(p.isr),
            "offline_replicas": []}
