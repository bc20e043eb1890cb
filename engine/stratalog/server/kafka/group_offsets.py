"""OffsetCommit and OffsetFetch: a group's committed offsets, kept by the ``GroupCoordinator`` in
``__consumer_offsets``. A partition without a commit is answered with offset -1, as Kafka does."""

from __future__ import annotations

from typing import Any

from stratalog.common.names import TopicPartition
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka.codec import Request, code_named, error_code, field
from stratalog.server.kafka.context import KafkaContext

NO_EPOCH = -1


async def offset_commit(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    offsets = [(TopicPartition(t.name, p.partition_index), p.committed_offset,
                field(p, "committed_leader_epoch", NO_EPOCH), p.committed_metadata)
               for t in body.topics for p in t.partitions]
    denied = await refused_topics(ctx, request, Verb.CONSUME, [t.name for t in body.topics])
    codes = {tp: error_code(denied[tp.topic]) for tp, _, _, _ in offsets if tp.topic in denied}
    allowed = [o for o in offsets if o[0].topic not in denied]
    if allowed or not offsets:
        errors = await ctx.groups.commit(body.group_id, field(body, "generation_id_or_member_epoch", -1),
                                         body.member_id, allowed)
        codes.update({tp: code_named(name) for tp, name in errors.items()})
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, _, _, _ in offsets:
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": codes[tp]})
    return {"throttle_time": 0, "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


async def offset_fetch(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    groups = field(body, "groups")
    if groups is None:   # v1-7: one group
        answer = await _fetch_one(ctx, request, body.group_id, body.topics)
        return {"throttle_time": 0, "error_code": answer["error_code"], "topics": answer["topics"]}
    return {"throttle_time": 0, "groups": [await _fetch_one(ctx, request, g.group_id, g.topics) for g in groups]}


async def _fetch_one(ctx: KafkaContext, request: Request, group_id: str, requested: Any) -> dict[str, Any]:
    wanted = None if requested is None else [TopicPartition(t.name, p) for t in requested
                                             for p in t.partition_indexes]
    committed = await ctx.groups.committed(group_id, wanted)
    if isinstance(committed, str):
        return {"group_id": group_id, "error_code": code_named(committed), "topics": []}
    denied = await refused_topics(ctx, request, Verb.CONSUME, [tp.topic for tp in committed])
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, c in committed.items():
        if tp.topic in denied:
            if wanted is None:
                continue   # all of the group's topics: only those this principal may consume
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": -1, "committed_leader_epoch": NO_EPOCH,
                "metadata": "", "error_code": error_code(denied[tp.topic])})
            continue
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": c.offset if c else -1,
            "committed_leader_epoch": c.leader_epoch if c else NO_EPOCH, "metadata": c.metadata if c else "",
            "error_code": 0})
    return {"group_id": group_id, "error_code": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
