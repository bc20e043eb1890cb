"""Fetch from a follower (replica id >= 0): Kafka's replication, over the Kafka listener.

A follower engine asks for every partition it follows here in one Fetch, as Kafka's
``ReplicaFetcherThread`` does, with its broker id, each partition's fetch offset, last fetched
epoch and current leader epoch. The answer is the broker layer's ``replica_fetch_many``: whole
batches as the leader wrote them (offsets and leader epochs unchanged), the high watermark and
log start offset, KIP-320's diverging epoch when the follower's log has diverged, and
OFFSET_OUT_OF_RANGE when its offset is outside the leader's log (it then asks ListOffsets for
the leader's log start and end, as Kafka's followers do). The fetch offset is the follower's
acknowledgement, so this is what moves the high watermark and the ISR.

It needs the ``replicate`` verb on each topic (Kafka's CLUSTER_ACTION): a consumer that sets a
replica id is refused, not counted as a follower.
"""

from __future__ import annotations

from typing import Any

from stratalog.broker.partition import ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka.codec import Request, code_named, error_code, field, millis
from stratalog.server.kafka.context import KafkaContext

OFFSET_OUT_OF_RANGE = code_named("OFFSET_OUT_OF_RANGE")
UNKNOWN_LEADER_EPOCH = code_named("UNKNOWN_LEADER_EPOCH")


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    replica_id = body.replica_id
    asked = [(TopicPartition(topic.topic, p.partition), p) for topic in body.topics for p in topic.partitions]
    denied = await refused_topics(ctx, request, Verb.REPLICATE, [tp.topic for tp, _ in asked])
    answers: dict[int, ReplicaFetchResult | StratalogError] = {
        i: denied[tp.topic] for i, (tp, _) in enumerate(asked) if tp.topic in denied}
    fetching = [i for i in range(len(asked)) if i not in answers]
    if fetching:
        fetches = [(asked[i][0], ReplicaFetch(replica_id, p.fetch_offset, field(p, "last_fetched_epoch", -1),
                                              field(p, "current_leader_epoch", -1), p.partition_max_bytes))
                   for i in fetching for p in (asked[i][1],)]
        wait_ms = max(0, min(millis(body.max_wait), ctx.max_fetch_wait_ms))
        try:
            results = await ctx.broker.replica_fetch_many(fetches, wait_ms, max(body.min_bytes, 1),
                                                          field(body, "max_bytes", 0x7FFFFFFF))
        except StratalogError as error:   # this engine takes no part in replication
            results = [error] * len(fetches)
        answers.update(zip(fetching, results))
    topics: dict[str, list[dict[str, Any]]] = {}
    for i, (tp, _) in enumerate(asked):
        topics.setdefault(tp.topic, []).append(_partition(tp.partition, answers[i]))
    return {"throttle_time": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": name, "partitions": parts} for name, parts in topics.items()]}


def _partition(index: int, result: ReplicaFetchResult | StratalogError) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "high_watermark": -1,
                             "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                             "preferred_read_replica": -1, "records": b""}
    if isinstance(result, StratalogError):
        return {**entry, "error_code": error_code(result)}
    # Followers copy transactions' batches and markers as they are: no aborted list is needed.
    marks = {"high_watermark": result.high_watermark, "last_stable_offset": result.high_watermark,
             "log_start_offset": result.log_start_offset}
    if result.out_of_range:
        return {**entry, **marks, "error_code": OFFSET_OUT_OF_RANGE}
    if result.diverging_epoch is not None:
        epoch, end_offset = result.diverging_epoch
        if epoch < 0:
            # No epoch of this leader's is at or below the follower's: Kafka's wire has no way to say
            # (-1, -1), the tagged field's default, which reads as no divergence; said as the
            # follower naming an epoch this leader does not know. Not reachable while epochs fence
            # (a log dir left from another incarnation of the topic gets here).
            return {**entry, **marks, "error_code": UNKNOWN_LEADER_EPOCH}
        return {**entry, **marks, "diverging_epoch": {"epoch": epoch, "end_offset": end_offset}}
    return {**entry, **marks, "records": result.data}
