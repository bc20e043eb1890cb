"""OffsetsForLeaderEpoch: where a leader epoch ends in the leader's log (KIP-101, KIP-320).

A consumer asks after a leader change, for the epoch of the last record it consumed: if that
epoch ends here before its position, the log it read from was truncated, and it moves back
(or resets, by its policy). Only consumers are served; followers learn divergence from their
fetches over the engines' replication API.
"""

from __future__ import annotations

import asyncio
from typing import Any

from stratalog.common.errors import NotLeaderOrFollowerError, StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import Request, error_code, field
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka.context import KafkaContext

CONSUMER = -1
DEBUGGING = -2   # Kafka's tools; served as a consumer


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    follower = field(body, "replica_id", DEBUGGING) not in (CONSUMER, DEBUGGING)
    asked = [(TopicPartition(topic.topic, p.partition), p) for topic in body.topics for p in topic.partitions]
    denied = await refused_topics(ctx, request, Verb.CONSUME, [tp.topic for tp, _ in asked])
    found = await asyncio.gather(*(_one(ctx, tp, p, follower, denied.get(tp.topic)) for tp, p in asked))
    topics: dict[str, list[dict[str, Any]]] = {}
    for (tp, _), partition in zip(asked, found):
        topics.setdefault(tp.topic, []).append(partition)
    return {"throttle_time": 0, "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()]}


async def _one(ctx: KafkaContext, tp: TopicPartition, asked: Any, follower: bool,
               refusal: StratalogError | None) -> dict[str, Any]:
    entry = {"partition": tp.partition, "leader_epoch": -1, "end_offset": -1}
    try:
        if refusal is not None:
            raise refusal
        if follower:
            raise NotLeaderOrFollowerError("a follower learns where its log diverged from Fetch (KIP-320)")
        epoch, end_offset = await ctx.broker.end_offset_for_epoch(tp, asked.leader_epoch,
                                                                  field(asked, "current_leader_epoch", -1))
    except StratalogError as error:
        return {**entry, "error_code": error_code(error)}
    return {**entry, "error_code": 0, "leader_epoch": epoch, "end_offset": end_offset}
