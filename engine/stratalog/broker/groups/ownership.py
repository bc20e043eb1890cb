"""Which groups this engine coordinates, and reading a partition's committed offsets back.

A group belongs to one partition of ``__consumer_offsets`` (``partition_for``: Java's hash of its
id, modulo the partition count), and the engine leading that partition is its coordinator
(Kafka's rule). The coordinator loads a partition's committed offsets from its log at the first
request after it became leader, at that leader epoch (Kafka's loading on election), and drops
the partition's groups as soon as the replication state says it lost it (Kafka's resignation):
joins and syncs waiting there are answered NOT_COORDINATOR at once. Requests for groups of a
partition it does not lead get NOT_COORDINATOR, and clients look again.

Where the topic is and who leads it is the host's to say (``OffsetsPlacement``): a lone engine
(``local_placement``) leads every partition of its own ``__consumer_offsets`` at epoch 0 and
makes the topic at the first commit; an engine among replicas (``replicated_placement``) leads
the partitions its replication state says it does, and learns the partition count from whoever
made the topic (on Kubernetes, the operator's Topic resource).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, CommittedOffset, parse_key, parse_value, \
    partition_for
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


class LedPartitions:
    """The offsets partitions whose groups this coordinator has loaded, at which leader epoch, and
    those groups' committed offsets.

    ``forget`` is the coordinator's: it drops the members of groups whose partition is no longer
    led here (their waiting joins and syncs answered NOT_COORDINATOR).
    """

    def __init__(self, broker: ReplicaManager, placement: OffsetsPlacement, members: Collection[str],
                 forget: Callable[[list[str]], None]) -> None:
        self.broker = broker
        self.placement = placement
        self.members = members                 # the coordinator's groups with members, by id
        self.forget = forget
        self.offsets: Offsets = {}             # committed offsets of the groups coordinated here
        self.loaded: dict[int, int] = {}       # offsets partition -> the leader epoch it was loaded at
        self._loading: dict[int, asyncio.Lock] = {}
        self._newly_loaded = asyncio.Event()   # wakes the resignation watch to watch one more partition

    def partition_of(self, group_id: str) -> int | None:
        count = self.placement.partition_count()
        return None if not count else partition_for(group_id, count)

    async def coordinating(self, group_id: str) -> str:
        """NONE when this engine coordinates ``group_id`` (its offsets loaded), else the error to answer."""
        partition = self.partition_of(group_id)
        if partition is None:
            return "COORDINATOR_NOT_AVAILABLE"   # no offsets topic yet
        return "NONE" if await self._loaded(partition) else "NOT_COORDINATOR"

    def led(self, group_id: str) -> bool:
        """Whether ``group_id`` is coordinated here now (without loading anything)."""
        partition = self.partition_of(group_id)
        return partition is not None and partition in self.loaded and \
            self.placement.leader_epoch(partition) == self.loaded[partition]

    async def load_led(self) -> None:
        """Load every partition led here now (at the start, and before listing groups)."""
        count = await self.broker.run(self.placement.partition_count)
        for partition in range(count or 0):
            await self._loaded(partition)

    async def _loaded(self, partition: int) -> bool:
        """Whether this engine leads ``partition``, loading its offsets first if it just came to lead it."""
        epoch = self.placement.leader_epoch(partition)
        if epoch is None:
            if partition in self.loaded:
                self._unload(partition)
            return False
        if self.loaded.get(partition) == epoch:
            return True
        async with self._loading.setdefault(partition, asyncio.Lock()):
            if self.loaded.get(partition) != epoch:
                self._unload(partition)
                offsets = await self.broker.run(read_offsets, self.broker, partition)
                self.offsets.update(offsets)
                self.loaded[partition] = epoch
                self._newly_loaded.set()
                logger.info("%s-%d: coordinating its groups at leader epoch %d (%d with committed offsets)",
                            OFFSETS_TOPIC, partition, epoch, len(offsets))
        return self.placement.leader_epoch(partition) == epoch

    async def watch_resignations(self) -> None:
        """Drop the groups of each loaded partition as soon as this engine no longer leads it at the
        epoch it was loaded at. Woken by the partitions' leadership news or by a partition loaded
        since; runs until cancelled."""
        signals = self.broker.news_signals
        while True:
            # The events are taken before the check, as a fetch takes them before its read: news
            # that comes after the check wakes the wait, and none is lost in between.
            self._newly_loaded.clear()
            events = [signals.event(TopicPartition(OFFSETS_TOPIC, p)) for p in self.loaded]
            for partition, epoch in list(self.loaded.items()):
                if self.placement.leader_epoch(partition) != epoch:
                    logger.info("%s-%d: no longer led here at leader epoch %d: its groups are coordinated "
                                "elsewhere now", OFFSETS_TOPIC, partition, epoch)
                    self._unload(partition)
            waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(event.wait()) for event in events]
            waiters.append(asyncio.ensure_future(self._newly_loaded.wait()))
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    def _unload(self, partition: int) -> None:
        """Forget the groups of a partition no longer led here at the epoch they were loaded at."""
        self.loaded.pop(partition, None)
        count = self.placement.partition_count()
        gone = [g for g in set(self.members) | set(self.offsets) if not count or partition_for(g, count) == partition]
        for group_id in gone:
            self.offsets.pop(group_id, None)
        self.forget(gone)
