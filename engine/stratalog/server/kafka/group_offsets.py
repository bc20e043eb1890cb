"""OffsetCommit and OffsetFetch: a group's committed offsets, kept by the ``GroupCoordinator`` in
``__consumer_offsets``. A partition without a commit is answered with offset -1, as Kafka does."""

from __future__ import annotations

from typing import Any

from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import Request, code_named, field
from stratalog.server.kafka.context import KafkaContext

NO_EPOCH = -1


async def offset_commit(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    offsets = [(TopicPartition(t.name, p.partition_index), p.committed_offset,
                field(p, "committed_leader_epoch", NO_EPOCH), p.committed_metadata)
               for t in body.topics for p in t.partitions]
    errors = await ctx.groups.commit(body.group_id, field(body, "generation_id_or_member_epoch", -1),
                                     body.member_id, offsets)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, _, _, _ in offsets:
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code_named(errors[tp])})
    return {"throttle_time": 0, "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


async def offset_fetch(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    groups = field(body, "groups")
    if groups is None:   # v1-7: one group
        answer = _fetch_one(ctx, body.group_id, body.topics)
        return {"throttle_time": 0, "error_code": 0, "topics": answer["topics"]}
    return {"throttle_time": 0, "groups": [_fetch_one(ctx, g.group_id, g.topics) for g in groups]}


def _fetch_one(ctx: KafkaContext, group_id: str, requested: Any) -> dict[str, Any]:
    wanted = None if requested is None else [TopicPartition(t.name, p) for t in requested
                                             for p in t.partition_indexes]
    committed = ctx.groups.committed(group_id, wanted)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, c in committed.items():
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": c.offset if c else -1,
            "committed_leader_epoch": c.leader_epoch if c else NO_EPOCH, "metadata": c.metadata if c else "",
            "error_code": 0})
    return {"group_id": group_id, "error_code": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
