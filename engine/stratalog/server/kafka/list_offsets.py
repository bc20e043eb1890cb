"""ListOffsets: the earliest (-2) or latest (-1) offset, the record of the largest timestamp (-3),
or the first offset whose timestamp is at or after a time, bounded by the high watermark (or
the last stable offset for read_committed), as ``ReplicaManager.list_offsets`` defines them.

A follower (replica id >= 0, with the ``replicate`` verb) is answered from the whole log: latest
is the log end offset. It asks after an OFFSET_OUT_OF_RANGE fetch, to truncate to the leader's
log end or start again from its log start (Kafka's ``fetchLatestOffsetFromLeader``)."""

from __future__ import annotations

import asyncio
from typing import Any

from stratalog.broker.fetch import FetchIsolation
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import Request, error_code, isolation_of, millis
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka.context import KafkaContext


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    follower = body.replica_id >= 0
    isolation = FetchIsolation.LOG_END if follower else isolation_of(body)
    asked = [(topic.name, p.partition_index, millis(p.timestamp)) for topic in body.topics for p in topic.partitions]
    denied = await refused_topics(ctx, request, Verb.REPLICATE if follower else Verb.CONSUME,
                                  [name for name, _, _ in asked])
    found = await asyncio.gather(*(_one(ctx, TopicPartition(name, index), timestamp, isolation, denied.get(name))
                                   for name, index, timestamp in asked))
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, _, _), partition in zip(asked, found):
        topics.setdefault(name, []).append(partition)
    return {"throttle_time": 0, "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


async def _one(ctx: KafkaContext, tp: TopicPartition, timestamp: int, isolation: FetchIsolation,
               refusal: StratalogError | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": tp.partition, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    try:
        if refusal is not None:
            raise refusal
        found = await ctx.broker.list_offsets(tp, timestamp, isolation)
        if found is None:   # no record at or after that time: Kafka answers -1, -1
            return {**entry, "error_code": 0}
        epoch = ctx.broker.leader_epoch_of(tp, found.offset)
    except StratalogError as error:   # the topic may also go between the two calls
        return {**entry, "error_code": error_code(error)}
    return {**entry, "error_code": 0, "timestamp": found.timestamp, "offset": found.offset, "leader_epoch": epoch}

