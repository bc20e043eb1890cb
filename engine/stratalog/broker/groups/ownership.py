"""Which groups this engine coordinates, and reading a partition's committed offsets back.

A group belongs to one partition of ``__consumer_offsets`` (``partition_for``: Java's hash of its
id, modulo the partition count), and the engine leading that partition is its coordinator
(Kafka's rule). The coordinator loads a partition's committed offsets from its log at the first
request after it became leader, at that leader epoch (Kafka's loading on election), and drops
the partition's groups when it meets a request after losing it (Kafka's resignation); requests
for groups of a partition it does not lead get NOT_COORDINATOR, and clients look again.

Where the topic is and who leads it is the host's to say (``OffsetsPlacement``): a lone engine
(``local_placement``) leads every partition of its own ``__consumer_offsets`` at epoch 0 and
makes the topic at the first commit; an engine among replicas (``replicated_placement``) leads
the partitions its replication state says it does, and learns the partition count from whoever
made the topic (on Kubernetes, the operator's Topic resource).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, CommittedOffset, parse_key, parse_value
from stratalog.common.errors import CorruptRecordError, UnknownTopicOrPartitionError
from stratalog.common.names import TopicPartition
from stratalog.storage.isolation import FetchIsolation

if TYPE_CHECKING:
    from stratalog.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

Offsets = dict[str, dict[TopicPartition, CommittedOffset]]   # group -> its committed offsets


@dataclass(frozen=True)
class OffsetsPlacement:
    """Where ``__consumer_offsets`` is and which of its partitions this engine leads."""

    partition_count: Callable[[], int | None]   # None: the topic is not there yet (COORDINATOR_NOT_AVAILABLE)
    leader_epoch: Callable[[int], int | None]   # this engine's leader epoch of a partition; None: not its leader
    create_topic: bool                          # make the topic at the first commit (a lone engine)


def local_placement(broker: ReplicaManager) -> OffsetsPlacement:
    """A lone engine: the topic's partitions as made here (or as configured, before it is made: it
    will be made so). Counted once (the coordinator's start does it off the event loop): the
    partitions of ``__consumer_offsets`` never change."""
    known: list[int] = []

    def count() -> int:
        if not known:
            try:
                known.append(len(broker.held_partitions(OFFSETS_TOPIC)))
            except UnknownTopicOrPartitionError:
                known.append(broker.engine.config.offsets_topic_num_partitions)
        return known[0]

    return OffsetsPlacement(count, lambda partition: 0, create_topic=True)


def replicated_placement(broker: ReplicaManager, partition_count: Callable[[], int | None]) -> OffsetsPlacement:
    """An engine among replicas: it coordinates the groups of the partitions it leads now."""

    def leader_epoch(partition: int) -> int | None:
        replicas = broker.replicas
        replica = replicas.get(TopicPartition(OFFSETS_TOPIC, partition)) if replicas is not None else None
        if replica is None or not replica.is_leader:
            return None
        assert replica.state is not None
        return replica.state.leader_epoch

    return OffsetsPlacement(partition_count, leader_epoch, create_topic=False)


def read_offsets(broker: ReplicaManager, partition: int) -> Offsets:
    """The committed offsets in one partition's log, the latest per group and partition (blocking)."""
    try:
        log = broker.log(TopicPartition(OFFSETS_TOPIC, partition))
    except UnknownTopicOrPartitionError:
        return {}   # not made yet: nothing was committed
    offsets: Offsets = {}
    # To the log end, as Kafka loads a partition: a leader just elected may not have moved its high
    # watermark past the commits its followers already hold (it will, once they fetch).
    for record in log.read_records(log.log_start_offset, isolation=FetchIsolation.LOG_END):
        if record.key is None:
            continue
        try:
            parsed = parse_key(record.key)
            value = None if record.value is None or parsed is None else parse_value(record.value)
        except CorruptRecordError as error:   # not the engine's: skipped, never a reason not to coordinate
            logger.warning("%s-%d offset %d: skipped: %s", OFFSETS_TOPIC, partition, record.offset, error)
            continue
        if parsed is None:
            continue
        group_id, tp = parsed
        if value is None:
            offsets.get(group_id, {}).pop(tp, None)
        else:
            offsets.setdefault(group_id, {})[tp] = value
    return offsets
