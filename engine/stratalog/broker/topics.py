"""Topic administration: Kafka's CreateTopics, CreatePartitions, IncrementalAlterConfigs and
DeleteTopics, and the partial form a Kubernetes LogDir needs (hold these partitions of a topic).

The rules of a topic live here — legal and reserved names, the '.'/'_' collision, partition
counts, config validation — and the storage work below them in ``LogManager`` (make the
directories, write the config file beside each partition, rename to ``-delete``). ``stratalog
topics``, the HTTP API and the Kubernetes agent all come through this class, so their on-disk
results are identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from stratalog.common.config import LogConfig
from stratalog.common.errors import InvalidPartitionsError, InvalidTopicError, TopicExistsError
from stratalog.common.names import RESERVED_TOPICS, validate_topic_name
from stratalog.storage.log_manager import LogManager, TopicDescription

MAX_PARTITIONS = 100_000


class TopicAdmin:
    def __init__(self, manager: LogManager) -> None:
        self.manager = manager

    def describe_topic(self, topic: str) -> TopicDescription:
        return self.manager.describe_topic(topic)

    @staticmethod
    def check_partition_count(topic: str, partitions: int, *, where: str = "partitions") -> None:
        """Kafka's rule for a partition count (create, or the new total when adding): 1 to MAX_PARTITIONS.

        Static, so a caller can refuse a bad count before it opens or creates anything.
        """
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"topic {topic!r}: {where} must be between 1 and {MAX_PARTITIONS}, "
                                         f"got {partitions}")

    def create_topic(self, topic: str, partitions: int = 1, overrides: Mapping[str, object] | None = None) -> None:
        self._check_name(topic)
        self.check_partition_count(topic, partitions)
        manager = self.manager
        config = manager.log_config(dict(overrides or {}), where=f"topic {topic!r}")
        with manager.lock:
            existing = manager.topics()
            if topic in existing:
                raise TopicExistsError(f"topic {topic!r} already exists")
            self._check_collision(topic, existing)
            manager.create_logs(topic, range(partitions), config)

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions (Kafka's CreatePartitions takes the new total)."""
        self.check_partition_count(topic, total)
        manager = self.manager
        with manager.lock:
            current = manager.describe_topic(topic)
            count = len(current.partitions)
            if total <= count:
                raise InvalidPartitionsError(
                    f"topic {topic!r} has {count} partitions; the count can only grow (asked for {total})"
                )
            manager.create_logs(topic, range(count, total), current.config)

    def normalize_overrides(self, topic: str, overrides: Mapping[str, object]) -> dict[str, str]:
        """``overrides`` as this engine stores them (validated; keys equal to the defaults dropped)."""
        manager = self.manager
        return manager.log_config(dict(overrides), where=f"topic {topic!r}").overrides_vs(manager.default_log_config)

    def properties_of(self, topic: str, overrides: Mapping[str, object]) -> dict[str, str]:
        """Every config of a topic with ``overrides`` over this engine's defaults, as Kafka lists them
        (for a topic of the cluster this engine holds no replica of)."""
        return self.manager.log_config(dict(overrides), where=f"topic {topic!r}").to_properties()

    def ensure_partitions(self, topic: str, partitions: Iterable[int],
                          overrides: Mapping[str, object] | None = None) -> list[int]:
        """Hold these partitions of ``topic`` (any subset of its numbers), creating the missing ones.

        For an engine that stores some of a topic's partitions, as a Kubernetes LogDir does
        with the partitions assigned to it. A new topic takes ``overrides``; partitions added
        to an existing topic take the topic's current config. Returns the partitions created.
        """
        self._check_name(topic)
        wanted = sorted(set(partitions))
        if any(not 0 <= p < MAX_PARTITIONS for p in wanted):
            raise InvalidPartitionsError(f"topic {topic!r}: partition numbers must be in [0, {MAX_PARTITIONS})")
        manager = self.manager
        with manager.lock:
            existing = manager.topics()
            if topic in existing:
                current = manager.describe_topic(topic)
                missing = [p for p in wanted if p not in current.partitions]
                manager.create_logs(topic, missing, current.config)
                return missing
            self._check_collision(topic, existing)
            if not wanted:
                return []
            manager.create_logs(topic, wanted, manager.log_config(dict(overrides or {}), where=f"topic {topic!r}"))
            return wanted

    def alter_topic_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """Replace the topic's overrides (keys not given fall back to the engine defaults)."""
        manager = self.manager
        with manager.lock:
            manager.describe_topic(topic)  # an unknown topic is refused before the config is judged
            config = manager.log_config(dict(overrides), where=f"topic {topic!r}")
            manager.update_topic_config(topic, config)
            return config

    def alter_topic_config_incrementally(self, topic: str, to_set: Mapping[str, str], to_delete: Iterable[str]
                                         ) -> LogConfig:
        """Kafka's IncrementalAlterConfigs SET / DELETE, as one read-modify-write of the overrides."""
        manager = self.manager
        doomed = set(to_delete)
        with manager.lock:
            current = manager.describe_topic(topic).overrides
            merged: dict[str, object] = {k: v for k, v in current.items() if k not in doomed}
            merged.update(to_set)
            return self.alter_topic_config(topic, merged)

    def delete_topic(self, topic: str) -> list[Path]:
        """Rename each partition directory to ``<name>.<uuid>-delete``; returns the new paths."""
        manager = self.manager
        with manager.lock:
            return manager.delete_logs(topic, manager.describe_topic(topic).partitions)

    def delete_partitions(self, topic: str, partitions: Iterable[int]) -> list[Path]:
        """Delete some partitions of ``topic`` (the rest stay), as :meth:`delete_topic` does for all."""
        manager = self.manager
        with manager.lock:
            current = manager.describe_topic(topic)
            return manager.delete_logs(topic, sorted(set(partitions) & set(current.partitions)))

    @staticmethod
    def _check_name(topic: str) -> None:
        validate_topic_name(topic)
        if topic in RESERVED_TOPICS:
            raise InvalidTopicError(f"topic {topic!r} is reserved for Kafka's KRaft metadata log")

    @staticmethod
    def _check_collision(topic: str, existing: Iterable[str]) -> None:
        collision = next((t for t in existing if t.replace(".", "_") == topic.replace(".", "_")), None)
        if collision is not None:
            raise InvalidTopicError(
                f"topic {topic!r} collides with existing topic {collision!r}: '.' and '_' are the same "
                "in Kafka's metric names"
            )
