"""Fetch for consumers: whole batches as the segment files hold them, up to the high watermark.

Where the connection allows it (no TLS) and the answer may pass ``SENDFILE_ABOVE_BYTES`` (64
KiB: Kafka's clients ask a partition for 1 MiB by default), the batches stay in the files: the
answer carries file regions, which the listener sends with ``sendfile`` as Kafka's
``transferTo`` does. A smaller answer is read and framed with its fields, one write: below that
size the copy costs less than sendfile's own work, and the client reads one segment, not the
fields' and then the records'.

Partitions are read in the request's order within its ``max_bytes`` (the first batch always,
as Kafka's minOneMessage), and the request waits up to ``max_wait_ms`` (bounded by the
engine's own limit) for ``min_bytes`` (``ReplicaManager.fetch_many``). Incremental fetch
sessions (KIP-227) are not kept: every answer says session 0, so clients send full requests.
Before any read, each partition's current leader epoch is checked and, from v12, its last
fetched epoch: a diverged consumer gets the epoch and end offset to truncate to (KIP-320).
A follower's fetch (replica id >= 0) is replication: ``replica_fetch`` answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stratalog.broker.fetch import FetchedBatches
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import Request, error_code, field, isolation_of, millis
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka import replica_fetch
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.sendfile import SENDFILE_ABOVE_BYTES


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    body = request.body
    if field(body, "replica_id", -1) >= 0:
        return await replica_fetch.handle(ctx, request)
    asked = [(TopicPartition(topic.topic, p.partition), p) for topic in body.topics for p in topic.partitions]
    answers: dict[int, FetchedBatches | StratalogError | Diverged] = {}
    denied = await refused_topics(ctx, request, Verb.CONSUME, [tp.topic for tp, _ in asked])
    for i, (tp, p) in enumerate(asked):   # epochs first, as Kafka's fetchRecords: no read for these
        if tp.topic in denied:
            answers[i] = denied[tp.topic]
            continue
        try:
            diverged = ctx.broker.check_consumer_position(tp, p.fetch_offset, field(p, "current_leader_epoch", -1),
                                                          field(p, "last_fetched_epoch", -1))
        except StratalogError as error:
            answers[i] = error
            continue
        if diverged is not None:
            answers[i] = Diverged(*diverged)
    reads = [i for i in range(len(asked)) if i not in answers]
    wait_ms = max(0, min(millis(body.max_wait), ctx.max_fetch_wait_ms))
    fetches = [(asked[i][0], asked[i][1].fetch_offset, asked[i][1].partition_max_bytes) for i in reads]
    max_bytes = field(body, "max_bytes", 0x7FFFFFFF)
    zero_copy = request.zero_copy and sends_from_file(max_bytes, [m for _, _, m in fetches])
    results = await ctx.broker.fetch_many(fetches, wait_ms, body.min_bytes, max_bytes, isolation_of(body),
                                          zero_copy=zero_copy)
    answers.update(zip(reads, results))
    topics: dict[str, list[dict[str, Any]]] = {}
    for i, (tp, _) in enumerate(asked):
        topics.setdefault(tp.topic, []).append(_partition(tp.partition, answers[i]))
    return {"throttle_time": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": name, "partitions": parts} for name, parts in topics.items()]}


def sends_from_file(max_bytes: int, partition_max_bytes: list[int]) -> bool:
    """Whether a plaintext answer's batches go from the files by sendfile: only where it may pass
    ``SENDFILE_ABOVE_BYTES`` (a partition's negative limit reads nothing, so it does not lower the
    bound for the others)."""
    return min(max_bytes, sum(max(m, 0) for m in partition_max_bytes)) > SENDFILE_ABOVE_BYTES


@dataclass(frozen=True)
class Diverged:
    """KIP-320: the consumer's log diverged from the leader's; no records, where to go back to."""

    epoch: int
    end_offset: int


def _partition(index: int, result: FetchedBatches | StratalogError | Diverged) -> dict[str, Any]:
    empty = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
             "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
    if isinstance(result, StratalogError):
        return {**empty, "error_code": error_code(result)}
    if isinstance(result, Diverged):
        return {**empty, "error_code": 0,
                "diverging_epoch": {"epoch": result.epoch, "end_offset": result.end_offset}}
    aborted = result.aborted_transactions
    return {"partition_index": index, "error_code": 0, "high_watermark": result.high_watermark,
            "last_stable_offset": result.last_stable_offset if result.last_stable_offset >= 0
            else result.high_watermark,
            "log_start_offset": result.log_start_offset,
            "aborted_transactions": None if aborted is None else
            [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in aborted],
            "preferred_read_replica": -1, "records": result.region if result.region is not None else result.data}
