"""The source and sink options, under the names and in the forms of Spark's Kafka connector.

A query written for ``format("kafka")`` keeps its options: ``subscribe`` /
``subscribePattern`` / ``assign``, ``startingOffsets`` / ``endingOffsets``
(``earliest``, ``latest`` or JSON ``{"t":{"0":23,"1":-2}}`` with -2 earliest
and -1 latest), the timestamp forms, ``failOnDataLoss``, ``maxOffsetsPerTrigger``,
``minPartitions``, ``maxRecordsPerPartition``, ``includeHeaders``,
``kafka.isolation.level``. The rules on which forms a batch or a streaming
query accepts are Kafka's too, with Kafka's messages. Instead of
``kafka.bootstrap.servers`` the data's place is ``path`` (data directories,
comma-separated; read directly) or ``url`` (a ``stratalog serve`` endpoint, or several agents,
comma-separated, as Kafka clients take bootstrap servers).

Spark hands options over with lower-cased keys and string values; everything
here is pure parsing, testable without Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .store import Location

EARLIEST = -2
LATEST = -1
DEFAULT_BYTES_PER_PARTITION = 64 << 20  # a task costs ~30 ms in Spark: give each one whole segments

TopicPartition = tuple[str, int]
SpecKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


class OptionError(ValueError):
    """An option that is missing, malformed, or not allowed for this kind of query."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a query starts or ends, before it is resolved against the log."""

    kind: SpecKind
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # "offsets" / "timestamps" (per partition)
    timestamp: int | None = None  # "timestamp": one time for every partition


@dataclass(frozen=True)
class Subscription:
    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None  # Java's Matcher.matches()
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class SourceOptions:
    location: Location
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    read_committed: bool = False
    no_match_latest: bool = False  # startingOffsetsByTimestampStrategy=latest
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION


@dataclass(frozen=True)
class SinkOptions:
    location: Location
    topic: str | None = None
    compression: str = "none"
    lock_timeout_s: float = 600.0


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower(), options.get(name))
    return None if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {value!r}")
    return lowered == "true"


def _positive(options: Mapping[str, str], name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {name!r} must be a positive integer, not {value!r}") from None
    if number <= 0:
        raise OptionError(f"option {name!r} must be a positive integer, not {value!r}")
    return number


def parse_location(options: Mapping[str, str]) -> Location:
    path, url = _get(options, "path"), _get(options, "url")
    if (path is None) == (url is None):
        raise OptionError("give exactly one of the options 'path' (data directories, comma-separated, read "
                          "directly) and 'url' (a `stratalog serve` endpoint)")
    if url is not None:
        return Location(url=url.rstrip("/"))
    assert path is not None
    paths = tuple(p.strip() for p in path.split(",") if p.strip())
    if not paths:
        raise OptionError("option 'path' names no data directory")
    return Location(paths=paths)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if _get(options, name) is not None]
    if not given:
        raise OptionError("One of the following options must be specified for Kafka source: subscribe, "
                          "subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise OptionError("Only one of the following options can be specified for Kafka source: subscribe, "
                          f"subscribePattern, assign. See the docs for more details. (Given: {', '.join(given)})")
    value = _get(options, given[0])
    assert value is not None
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if given[0] == "subscribePattern":
        if not value.strip():
            raise OptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''")
        try:
            re.compile(value)
        except re.error as error:
            raise OptionError(f"option 'subscribePattern': {value!r} is not a valid pattern ({error})") from None
        return Subscription("subscribePattern", pattern=value)
    parsed = _json_object(value, "assign")
    assigned: list[TopicPartition] = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                                       for p in partitions):
            raise OptionError(f"option 'assign': topic {topic!r} must map to a list of partition numbers, "
                              f"e.g. {{\"{topic}\":[0,1]}}")
        assigned.extend((topic, p) for p in partitions)
    if not assigned:
        raise OptionError(f"option 'assign' assigns no partition: {value}")
    return Subscription("assign", assigned=tuple(sorted(set(assigned))))


def _json_object(value: str, name: str) -> dict[str, object]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise OptionError(f"option {name!r}: {value!r} is not valid JSON ({error.msg})") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name!r}: expected a JSON object, got {value!r}")
    return parsed


def parse_partition_numbers(value: str, name: str) -> dict[TopicPartition, int]:
    """``{"t":{"0":23,"1":-2}}`` → {("t", 0): 23, ("t", 1): -2}."""
    result = {}
    for topic, partitions in _json_object(value, name).items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map to {{\"partition\": number}}")
        for partition, number in partitions.items():
            try:
                key = (topic, int(partition))
            except ValueError:
                raise OptionError(f"option {name!r}: {partition!r} is not a partition number") from None
            if not isinstance(number, int) or isinstance(number, bool):
                raise OptionError(f"option {name!r}: {topic}-{partition} must map to a number, not {number!r}")
            result[key] = number
    return result


def _offset_spec(options: Mapping[str, str], prefix: Literal["starting", "ending"],
                 default: SpecKind) -> OffsetSpec:
    # Kafka's precedence: the global timestamp, then per-partition timestamps, then offsets.
    timestamp = _get(options, f"{prefix}Timestamp")
    if timestamp is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(timestamp))
        except ValueError:
            raise OptionError(f"option '{prefix}Timestamp' must be milliseconds since the epoch, "
                              f"not {timestamp!r}") from None
    by_timestamp = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_timestamp is not None:
        return OffsetSpec("timestamps", offsets=parse_partition_numbers(by_timestamp, f"{prefix}OffsetsByTimestamp"))
    value = _get(options, f"{prefix}Offsets")
    if value is None:
        return OffsetSpec(default)
    lowered = value.strip().lower()
    if lowered in ("earliest", "latest"):
        return OffsetSpec("earliest" if lowered == "earliest" else "latest")
    return OffsetSpec("offsets", offsets=parse_partition_numbers(value, f"{prefix}Offsets"))


def _isolation(options: Mapping[str, str]) -> bool:
    level = (_get(options, "kafka.isolation.level") or "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, not {level!r}")
    return level == "read_committed"


def _strategy(options: Mapping[str, str]) -> bool:
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, not {strategy!r}")
    return strategy == "latest"


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    location = parse_location(options)
    subscription = parse_subscription(options)
    starting = _offset_spec(options, "starting", "latest" if streaming else "earliest")
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if _get(options, name) is not None:
                raise OptionError(f"{name} option not valid in streaming queries")
        ending = OffsetSpec("latest")
    else:
        ending = _offset_spec(options, "ending", "latest")
        _check_batch_specs(starting, ending)
    return SourceOptions(
        location=location, subscription=subscription, starting=starting, ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        read_committed=_isolation(options),
        no_match_latest=_strategy(options),
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive(options, "minPartitions"),
        max_records_per_partition=_positive(options, "maxRecordsPerPartition"),
        bytes_per_partition=_positive(options, "bytesPerPartition") or DEFAULT_BYTES_PER_PARTITION,
    )


def _check_batch_specs(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Kafka's ``validateBatchOptions``, with its messages."""
    if starting.kind == "latest":
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if starting.kind == "offsets":
        for (topic, partition), offset in starting.offsets.items():
            if offset == LATEST:
                raise OptionError(f"startingOffsets for {topic}-{partition} can't be latest for batch queries on "
                                  "Kafka")
    if ending.kind == "earliest":
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")
    if ending.kind == "offsets":
        for (topic, partition), offset in ending.offsets.items():
            if offset == EARLIEST:
                raise OptionError(f"endingOffsets for {topic}-{partition} can't be earliest for batch queries on "
                                  "Kafka")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    compression = (_get(options, "kafka.compression.type") or "none").strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise OptionError(f"option 'kafka.compression.type' must be none, gzip, snappy, lz4 or zstd, "
                          f"not {compression!r}")
    timeout = _positive(options, "lockTimeoutMs")
    return SinkOptions(location=parse_location(options), topic=_get(options, "topic"), compression=compression,
                       lock_timeout_s=timeout / 1000 if timeout else 600.0)
