"""Topic administration over Kafka's protocol: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs and DescribeCluster, through the broker's ``TopicAdmin``
(the same rules as ``stratalog topics`` and the HTTP API).

A lone engine keeps one copy: a replication factor other than 1 (or -1, the default) is refused
with INVALID_REPLICATION_FACTOR, as are manual replica assignments. Engine-level settings are
read-only here (they come from ``--config`` at start).

On Kubernetes the Topic resource is the source of truth: an agent's ``ClusterView`` says so, and
CreateTopics, DeleteTopics, CreatePartitions and IncrementalAlterConfigs are refused there with
POLICY_VIOLATION and a message naming the resource to edit (Kafka's answer when a request breaks
the broker's topic policy). DescribeConfigs and DescribeCluster are served everywhere; an engine
holding no replica of a topic describes it from the overrides its cluster records for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stratalog.common.config import ENGINE_CONFIGS, TOPIC_CONFIGS
from stratalog.common.errors import InvalidConfigError, InvalidPartitionsError, StratalogError, \
    UnknownTopicOrPartitionError
from stratalog.server.kafka.authorization import Verb, refused
from stratalog.server.kafka.cluster import AdministeredElsewhere
from stratalog.server.kafka.codec import AUTHORIZED_OPERATIONS_OMITTED, NO_TOPIC_ID, Request, code_named, error_code, field
from stratalog.server.kafka.context import KafkaContext

DEFAULT_PARTITIONS = 1               # Kafka's num.partitions
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def _run(ctx: KafkaContext, call: Callable[..., Any], *args: Any) -> StratalogError | None:
    try:
        await ctx.broker.run(call, *args)
    except StratalogError as error:
        return error
    return None


async def _elsewhere(ctx: KafkaContext, topic: str) -> StratalogError | None:
    """The refusal of a topic change on an engine whose topics are administered elsewhere."""
    reason = await ctx.broker.run(ctx.view.administered_elsewhere, topic)
    return None if reason is None else AdministeredElsewhere(reason)


def _topic_configs(ctx: KafkaContext, name: str) -> list[dict[str, Any]]:
    topics = ctx.broker.topics
    try:
        description = topics.describe_topic(name)
        properties, overrides = description.config.to_properties(), set(description.overrides)
    except UnknownTopicOrPartitionError:
        recorded = ctx.view.topic_overrides(name)   # a topic of the cluster held by other engines only
        if recorded is None:
            raise
        normalized = topics.normalize_overrides(name, recorded)
        properties, overrides = topics.properties_of(name, normalized), set(normalized)
    return [{"name": key, "value": value, "read_only": False, "is_sensitive": False, "synonyms": [],
             "config_source": DYNAMIC_TOPIC_CONFIG if key in overrides else DEFAULT_CONFIG,
             "config_type": 0, "documentation": TOPIC_CONFIGS[key].doc}
            for key, value in properties.items()]


async def create_topics(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    answers = []
    validate_only = field(request.body, "validate_only", False)
    for topic in request.body.topics:
        partitions = DEFAULT_PARTITIONS if topic.num_partitions == -1 else topic.num_partitions
        overrides = {c.name: c.value for c in topic.configs}
        answer: dict[str, Any] = {"name": topic.name, "topic_id": NO_TOPIC_ID, "error_message": None,
                                  "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1,
                                  "configs": []}
        refusal = await refused(ctx, request, Verb.ADMINISTER, topic.name) or await _elsewhere(ctx, topic.name)
        if refusal is not None:
            answers.append({**answer, "error_code": error_code(refusal), "error_message": str(refusal)})
            continue
        if topic.replication_factor not in (-1, 1) or topic.assignments:
            answers.append({**answer, "error_code": code_named("INVALID_REPLICATION_FACTOR"),
                            "error_message": f"topic {topic.name!r}: this engine keeps one copy of each partition "
                                             f"(replication factor 1, no replica assignment), asked for "
                                             f"{topic.replication_factor}"})
            continue
        if validate_only:
            error = await _run(ctx, _validate_topic, ctx, topic.name, partitions, overrides)
        else:
            error = await _run(ctx, ctx.broker.topics.create_topic, topic.name, partitions, overrides)
        if error is not None:
            answers.append({**answer, "error_code": error_code(error), "error_message": str(error)})
            continue
        configs = [] if validate_only else await ctx.broker.run(_topic_configs, ctx, topic.name)
        answers.append({**answer, "error_code": 0, "num_partitions": partitions, "replication_factor": 1,
                        "configs": configs})
    return {"throttle_time": 0, "topics": answers}


def _validate_topic(ctx: KafkaContext, name: str, partitions: int, overrides: dict[str, str]) -> None:
    topics = ctx.broker.topics
    topics.check_partition_count(name, partitions)
    topics.normalize_overrides(name, overrides)


async def delete_topics(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    names = field(request.body, "topic_names")
    if names is None:
        names = [t.name for t in request.body.topics]
    answers = []
    for name in names:
        try:
            refusal = await refused(ctx, request, Verb.ADMINISTER, name) or await _elsewhere(ctx, name)
            if refusal is not None:
                raise refusal
            await ctx.broker.delete_topic(name)
            answers.append({"name": name, "topic_id": NO_TOPIC_ID, "error_code": 0, "error_message": None})
        except StratalogError as error:
            answers.append({"name": name, "topic_id": NO_TOPIC_ID, "error_code": error_code(error),
                            "error_message": str(error)})
    return {"throttle_time": 0, "responses": answers}


async def create_partitions(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    results = []
    for topic in request.body.topics:
        refusal = await refused(ctx, request, Verb.ADMINISTER, topic.name) or await _elsewhere(ctx, topic.name)
        if refusal is not None:
            results.append({"name": topic.name, "error_code": error_code(refusal), "error_message": str(refusal)})
            continue
        if topic.assignments:
            results.append({"name": topic.name, "error_code": code_named("INVALID_REQUEST"),
                            "error_message": "replica assignments are not taken: one copy per partition"})
            continue
        if request.body.validate_only:
            error = await _run(ctx, _validate_growth, ctx, topic.name, topic.count)
        else:
            error = await _run(ctx, ctx.broker.topics.add_partitions, topic.name, topic.count)
        results.append({"name": topic.name, "error_code": error_code(error),
                        "error_message": None if error is None else str(error)})
    return {"throttle_time": 0, "results": results}


def _validate_growth(ctx: KafkaContext, name: str, total: int) -> None:
    current = len(ctx.broker.topics.describe_topic(name).partitions)
    ctx.broker.topics.check_partition_count(name, total)
    if total <= current:
        raise InvalidPartitionsError(f"topic {name!r} has {current} partitions; the count can only grow "
                                     f"(asked for {total})")


async def describe_configs(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    results = []
    for resource in request.body.resources:
        wanted = resource.configuration_keys
        entry = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                 "error_message": None}
        try:
            if resource.resource_type == TOPIC_RESOURCE:
                configs = await ctx.broker.run(_topic_configs, ctx, resource.resource_name)
            elif resource.resource_type == BROKER_RESOURCE:
                configs = _broker_configs(ctx)
            else:
                results.append({**entry, "error_code": code_named("INVALID_REQUEST"), "configs": [],
                                "error_message": f"resource type {resource.resource_type} is not described here"})
                continue
        except StratalogError as error:
            results.append({**entry, "error_code": error_code(error), "error_message": str(error), "configs": []})
            continue
        if wanted is not None:
            configs = [c for c in configs if c["name"] in set(wanted)]
        results.append({**entry, "error_code": 0, "configs": configs})
    return {"throttle_time": 0, "results": results}


def _broker_configs(ctx: KafkaContext) -> list[dict[str, Any]]:
    config = ctx.engine.config
    out: list[dict[str, Any]] = []
    for name, key in ENGINE_CONFIGS.items():
        value = config.get(name)
        out.append({"name": name, "value": None if value is None else key.to_string(value), "read_only": True,
                    "is_sensitive": False, "synonyms": [],
                    "config_source": DEFAULT_CONFIG if value == key.default else STATIC_BROKER_CONFIG,
                    "config_type": 0, "documentation": key.doc})
    return out


async def incremental_alter_configs(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    answers = []
    for resource in request.body.resources:
        entry = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
        if resource.resource_type != TOPIC_RESOURCE:
            answers.append({**entry, "error_code": code_named("INVALID_REQUEST"),
                            "error_message": "only topic configs change at run time; engine settings come from "
                                             "--config at start"})
            continue
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        call = _validate_alter if request.body.validate_only else _alter
        error = await refused(ctx, request, Verb.ADMINISTER, resource.resource_name) \
            or await _elsewhere(ctx, resource.resource_name) or await _run(ctx, call, ctx, resource.resource_name, ops)
        answers.append({**entry, "error_code": error_code(error),
                        "error_message": None if error is None else str(error)})
    return {"throttle_time": 0, "responses": answers}


def _alter_plan(ctx: KafkaContext, topic: str, ops: list[tuple[str, int, str | None]]
                ) -> tuple[dict[str, str], list[str]]:
    """Kafka's four operations as the overrides to set and the keys to drop."""
    current = ctx.broker.topics.describe_topic(topic).config.to_properties()
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    for name, op, value in ops:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"topic {topic!r}: unknown config {name!r}")
        if op == SET:
            to_set[name] = value or ""
        elif op == DELETE:
            to_delete.append(name)
        elif op in (APPEND, SUBTRACT):
            items = [v for v in to_set.get(name, current[name]).split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            items = items + [v for v in given if v not in items] if op == APPEND else \
                [v for v in items if v not in given]
            to_set[name] = ",".join(items)
        else:
            raise InvalidConfigError(f"topic {topic!r}: config operation {op} is not SET (0), DELETE (1), "
                                     "APPEND (2) or SUBTRACT (3)")
    return to_set, to_delete


def _alter(ctx: KafkaContext, topic: str, ops: list[tuple[str, int, str | None]]) -> None:
    to_set, to_delete = _alter_plan(ctx, topic, ops)
    ctx.broker.topics.alter_topic_config_incrementally(topic, to_set, to_delete)


def _validate_alter(ctx: KafkaContext, topic: str, ops: list[tuple[str, int, str | None]]) -> None:
    to_set, to_delete = _alter_plan(ctx, topic, ops)
    current = ctx.broker.topics.describe_topic(topic).overrides
    merged = {k: v for k, v in current.items() if k not in set(to_delete)} | to_set
    ctx.broker.topics.normalize_overrides(topic, merged)


async def describe_cluster(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    view = ctx.view
    nodes, controller = await ctx.broker.run(lambda: (view.nodes(), view.controller_id()))
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": view.cluster_id, "controller_id": controller,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            "brokers": [{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in nodes]}
