"""One replica of a replicated partition (Kafka's ``Partition``): leader or follower, by the controller's word.

As leader it appends producers' batches under its leader epoch, answers followers' fetches
(their fetch offset is their acknowledgement), moves the high watermark by the ISR's LEOs,
proposes ISR changes to the controller and fences requests from older epochs. As follower it
appends the leader's batches as they are, truncates where its log diverged from the leader's
(by leader epoch, KIP-101/KIP-320, never simply to its high watermark: seed 004's data-loss
scenario), and takes its high watermark and log start offset from the leader.

The decisions are ``replica_state``'s pure functions; this class holds the state, applies the
decisions to the log and talks to the controller. Transport-free: the engine's service carries
fetches between replicas, and a test can call these methods directly.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratalog.broker.controller import Controller
from stratalog.broker.replica_state import (
    LeaderView,
    PartitionState,
    RemoteReplica,
    fresh_remotes,
    isr_to_drop,
    joins_isr,
    new_high_watermark,
)
from stratalog.common.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    StratalogError,
    UnknownLeaderEpochError,
)
from stratalog.storage.isolation import FetchIsolation
from stratalog.storage.log import Log
from stratalog.storage.log_results import AppendInfo

logger = logging.getLogger(__name__)

Clock = Callable[[], int]
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def check_leader_epoch(given: int, current: int, what: str) -> None:
    """A request's view of the leader epoch against this replica's (Kafka's fencing of stale
    metadata): older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1 asks no check."""
    if given < 0:
        return  # a client that does not track epochs
    if given < current:
        raise FencedLeaderEpochError(f"{what}: leader epoch {given} is older than the current {current}")
    if given > current:
        raise UnknownLeaderEpochError(f"{what}: leader epoch {given} is newer than this replica's {current}")


def diverging_epoch(log: Log, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
    """KIP-320: whether a fetcher whose last batch came from ``last_fetched_epoch`` and who asks from
    ``fetch_offset`` holds records this log does not: (the largest epoch at or below its epoch, that
    epoch's end offset here) for it to truncate to, or None when its log agrees with this one."""
    if last_fetched_epoch < 0:
        return None
    end = log.epoch_cache.end_offset_for(last_fetched_epoch, log.log_end_offset)
    if end is None:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    epoch, end_offset = end
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


@dataclass(frozen=True, slots=True)
class ReplicaFetch:
    """A follower's fetch (Kafka's FetchRequest from a replica, with KIP-320's last fetched epoch)."""

    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int      # -1: the follower's log has no epoch yet
    current_leader_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    data: bytes                  # whole batches, as the leader wrote them
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: tuple[int, int] | None = None   # (epoch, end offset): truncate, then fetch again
    out_of_range: bool = False   # the fetch offset is outside [log start, log end]: see handle_out_of_range


@dataclass(frozen=True, slots=True)
class Truncation:
    """What a follower did with a diverging epoch: where it cut, and whether it must ask again."""

    truncated_to: int
    complete: bool


class Partition:
    def __init__(self, log: Log, local_id: int, controller: Controller, *, clock: Clock,
                 replica_lag_time_max_ms: int = 30_000, high_watermark: int | None = None,
                 may_lead: Callable[[], bool] = lambda: True) -> None:
        self.log = log
        self.local_id = local_id
        self.controller = controller
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # Whether this engine may still act as a leader: False once its liveness lease has lapsed
        # (it cannot know whether the controller has moved on). Leases alone do not fence, so a
        # leader checks this before it acknowledges anything (a paused leader that wakes up).
        self.may_lead = may_lead
        self.state: PartitionState | None = None
        self.remotes: dict[int, RemoteReplica] = {}
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset = 0
        self.isr_shrinks = 0   # committed ISR changes seen as leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec)
        self.isr_expands = 0
        self.lock = threading.RLock()
        # From here the high watermark is the ISR's business, not the log end's.
        log.hw_follows_leo = False
        log.set_high_watermark(high_watermark if high_watermark is not None else 0)

    # -- state from the controller ----------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.state is not None and self.state.leader == self.local_id

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def apply_state(self, state: PartitionState) -> None:
        """Take the controller's state: become leader, follower, or just learn a new ISR."""
        with self.lock:
            current = self.state
            if current is not None and (state.leader_epoch < current.leader_epoch or
                                        (state.leader_epoch == current.leader_epoch
                                         and state.partition_epoch < current.partition_epoch)):
                return  # older than what we know: a late message, ignored as Kafka does
            new_leadership = current is None or state.leader_epoch != current.leader_epoch
            self.state = state
            if state.leader == self.local_id and new_leadership:
                self._become_leader(state)
            elif state.leader != self.local_id:
                self.remotes = {}
                self.pending_isr = None
                self.log.leader_epoch = state.leader_epoch
            else:
                if self.pending_isr is not None and set(state.isr) == set(self.pending_isr):
                    self.pending_isr = None
                if current is not None and set(state.isr) != set(current.isr):
                    self.isr_shrinks += bool(set(current.isr) - set(state.isr))
                    self.isr_expands += bool(set(state.isr) - set(current.isr))
                self._maybe_advance_high_watermark()

    def resign(self) -> None:
        """No longer a replica of this partition: neither leader nor follower from now on."""
        with self.lock:
            self.state = None
            self.remotes = {}
            self.pending_isr = None

    def _become_leader(self, state: PartitionState) -> None:
        # Kafka's makeLeader: the new epoch starts at our log end; every follower's LEO is unknown.
        log = self.log
        log.leader_epoch = state.leader_epoch
        log.epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        self.leader_epoch_start_offset = log.log_end_offset
        self.remotes = fresh_remotes(state, self.local_id, self.clock())
        self.pending_isr = None
        self._maybe_advance_high_watermark()

    def _view(self) -> LeaderView:
        assert self.state is not None
        return LeaderView(self.local_id, self.state, self.log.log_end_offset, self.log.high_watermark,
                          self.leader_epoch_start_offset, self.min_insync_replicas, self.remotes, self.pending_isr)

    def _require_leader(self, what: str) -> PartitionState:
        state = self.state
        if state is None or state.leader != self.local_id:
            leader = "none" if state is None or state.leader < 0 else f"replica {state.leader}"
            raise NotLeaderOrFollowerError(
                f"{what} {self.log.topic_partition}: replica {self.local_id} is not its leader (leader: {leader})")
        self._require_lease(what)
        return state

    def _require_lease(self, what: str) -> None:
        if not self.may_lead():
            raise NotLeaderOrFollowerError(
                f"{what} {self.log.topic_partition}: replica {self.local_id}'s lease has lapsed; it acknowledges "
                "nothing until the controller has said who leads")

    def _check_epoch(self, epoch: int, what: str) -> None:
        assert self.state is not None
        check_leader_epoch(epoch, self.state.leader_epoch, f"{what} {self.log.topic_partition}")

    # -- leader: produce --------------------------------------------------------------------
    def append_as_leader(self, batches: Sequence[bytes | bytearray], *, required_acks: int = 1,
                         leader_epoch: int = -1) -> list[AppendInfo]:
        """Append producers' batches; ``acks=all`` is refused up front when the ISR is too small."""
        with self.lock:
            self._check_may_append(required_acks, leader_epoch)
            infos = self.log.append_batches(batches)
            self._maybe_advance_high_watermark()
            return infos

    def try_append_as_leader(self, batches: Sequence[bytes | bytearray], *, required_acks: int = 1,
                             leader_epoch: int = -1) -> tuple[list[AppendInfo], int] | None:
        """``append_as_leader`` for a caller that must not block (an event loop), with the leader
        epoch it appended under; None and nothing appended when the partition is locked or the log
        would block (``Log.try_append``): the caller then appends on a thread. Refusals
        are raised as ``append_as_leader`` raises them."""
        if not self.log.may_append_inline(batches) or not self.lock.acquire(blocking=False):
            return None
        try:
            # The log's lock too, for the whole call: the high watermark's move after the append
            # must not wait for it (a flush may hold it through an fsync).
            if not self.log.lock.acquire(blocking=False):
                return None
            try:
                state = self._check_may_append(required_acks, leader_epoch)
                infos = self.log.try_append(batches)
                if infos is None:
                    return None
                self._maybe_advance_high_watermark()
                return infos, state.leader_epoch
            finally:
                self.log.lock.release()
        finally:
            self.lock.release()

    def _check_may_append(self, required_acks: int, leader_epoch: int) -> PartitionState:
        state = self._require_leader("produce to")
        self._check_epoch(leader_epoch, "produce to")
        if required_acks == -1 and len(state.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"produce to {self.log.topic_partition}: the ISR {list(state.isr)} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}")
        return state

    def acks_all_complete(self, last_offset: int, leader_epoch: int) -> bool:
        """Whether an acks=all append ending at ``last_offset`` under ``leader_epoch`` is committed now.

        A leader that has been replaced can never acknowledge it; one whose ISR fell below
        min.insync.replicas refuses it (Kafka's DelayedProduce).
        """
        with self.lock:
            state = self.state
            if state is None or state.leader != self.local_id or state.leader_epoch != leader_epoch:
                raise NotLeaderOrFollowerError(
                    f"produce to {self.log.topic_partition}: leadership moved (epoch {leader_epoch} is over) before "
                    "the in-sync replicas had the batch; it may or may not survive")
            self._require_lease("produce to")
            if self.log.high_watermark <= last_offset:
                return False
            if len(state.isr) < self.min_insync_replicas:
                raise NotEnoughReplicasAfterAppendError(
                    f"produce to {self.log.topic_partition}: appended, but the ISR {list(state.isr)} fell below "
                    f"min.insync.replicas={self.min_insync_replicas}")
            return True

    # -- leader: followers' fetches ---------------------------------------------------------
    def fetch_for_follower(self, fetch: ReplicaFetch, *, acknowledge: bool = True) -> ReplicaFetchResult:
        """A follower's fetch: its offset acknowledges what it has (the remote LEO, the ISR, the high
        watermark), then the log is read from there. ``acknowledge=False``: the read only, for a
        fetch that waited after its acknowledgement was taken (Kafka's DelayedFetch reads again on
        completion; the follower's state was updated once, when the fetch arrived)."""
        proposal: tuple[PartitionState, tuple[int, ...]] | None = None
        try:
            with self.lock:
                result, proposal = self._fetch_for_follower(fetch, acknowledge)
            return result
        finally:
            if proposal is not None:  # to the controller outside the lock: it may be slow or away
                self._send_proposal(*proposal)

    def try_fetch_for_follower(self, fetch: ReplicaFetch, *, acknowledge: bool = True
                               ) -> tuple[ReplicaFetchResult, Callable[[], None] | None] | None:
        """``fetch_for_follower`` for a caller that must not block (an event loop): None when the
        partition or its log is locked, or when the read would start before the active segment
        (older data may have left the page cache); the caller then asks ``fetch_for_follower`` on a
        thread. The ISR proposal, if any, is handed back to be sent elsewhere: it waits for the
        controller."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if not self.log.lock.acquire(blocking=False):
                return None
            try:
                if fetch.fetch_offset < self.log.active_segment.base_offset:
                    return None
                result, proposal = self._fetch_for_follower(fetch, acknowledge)
            finally:
                self.log.lock.release()
        finally:
            self.lock.release()
        return result, (functools.partial(self._send_proposal, *proposal) if proposal is not None else None)

    def _fetch_for_follower(self, fetch: ReplicaFetch, acknowledge: bool = True
                            ) -> tuple[ReplicaFetchResult, tuple[PartitionState, tuple[int, ...]] | None]:
        state = self._require_leader("replica fetch from")
        self._check_epoch(fetch.current_leader_epoch, "replica fetch from")
        if fetch.replica_id not in state.replicas or fetch.replica_id == self.local_id:
            raise NotLeaderOrFollowerError(
                f"replica fetch from {self.log.topic_partition}: {fetch.replica_id} is not a follower of it")
        log = self.log
        diverging = self._diverging_epoch(fetch)
        if diverging is not None:  # KIP-320: no data, no acknowledgement, until it truncates
            return ReplicaFetchResult(b"", log.high_watermark, log.log_start_offset, log.log_end_offset,
                                      diverging), None
        if not log.log_start_offset <= fetch.fetch_offset <= log.log_end_offset:
            # Not an error for a follower: after an unclean election it truncates by these offsets.
            return ReplicaFetchResult(b"", log.high_watermark, log.log_start_offset, log.log_end_offset,
                                      out_of_range=True), None
        proposal = self._acknowledge(state, fetch) if acknowledge else None
        # No budget left in a many-partition fetch: marks only (the fetch still counts as the follower's ack).
        read = log.read(fetch.fetch_offset, fetch.max_bytes, isolation=FetchIsolation.LOG_END,
                        min_one_message=fetch.max_bytes > 0)
        return ReplicaFetchResult(read.data, log.high_watermark, log.log_start_offset,
                                  log.log_end_offset), proposal

    def _acknowledge(self, state: PartitionState, fetch: ReplicaFetch
                     ) -> tuple[PartitionState, tuple[int, ...]] | None:
        """The follower has everything below its fetch offset: its remote LEO, perhaps its join of the
        ISR (the proposal to send), and the high watermark follow."""
        now = self.clock()
        previous = self.remotes.get(fetch.replica_id) or RemoteReplica(fetch.replica_id)
        self.remotes[fetch.replica_id] = previous.after_fetch(fetch.fetch_offset, self.log.log_end_offset, now)
        proposal = None
        # One view for both questions (every follower's round asks them); made again only after a join.
        view = self._view()
        if self.pending_isr is None and joins_isr(view, fetch.replica_id):
            proposal = (state, tuple(state.isr) + (fetch.replica_id,))
            self.pending_isr = proposal[1]   # counts for the HW at once; committed or not, cleared after
            view = self._view()
        self._maybe_advance_high_watermark(view)
        return proposal

    def _diverging_epoch(self, fetch: ReplicaFetch) -> tuple[int, int] | None:
        return diverging_epoch(self.log, fetch.fetch_offset, fetch.last_fetched_epoch)

    def _maybe_advance_high_watermark(self, view: LeaderView | None = None) -> None:
        """``view``: the current one, when the caller has just made it."""
        if self.state is None or self.state.leader != self.local_id:
            return
        target = new_high_watermark(self._view() if view is None else view)
        if target is not None:
            self.log.set_high_watermark(target)

    def maybe_shrink_isr(self) -> frozenset[int]:
        """Drop followers that fell behind for ``replica.lag.time.max.ms`` (once the controller commits)."""
        with self.lock:
            if not self.is_leader or self.pending_isr is not None or self.state is None:
                return frozenset()
            state = self.state
            lagging = isr_to_drop(self._view(), self.clock(), self.replica_lag_time_max_ms)
            if not lagging:
                return lagging
            # A removal counts only once committed, so it is not pending for the HW's sake; marking
            # it keeps a second proposal from racing this one.
            self.pending_isr = state.isr
        self._send_proposal(state, tuple(r for r in state.isr if r not in lagging))
        return lagging

    def _send_proposal(self, state: PartitionState, isr: tuple[int, ...]) -> None:
        """AlterPartition against ``state``'s epochs, outside the partition's lock. Whatever the
        answer (committed, stale, or the controller unreachable), nothing stays pending: the next
        fetch or expiry round proposes again if the change is still due."""
        committed: PartitionState | None = None
        try:
            committed = self.controller.alter_partition(self.log.topic_partition, self.local_id,
                                                        state.leader_epoch, isr, state.partition_epoch)
        except (StratalogError, OSError) as error:
            logger.info("%s: ISR change to %s not committed: %s", self.log.topic_partition, list(isr), error)
        finally:
            with self.lock:
                self.pending_isr = None
                if committed is not None:
                    self.apply_state(committed)
                else:
                    self._maybe_advance_high_watermark()

    # -- follower ----------------------------------------------------------------------------
    def next_fetch(self, max_bytes: int) -> ReplicaFetch:
        with self.lock:
            if self.state is None:   # resigned meanwhile (no longer a replica here)
                raise NotLeaderOrFollowerError(f"{self.log.topic_partition}: no longer a replica here")
            latest = self.log.epoch_cache.latest_epoch()
            return ReplicaFetch(self.local_id, self.log.log_end_offset, -1 if latest is None else latest,
                                self.state.leader_epoch, max_bytes)

    def apply_fetch(self, fetch: ReplicaFetch, result: ReplicaFetchResult) -> Truncation | None:
        """A follower takes the leader's answer to ``fetch``: truncate on divergence, or append and follow
        its marks. An answer to a fetch that no longer matches this replica (its log end moved, or a
        newer leader epoch arrived meanwhile) is dropped, as Kafka's fetcher drops it."""
        with self.lock:
            if self.is_leader:
                raise NotLeaderOrFollowerError(f"{self.log.topic_partition}: a leader does not apply replica fetches")
            state = self.state
            if (state is None or fetch.current_leader_epoch != state.leader_epoch
                    or fetch.fetch_offset != self.log.log_end_offset):
                return None
            if result.diverging_epoch is not None:
                return self._truncate_on_divergence(*result.diverging_epoch)
            if result.out_of_range:
                end = self.handle_out_of_range(result.log_start_offset, result.log_end_offset)
                return Truncation(end, True)
            log = self.log
            if result.data:
                log.append_as_follower(result.data)
            log.set_high_watermark(min(result.high_watermark, log.log_end_offset))
            if result.log_start_offset > log.log_start_offset:
                log.advance_log_start_offset(result.log_start_offset)
            return None

    def _truncate_on_divergence(self, leader_epoch: int, leader_end_offset: int) -> Truncation:
        """§5 of the storage reference, as Kafka's ``getOffsetTruncationState``."""
        log = self.log
        leo = log.log_end_offset
        if leader_end_offset == UNDEFINED_OFFSET:  # the leader knows no such epoch: the HW is all we trust
            target, complete = log.high_watermark, True
        else:
            mine = log.epoch_cache.end_offset_for(leader_epoch, leo)
            if mine is None:
                target, complete = min(leader_end_offset, leo), True
            elif mine[0] != leader_epoch:
                # We never saw the leader's epoch: cut to the end of our last epoch below it, ask again.
                target, complete = min(mine[1], leo), False
            else:
                target, complete = min(mine[1], leader_end_offset, leo), True
        log.truncate_to(target)
        return Truncation(target, complete)

    def handle_out_of_range(self, leader_log_start: int, leader_log_end: int) -> int:
        """After an unclean election: our log runs past the leader's, or ends before its start."""
        with self.lock:
            log = self.log
            if log.log_end_offset > leader_log_end:
                log.truncate_to(leader_log_end)
            elif log.log_end_offset < leader_log_start:
                log.truncate_fully_and_start_at(leader_log_start)
            return log.log_end_offset
