"""Turning offset options into offsets, and offsets into Kafka's checkpoint form.

* ``subscribed`` - the topic-partitions a subscription covers now;
* ``resolve`` - an ``OffsetSpec`` (earliest / latest / JSON / timestamps)
  against the log, with Kafka's rules (a JSON spec names every partition;
  -2 earliest, -1 latest; a timestamp with no record at or after it is an
  error or the end, per ``startingOffsetsByTimestampStrategy``);
* ``to_json`` / ``from_json`` - streaming offsets as Kafka's source writes them
  to the checkpoint, ``{"topic": {"partition": nextOffset}}``. Spark compares
  offsets as JSON *strings*, so the form is canonical: topics sorted,
  partitions in numeric order;
* ``rate_limit`` - ``maxOffsetsPerTrigger`` split across partitions in
  proportion to their backlog, exactly as Kafka's source does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from stratalog.common.errors import UnknownTopicOrPartitionError

from .options import EARLIEST, LATEST, OffsetSpec, OptionError, Subscription, TopicPartition
from .store import LogStore, PartitionOffsets

StreamOffsets = dict[str, dict[str, int]]


def subscribed(store: LogStore, subscription: Subscription, *, must_exist: bool) -> list[TopicPartition]:
    """The partitions the subscription covers, sorted; ``must_exist`` refuses topics that are not there."""
    if subscription.kind == "assign":
        existing = {t: set(_partitions_or_none(store, t, False)) for t, _ in subscription.assigned}
        missing = [tp for tp in subscription.assigned if tp[1] not in existing[tp[0]]]
        if missing and must_exist:
            raise UnknownTopicOrPartitionError(f"assigned partition(s) {_names(set(missing))} do not exist")
        return sorted(tp for tp in subscription.assigned if tp[1] in existing[tp[0]])
    if subscription.kind == "subscribe":
        found: list[TopicPartition] = []
        for topic in subscription.topics:
            found.extend((topic, p) for p in _partitions_or_none(store, topic, must_exist))
        return sorted(found)
    return sorted((t, p) for t in store.topics() if subscription.matches(t) for p in store.partitions(t))


def _partitions_or_none(store: LogStore, topic: str, must_exist: bool) -> list[int]:
    try:
        return store.partitions(topic)
    except UnknownTopicOrPartitionError:
        if must_exist:
            raise
        return []


def _check_covers(spec: OffsetSpec, partitions: list[TopicPartition], name: str) -> None:
    named, wanted = set(spec.offsets), set(partitions)
    if named != wanted:
        raise OptionError(f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
                          "Use -1 for latest, -2 for earliest.\n"
                          f"Specified: {_names(named)} Assigned: {_names(wanted)}")


def _names(tps: set[TopicPartition]) -> str:
    return "{" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "}"


def resolve(store: LogStore, partitions: list[TopicPartition], spec: OffsetSpec,
            known: Mapping[TopicPartition, PartitionOffsets], *, starting: bool,
            no_match_latest: bool = False) -> dict[TopicPartition, int]:
    """Concrete offsets for ``partitions``; ``known`` holds each one's log start and end."""
    name = "startingOffsets" if starting else "endingOffsets"
    result = {}
    if spec.kind in ("offsets", "timestamps"):
        option = name if spec.kind == "offsets" else name.replace("Offsets", "OffsetsByTimestamp")
        _check_covers(spec, partitions, option)
    for tp in partitions:
        bounds = known[tp]
        if spec.kind == "earliest":
            result[tp] = bounds.log_start
        elif spec.kind == "latest":
            result[tp] = bounds.end
        elif spec.kind == "offsets":
            value = spec.offsets[tp]
            result[tp] = bounds.log_start if value == EARLIEST else bounds.end if value == LATEST else value
            if result[tp] < 0:
                raise OptionError(f"{name} for {tp[0]}-{tp[1]}: {value} is not an offset (use -2 for earliest, "
                                  "-1 for latest)")
        else:
            timestamp = spec.timestamp if spec.kind == "timestamp" else spec.offsets[tp]
            assert timestamp is not None
            found = store.offset_for_timestamp(tp[0], tp[1], timestamp)
            if found is None:
                if starting and not no_match_latest:
                    raise OptionError(
                        f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
                        f"{timestamp}. (startingOffsetsByTimestampStrategy=error; set it to latest to start at "
                        "the end instead)")
                found = bounds.end  # as Kafka: no record at or after the time means "latest"
            result[tp] = found
    return result


def to_json(offsets: Mapping[TopicPartition, int]) -> StreamOffsets:
    """Kafka's checkpoint form, built in canonical order (topics sorted, partitions numeric)."""
    result: StreamOffsets = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in offsets.items() for partition, offset in partitions.items()}


def rate_limit(limit: int, start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int]
               ) -> dict[TopicPartition, int]:
    """Kafka's ``rateLimit``: ``limit`` offsets shared in proportion to each partition's backlog.

    A partition's share is rounded down, except that a share below one is
    rounded up so that small partitions are never starved.
    """
    sizes = {tp: end - start[tp] for tp, end in until.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    limited = {}
    for tp, end in until.items():
        if tp not in sizes:
            limited[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, start[tp] + share)
    return limited
