"""Produce: each partition's batch appended as sent, with acks 0, 1 or all (-1).

Each partition succeeds or fails alone, as in Kafka; a partition's records must be exactly one
v2 batch (Kafka's ``validateOneBatchRecords``), which the log's leader validation checks.
acks=0 gets no answer at all: the listener sends nothing back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from stratalog.broker.produce import Acks, ProduceResult
from stratalog.common.errors import InvalidRecordError, InvalidRequiredAcksError, StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.kafka.codec import CloseConnection, Request, error_code
from stratalog.server.kafka.authorization import Verb, refused_topics
from stratalog.server.kafka.context import KafkaContext

logger = logging.getLogger(__name__)

ACKS = {0: Acks.LEADER, 1: Acks.LEADER, -1: Acks.ALL}


async def handle(ctx: KafkaContext, request: Request) -> dict[str, Any] | None:
    body = request.body
    acks = ACKS.get(body.acks)
    now_ms = int(time.time() * 1000)
    denied = await refused_topics(ctx, request, Verb.PRODUCE, [topic.name for topic in body.topic_data])
    jobs: list[tuple[str, int, Any]] = []
    for topic in body.topic_data:
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            job = _refuse(denied[topic.name]) if topic.name in denied else \
                _append(ctx, tp, data.records, acks, body.acks, now_ms)
            jobs.append((topic.name, data.index, job))
    # One partition, as a producer's request to a leader mostly is: awaited here, not a task of its own.
    results = [await jobs[0][2]] if len(jobs) == 1 else await asyncio.gather(*(job for _, _, job in jobs))
    if body.acks == 0:
        refused = [r for r in results if isinstance(r, StratalogError)]
        if refused:
            # Kafka closes an acks=0 producer's connection on an error: it then refreshes its
            # metadata rather than keep sending where nothing is written.
            raise CloseConnection(f"an acks=0 produce was refused: {refused[0]}")
        return None
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index, _), result in zip(jobs, results):
        topics.setdefault(name, []).append(_partition_response(index, result))
    return {"throttle_time": 0,
            "responses": [{"name": name, "partition_responses": parts} for name, parts in topics.items()]}


async def _append(ctx: KafkaContext, tp: TopicPartition, records: bytes | None, acks: Acks | None, raw_acks: int,
                  now_ms: int) -> ProduceResult | StratalogError:
    try:
        if acks is None:
            raise InvalidRequiredAcksError(f"produce to {tp}: acks={raw_acks} is not 0, 1 or -1")
        if not records:
            raise InvalidRecordError(f"produce to {tp}: no record batch")
        result: ProduceResult = await ctx.broker.append_records(tp, [records], acks, now_ms)
        return result
    except StratalogError as error:
        return error
    except Exception as error:   # noqa: BLE001 - one partition's surprise must not drop the others' answers
        logger.error("produce to %s failed unexpectedly: %s: %s", tp, type(error).__name__, error)
        return StratalogError(f"produce to {tp}: {type(error).__name__}")   # UNKNOWN_SERVER_ERROR


async def _refuse(error: StratalogError) -> StratalogError:
    return error


def _partition_response(index: int, result: ProduceResult | StratalogError) -> dict[str, Any]:
    if isinstance(result, StratalogError):
        return {"index": index, "error_code": error_code(result), "base_offset": -1, "log_append_time": -1,
                "log_start_offset": -1, "record_errors": [], "error_message": str(result)}
    return {"index": index, "error_code": 0, "base_offset": result.base_offset,
            "log_append_time": result.log_append_time, "log_start_offset": result.log_start_offset,
            "record_errors": [], "error_message": None}
