"""Metadata: the brokers (this engine) and, per topic, its partitions with leader and ISR.

A lone engine leads every partition it holds. With replication on, the leader, its epoch and
the ISR are the controller's state for the partition; Metadata lists only this engine's own
address, so clients reach other leaders only once the operator advertises every engine's
listener (issue 18's Kubernetes part). Topic ids are all zero: the engine keeps none yet, and
Kafka's zero id means "unknown" to a client.
"""

from __future__ import annotations

from typing import Any

from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_TOPIC_ID,
    Request,
    code_named,
    error_code,
    field,
)
from stratalog.server.kafka.context import CLUSTER_ID, KafkaContext



async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    requested = field(request.body, "topics")
    names = None if requested is None else [t.name for t in requested if t.name is not None]
    topics = await ctx.broker.run(_describe, ctx, names)   # on the pool: listing waits for the manager's lock
    return {"throttle_time": 0, "cluster_id": CLUSTER_ID, "controller_id": ctx.node_id,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "error_code": 0,
            "brokers": [{"node_id": ctx.node_id, "host": ctx.advertised_host, "port": ctx.advertised_port,
                         "rack": None}],
            "topics": topics}


def _describe(ctx: KafkaContext, names: list[str] | None) -> list[dict[str, Any]]:
    return [_topic(ctx, name) for name in (ctx.engine.manager.topics() if names is None else names)]


def _topic(ctx: KafkaContext, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "topic_id": NO_TOPIC_ID, "is_internal": name == OFFSETS_TOPIC,
                             "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
    try:
        description = ctx.broker.topics.describe_topic(name)
    except StratalogError as error:
        return {**entry, "error_code": error_code(error), "partitions": []}
    partitions = [_partition(ctx, TopicPartition(name, p)) for p in description.partitions]
    return {**entry, "error_code": 0, "partitions": partitions}


def _partition(ctx: KafkaContext, tp: TopicPartition) -> dict[str, Any]:
    leader, epoch, replicas, isr, code = ctx.node_id, 0, [ctx.node_id], [ctx.node_id], 0
    if ctx.broker.replicas is not None:
        partition = ctx.broker.replicas.get(tp)
        state = partition.state if partition is not None else None
        if state is None:
            code = code_named("LEADER_NOT_AVAILABLE")   # the controller has not spoken of it yet
            leader, epoch, replicas, isr = -1, -1, [], []
        else:
            leader, epoch, replicas, isr = state.leader, state.leader_epoch, list(state.replicas), list(state.isr)
    return {"error_code": code, "partition_index": tp.partition, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": replicas, "isr_nodes": isr, "offline_replicas": []}
