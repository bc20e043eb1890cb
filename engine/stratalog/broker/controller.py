"""What the engine asks of a controller, and one that lives in the process (for tests and one-box use).

The engine never elects itself and never decides its own ISR: partition state (replicas, leader,
leader epoch, ISR, partition epoch) arrives from a controller, and a leader only *proposes* ISR
changes (Kafka's AlterPartition), which count once the controller has committed them. Kafka's
controller is KRaft; in Kubernetes it is the operator writing through the API server (part 2);
``InProcessController`` keeps the same contract in memory so the engine's half can be tested and
run without either.

The commit is a compare-and-swap on the partition epoch: a proposal made against an epoch that
is no longer current is refused with ``INVALID_UPDATE_VERSION``, as is one from a leader that has
been replaced (``FENCED_LEADER_EPOCH``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from stratalog.broker.replica_state import PartitionState
from stratalog.common.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidUpdateVersionError,
    UnknownTopicOrPartitionError,
)
from stratalog.common.names import TopicPartition

Listener = Callable[[TopicPartition, PartitionState], None]


class Controller(Protocol):
    def alter_partition(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
                        partition_epoch: int) -> PartitionState:
        """Commit a new ISR proposed by ``leader`` against ``partition_epoch``; the committed state.

        Raises ``InvalidUpdateVersionError`` or ``FencedLeaderEpochError`` when the proposal is stale.
        """
        ...


class InProcessController:
    """Partition states in memory; every change is pushed to the listeners (the engines' replicas)."""

    def __init__(self) -> None:
        self._states: dict[TopicPartition, PartitionState] = {}
        self._listeners: list[Listener] = []
        self._fenced: set[int] = set()   # replicas declared dead, until they register again
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def state(self, tp: TopicPartition) -> PartitionState:
        with self._lock:
            state = self._states.get(tp)
        if state is None:
            raise UnknownTopicOrPartitionError(f"the controller knows no partition {tp}")
        return state

    def create(self, tp: TopicPartition, replicas: tuple[int, ...]) -> PartitionState:
        """A new partition: the first replica leads epoch 0, every replica in sync (an empty log)."""
        return self._publish(tp, PartitionState(replicas, replicas[0], 0, replicas, 0))

    def elect(self, tp: TopicPartition, leader: int, *, unclean: bool = False) -> PartitionState:
        """Move leadership to ``leader`` (an ISR member unless ``unclean``), bumping the leader epoch."""
        current = self.state(tp)
        if leader not in current.isr and not unclean:
            raise ValueError(f"{tp}: replica {leader} is not in the ISR {list(current.isr)}")
        isr = current.isr if leader in current.isr else (leader,)
        return self._publish(tp, current.with_leader(leader, isr))

    def fence(self, tp: TopicPartition, replica: int) -> PartitionState:
        """A replica is gone (its lease lapsed): elect the next ISR member in assignment order. It stays
        fenced, kept out of every ISR, until ``unfence`` (it registered again)."""
        with self._lock:
            self._fenced.add(replica)
        current = self.state(tp)
        survivors = tuple(r for r in current.isr if r != replica)
        if current.leader != replica:
            return self._publish(tp, current.with_isr(survivors))
        candidates = [r for r in current.replicas if r in survivors]
        if not candidates:  # no clean choice: the partition stays leaderless until one is back
            return self._publish(tp, current.with_leader(-1, current.isr))
        return self._publish(tp, current.with_leader(candidates[0], survivors))

    def unfence(self, replica: int) -> None:
        """The replica is back (a new lease): its leaders may propose it for the ISR again."""
        with self._lock:
            self._fenced.discard(replica)

    def alter_partition(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
                        partition_epoch: int) -> PartitionState:
        with self._lock:
            current = self._states.get(tp)
            if current is None:
                raise UnknownTopicOrPartitionError(f"the controller knows no partition {tp}")
            if leader_epoch != current.leader_epoch or leader != current.leader:
                raise FencedLeaderEpochError(
                    f"{tp}: ISR change from replica {leader} at leader epoch {leader_epoch}, but the leader is "
                    f"{current.leader} at epoch {current.leader_epoch}")
            if partition_epoch != current.partition_epoch:
                raise InvalidUpdateVersionError(
                    f"{tp}: ISR change proposed against partition epoch {partition_epoch}, the current one is "
                    f"{current.partition_epoch}")
            if leader not in isr or not set(isr) <= set(current.replicas):
                raise InvalidUpdateVersionError(f"{tp}: ISR {list(isr)} must hold the leader and only replicas")
            ineligible = (set(isr) - set(current.isr)) & self._fenced
            if ineligible:
                raise IneligibleReplicaError(f"{tp}: replicas {sorted(ineligible)} are fenced until they register "
                                             "again; they cannot join the ISR")
            state = self._states[tp] = current.with_isr(isr)
        self._notify(tp, state)
        return state

    def _publish(self, tp: TopicPartition, state: PartitionState) -> PartitionState:
        with self._lock:
            self._states[tp] = state
        self._notify(tp, state)
        return state

    def _notify(self, tp: TopicPartition, state: PartitionState) -> None:
        for listener in list(self._listeners):
            listener(tp, state)
