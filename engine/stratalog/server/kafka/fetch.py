"""Fetch for consumers: whole batches as the segment files hold them, up to the high watermark.

Partitions are read in the request's order within its ``max_bytes`` (the first batch always,
as Kafka's minOneMessage), and the request waits up to ``max_wait_ms`` (bounded by the
engine's own limit) for ``min_bytes`` (``ReplicaManager.fetch_many``). Incremental fetch
sessions (KIP-227) are not kept: every answer says session 0, so clients send full requests.
A follower's fetch (replica id >= 0) is not served here: engines replicate over HTTP.
"""

from __future__ import annotations

from typing import Any

from stratalog.broker.fetch import FetchedBatches
from stratalog.common.errors import NotLeaderOrFollowerError, StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import Request, error_code, field, isolation_of, millis
from stratalog.server.kafka.context import KafkaContext


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    reads = [(TopicPartition(topic.topic, p.partition), p.fetch_offset, p.partition_max_bytes)
             for topic in body.topics for p in topic.partitions]
    isolation = isolation_of(body)
    results: list[FetchedBatches | StratalogError]
    if field(body, "replica_id", -1) >= 0:
        refusal = NotLeaderOrFollowerError("replica fetches come over the engines' HTTP replication API")
        results = [refusal for _ in reads]
    else:
        wait_ms = max(0, min(millis(body.max_wait), ctx.max_fetch_wait_ms))
        results = await ctx.broker.fetch_many(reads, wait_ms, body.min_bytes, field(body, "max_bytes", 0x7FFFFFFF),
                                              isolation)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (tp, _, _), result in zip(reads, results):
        topics.setdefault(tp.topic, []).append(_partition(tp.partition, result))
    return {"throttle_time": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": name, "partitions": parts} for name, parts in topics.items()]}


def _partition(index: int, result: FetchedBatches | StratalogError) -> dict[str, Any]:
    if isinstance(result, StratalogError):
        return {"partition_index": index, "error_code": error_code(result), "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                "preferred_read_replica": -1, "records": b""}
    aborted = result.aborted_transactions
    return {"partition_index": index, "error_code": 0, "high_watermark": result.high_watermark,
            "last_stable_offset": result.last_stable_offset if result.last_stable_offset >= 0
            else result.high_watermark,
            "log_start_offset": result.log_start_offset,
            "aborted_transactions": None if aborted is None else
            [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in aborted],
            "preferred_read_replica": -1, "records": result.data}
