"""The leader's view of its replicas, as pure values: what a follower's fetch tells, what the
high watermark may be, who joins or leaves the ISR (the bookkeeping of Kafka's ``Partition``).

No files and no clock here: the caller passes the time and the log's offsets in, and applies what
comes out (moves the log's high watermark, proposes an ISR change to the controller). That keeps
every rule of seed 004 and of Kafka's ``Partition`` testable with plain numbers.

The rules, as Kafka 4 has them:

* A follower's fetch offset is its acknowledgement: it has every offset below it (its LEO).
* A follower is *caught up* at time t if at t it had fetched up to the leader's LEO, or up to
  the LEO the leader had at its previous fetch (Kafka's ``updateFetchState``): a follower that
  keeps pace with a steady stream of appends is caught up even though the leader is always a bit
  ahead.
* The high watermark is the smallest LEO over the *maximal* ISR (the committed ISR plus replicas
  whose joining is proposed but not yet committed: adding is safe before the commit, dropping is
  not). It never moves backwards, and it does not move at all while the committed ISR is smaller
  than ``min.insync.replicas`` (KIP-966's strict rule, Kafka 4's default).
* A follower outside the ISR joins once its LEO has reached the high watermark and the first
  offset of the leader's current epoch (so it has all that this leader acknowledged).
* A follower in the ISR that has not been caught up for ``replica.lag.time.max.ms`` is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's replication state, as the controller decides it (KRaft's PartitionRecord).

    ``partition_epoch`` moves with every change of this record; ``leader_epoch`` only with a
    change of leader. Both fence: a proposal or request carrying an older one is refused.
    """

    replicas: tuple[int, ...]   # the assignment, preferred leader first
    leader: int                 # -1 when there is none
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int

    def with_isr(self, isr: Iterable[int]) -> PartitionState:
        return replace(self, isr=tuple(sorted(set(isr), key=self.replicas.index)),
                       partition_epoch=self.partition_epoch + 1)

    def with_leader(self, leader: int, isr: Iterable[int] | None = None) -> PartitionState:
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1,
                       isr=tuple(self.isr if isr is None else isr), partition_epoch=self.partition_epoch + 1)


@dataclass(frozen=True, slots=True)
class RemoteReplica:
    """What the leader knows of one follower, from its fetches."""

    replica_id: int
    log_end_offset: int = -1          # unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1   # the leader's LEO at that follower's previous fetch

    def after_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int) -> RemoteReplica:
        """Kafka's ``Replica.updateFetchStateOrThrow``: the fetch offset is the follower's LEO."""
        if fetch_offset >= leader_leo:
            caught_up = now_ms
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            caught_up = max(self.last_caught_up_ms, self.last_fetch_ms)
        else:
            caught_up = self.last_caught_up_ms
        return RemoteReplica(self.replica_id, fetch_offset, caught_up, now_ms, leader_leo)


@dataclass(frozen=True, slots=True)
class LeaderView:
    """Everything the leader decides from: its own offsets, the followers, the ISR being proposed."""

    local_id: int
    state: PartitionState
    log_end_offset: int
    high_watermark: int
    leader_epoch_start_offset: int      # first offset of the current leader epoch
    min_insync_replicas: int
    remotes: Mapping[int, RemoteReplica] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None   # proposed, not yet committed

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR plus proposed additions (never minus proposed removals)."""
        return frozenset(self.state.isr) | frozenset(self.pending_isr or ())

    def leo_of(self, replica: int) -> int:
        if replica == self.local_id:
            return self.log_end_offset
        remote = self.remotes.get(replica)
        return remote.log_end_offset if remote is not None else -1


def new_high_watermark(view: LeaderView) -> int | None:
    """The high watermark the leader may move to now, or None if it must stay where it is."""
    if len(view.state.isr) < view.min_insync_replicas:
        return None  # strict min ISR (KIP-966): nothing is committed below it
    candidate = min(view.leo_of(r) for r in view.maximal_isr | {view.local_id})
    return candidate if candidate > view.high_watermark else None


def joins_isr(view: LeaderView, replica: int) -> bool:
    """Whether ``replica``, which has just fetched, has caught up enough to join the ISR (Kafka's
    ``isFollowerInSync``). Only the replica that fetched is judged: another's LEO may be stale (it
    may be dead), and only its own fetch says it is alive."""
    if replica == view.local_id or replica in view.maximal_isr or replica not in view.state.replicas:
        return False
    leo = view.leo_of(replica)
    return leo >= view.high_watermark and leo >= view.leader_epoch_start_offset


def isr_to_drop(view: LeaderView, now_ms: int, lag_time_max_ms: int) -> frozenset[int]:
    """ISR followers that have not been caught up for ``replica.lag.time.max.ms``."""
    lagging = set()
    for replica in view.state.isr:
        if replica == view.local_id:
            continue
        remote = view.remotes.get(replica)
        caught_up = remote.last_caught_up_ms if remote is not None else 0
        if view.leo_of(replica) < view.log_end_offset and now_ms - caught_up > lag_time_max_ms:
            lagging.add(replica)
    return frozenset(lagging)


def fresh_remotes(state: PartitionState, local_id: int, now_ms: int) -> dict[int, RemoteReplica]:
    """On becoming leader: ISR members count as caught up now (they were, by the controller's
    word), the others not; every LEO is unknown until the first fetch (Kafka's ``makeLeader``)."""
    return {r: RemoteReplica(r, last_caught_up_ms=now_ms if r in state.isr else 0)
            for r in state.replicas if r != local_id}
