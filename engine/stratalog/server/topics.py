"""Topic admin (Kafka's CreateTopics / DeleteTopics / CreatePartitions / IncrementalAlterConfigs)
and per-partition statistics.

Every change goes through the broker's ``TopicAdmin``, the same calls ``stratalog topics``
and the Kubernetes agent make, so the on-disk result of each is identical. Admin
calls run on the io pool: creating partitions creates directories and index
files, deleting renames them.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from stratalog.common.errors import InvalidPartitionsError
from stratalog.common.names import TopicPartition
from stratalog.server import params
from stratalog.server.state import ADMIN_BODY_LIMIT, ServerState, state_of



def partition_summary(state: ServerState, tp: TopicPartition) -> dict[str, Any]:
    log = state.broker.log(tp)
    offline = state.engine.offline_dirs().get(log.log_dir)
    return {"partition": log.topic_partition.partition, "logDir": str(log.dir.parent),
            "logStartOffset": log.log_start_offset, "logEndOffset": log.log_end_offset,
            "highWatermark": log.high_watermark, "size": log.size, "segments": len(log.segments),
            "offline": offline is not None, "storageError": offline.describe() if offline else None}


def describe(state: ServerState, topic: str) -> dict[str, Any]:
    description = state.broker.topics.describe_topic(topic)
    partitions = [partition_summary(state, TopicPartition(topic, p)) for p in description.partitions]
    return {"name": topic, "partitionCount": len(partitions), "configs": description.overrides,
            "effectiveConfigs": description.config.to_properties(), "partitions": partitions}


def partition_stats(state: ServerState, topic: str, partition: int) -> dict[str, Any]:
    tp = TopicPartition(topic, partition)
    log = state.broker.log(tp)
    stats = partition_summary(state, tp)
    stats.update({"topic": topic, "recoveryPoint": log.recovery_point,
                  "unflushedMessages": log.unflushed_messages(), "compacted": log.config.compact,
                  "dirtyRatio": None, "firstDirtyOffset": None, "lastCleanMs": None, "cleanerPasses": 0,
                  "uncleanableReason": None})
    if log.config.compact:
        candidate = state.engine.cleanable(log)
        stats["dirtyRatio"] = candidate.dirty_ratio
        stats["firstDirtyOffset"] = candidate.first_dirty_offset
    cleaner = state.engine.cleaner
    status = cleaner.status.get(tp) if cleaner is not None else None
    if status is not None:
        stats["lastCleanMs"] = status.last_clean_ms
        stats["cleanerPasses"] = status.passes
        stats["uncleanableReason"] = status.uncleanable_reason
    return stats


async def list_topics(request: web.Request) -> web.Response:
    state = state_of(request)

    def run() -> list[dict[str, Any]]:
        counts: dict[str, int] = {}
        for tp in state.engine.manager.logs():
            counts[tp.topic] = counts.get(tp.topic, 0) + 1
        return [{"name": name, "partitionCount": count} for name, count in sorted(counts.items())]

    return web.json_response({"topics": await state.run(run)})


async def create_topic(request: web.Request) -> web.Response:
    state = state_of(request)
    body = await params.json_object(request, ADMIN_BODY_LIMIT, allowed={"name", "partitions", "configs"},
                                    required={"name"})
    name = params.field_str(body, "name")
    limit = state.settings.max_partitions_per_topic
    if "partitions" in body and (isinstance(body["partitions"], int) and not isinstance(body["partitions"], bool)
                                 and not 1 <= body["partitions"] <= limit):
        raise InvalidPartitionsError(f"topic {name!r}: partitions must be between 1 and {limit} on this server, "
                                     f"got {body['partitions']}")
    partitions = params.field_int(body, "partitions", 1, minimum=1, maximum=limit)
    configs = params.field_configs(body, "configs")

    def run() -> dict[str, Any]:
        state.broker.topics.create_topic(name, partitions, configs)
        return describe(state, name)

    try:
        result = await state.run(run)
    finally:
        state.topics_changed()
    return web.json_response(result, status=201)


async def get_topic(request: web.Request) -> web.Response:
    state = state_of(request)
    topic = params.topic(request)
    return web.json_response(await state.run(describe, state, topic))


async def alter_configs(request: web.Request) -> web.Response:
    """``{"set": {key: value}, "delete": [key]}``: Kafka's IncrementalAlterConfigs SET / DELETE."""
    state = state_of(request)
    topic = params.topic(request)
    body = await params.json_object(request, ADMIN_BODY_LIMIT, allowed={"set", "delete"})
    to_set = params.field_configs(body, "set")
    to_delete = set(params.field_str_list(body, "delete"))

    def run() -> dict[str, Any]:
        state.broker.topics.alter_topic_config_incrementally(topic, to_set, to_delete)
        return describe(state, topic)

    try:
        result = await state.run(run)
    finally:
        state.topics_changed()
    return web.json_response(result)


async def add_partitions(request: web.Request) -> web.Response:
    state = state_of(request)
    topic = params.topic(request)
    body = await params.json_object(request, ADMIN_BODY_LIMIT, allowed={"count"}, required={"count"})
    limit = state.settings.max_partitions_per_topic
    count = body.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and not 1 <= count <= limit:
        raise InvalidPartitionsError(f"topic {topic!r}: the partition count must be between 1 and {limit} on this "
                                     f"server, got {count}")
    total = params.field_int(body, "count", minimum=1, maximum=limit)

    def run() -> dict[str, Any]:
        state.broker.topics.add_partitions(topic, total)
        return describe(state, topic)

    return web.json_response(await state.run(run))


async def delete_topic(request: web.Request) -> web.Response:
    """Rename the partition directories ``-delete`` (removed by the deletion task, as Kafka does)."""
    state = state_of(request)
    topic = params.topic(request)

    try:
        partitions, renamed = await state.broker.delete_topic(topic)
    finally:
        state.topics_changed()
    state.metrics.forget_topic(topic, partitions)
    return web.json_response({"deleted": topic, "partitions": len(partitions), "renamedTo": renamed})


async def get_partition(request: web.Request) -> web.Response:
    state = state_of(request)
    topic, partition = params.topic(request), params.partition(request)
    return web.json_response(await state.run(partition_stats, state, topic, partition))
