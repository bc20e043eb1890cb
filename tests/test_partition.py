"""The replicated partition as Kafka's PartitionTest checks it: real logs, a fake clock, the
in-process controller, and fetches carried by direct calls (the transport is not the subject).

Seed 004's worked example and its data-loss scenario come first, then the rules one by one:
the high watermark, ISR expansion and shrinking in time, the strict min ISR, fencing by epoch,
and each truncation case of the storage reference's §5.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from conftest import held_elsewhere
from partition_cluster import LAG_MS, TP, Cluster, offsets
from stratalog.broker.partition import Partition, ReplicaFetch, Truncation
from stratalog.broker.replica_state import LeaderView, PartitionState, RemoteReplica, joins_isr
from stratalog.common.errors import (
    FencedLeaderEpochError,
    InvalidUpdateVersionError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from stratalog.records import Record, build_batch, decode_records, iter_batch_infos
from stratalog.server.replication import ControllerClient
from stratalog.storage.isolation import FetchIsolation
from stratalog.storage.log import Log

# -- seed 004 ------------------------------------------------------------------------------------
def test_seed_004_the_high_watermark_reaches_1_only_on_the_second_fetch(tmp_path, clock):
    c = Cluster(tmp_path, clock)
    leader, follower = c.partitions[0], c.partitions[1]
    # Initially: every LEO and HW 0; the leader does not know the follower's LEO until it fetches
    # (Kafka's UnknownOffset, -1; the seed simplifies it to 0).
    assert offsets(leader.log) == (0, 0) and offsets(follower.log) == (0, 0)
    assert leader.remotes[1].log_end_offset == -1
    # The producer sends one message: leader LEO 1; HW stays 0 (the remote LEO is not 1).
    c.produce(0, b"m0", acks=1)
    assert offsets(leader.log) == (1, 0)
    # First fetch (offset 0): remote LEO 0, HW 0; the follower writes (LEO 1), HW min(1, 0) = 0.
    c.fetch(1, 0)
    assert leader.remotes[1].log_end_offset == 0
    assert offsets(leader.log) == (1, 0) and offsets(follower.log) == (1, 0)
    # Second fetch (offset 1): remote LEO 1, leader HW 1; no data; the follower's HW becomes 1.
    c.fetch(1, 0)
    assert leader.remotes[1].log_end_offset == 1
    assert offsets(leader.log) == (1, 1) and offsets(follower.log) == (1, 1)


def old_rule_restart(log: Log) -> None:
    """The pre-0.11 rule: a restarting follower truncates its log to its high watermark."""
    log.truncate_to(log.high_watermark)


def log_values(log: Log) -> list[bytes | None]:
    """Every record in the log, committed or not (up to the log end)."""
    data = log.read(log.log_start_offset, 1 << 30, isolation=FetchIsolation.LOG_END).data
    return [r.value for _, batch in _batches(data) for r in decode_records(batch)]


def _batches(data: bytes):
    for info in iter_batch_infos(data):
        yield info, data[info.position : info.position + info.size]


def test_seed_004_a_leader_change_with_a_lagging_follower_hw_loses_nothing_by_epoch_truncation(tmp_path, clock):
    # min.insync.replicas=1; A (0) leads, B (1) follows. B's fetch that tells A it has m1 moves
    # A's HW to 2, but B dies before it reads the answer: its HW stays 1. B restarts, A dies,
    # B is elected, A comes back as B's follower.
    outcomes = {}
    for rule in ("old", "epoch"):
        c = Cluster(tmp_path / rule, clock, min_insync_replicas=1)
        c.produce(0, b"m0", acks=1)
        c.fetch(1, 0)
        c.fetch(1, 0)
        c.produce(0, b"m1", acks=1)     # acknowledged: min.insync.replicas=1
        c.fetch(1, 0)
        c.partitions[0].fetch_for_follower(c.partitions[1].next_fetch(1 << 20))   # B dies before the answer
        assert offsets(c.log(0)) == (2, 2) and offsets(c.log(1)) == (2, 1)
        b = c.restart(1)
        if rule == "old":
            old_rule_restart(b.log)     # the model of Kafka before 0.11
        c.controller.fence(TP, 0)      # A dies; B, the next ISR member, leads epoch 1
        assert b.is_leader
        a = c.restart(0)               # A comes back as B's follower
        for _ in range(3):
            c.fetch(0, 1)
        outcomes[rule] = (log_values(b.log), log_values(a.log))
    assert outcomes["old"] == ([b"m0"], [b"m0"]), "the model of the old rule loses the acknowledged m1"
    assert outcomes["epoch"] == ([b"m0", b"m1"], [b"m0", b"m1"])


# -- the high watermark ----------------------------------------------------------------------------
def test_the_high_watermark_is_the_smallest_isr_leo_and_never_moves_back(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    c.produce(0, b"a", b"b", b"c", acks=1)
    c.fetch(1, 0)
    c.fetch(2, 0)
    c.fetch(1, 0)              # 1 has 3, 2 has 3 but the leader only knows 2's LEO as 0
    assert c.log(0).high_watermark == 0
    c.fetch(2, 0)
    assert c.log(0).high_watermark == 3
    c.log(2).truncate_to(1)    # a follower that loses data does not pull the HW back
    c.fetch(2, 0)
    assert c.log(0).high_watermark == 3


def test_under_min_isr_the_high_watermark_stands_still_and_acks_all_is_refused(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3, min_insync_replicas=2)
    c.controller.alter_partition(TP, 0, 0, (0,), 0)    # the followers are out
    with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=2"):
        c.produce(0, b"x", acks=-1)
    c.produce(0, b"y", acks=1)                          # acks=1 is still taken
    assert c.log(0).high_watermark == 0                 # but nothing is committed below min ISR
    c.fetch(1, 0)                                       # 1 catches up and rejoins
    assert set(c.controller.state(TP).isr) == {0, 1}
    c.fetch(1, 0)
    assert c.log(0).high_watermark == 1


# -- the ISR in time -----------------------------------------------------------------------------------
def test_a_follower_joins_the_isr_once_it_reaches_the_hw_and_the_start_of_the_leader_epoch(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    c.controller.alter_partition(TP, 0, 0, (0, 1), 0)   # 2 is out
    c.produce(0, b"a", b"b", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)
    assert c.log(0).high_watermark == 2
    c.controller.elect(TP, 1)                           # epoch 1 starts at 2 on replica 1
    c.produce(1, b"c", acks=1)
    c.fetch(2, 1)                                       # its fetch offset 0 is below the HW 2
    assert 2 not in c.controller.state(TP).isr
    c.fetch(2, 1)                                       # offset 3: at the HW and past the epoch start
    assert 2 in c.controller.state(TP).isr


def test_joining_needs_both_the_high_watermark_and_the_start_of_the_current_leader_epoch():
    state = PartitionState((0, 1, 2), 0, 1, (0, 1), 5)
    def view(follower_leo: int) -> LeaderView:
        return LeaderView(0, state, log_end_offset=4, high_watermark=1, leader_epoch_start_offset=2,
                          min_insync_replicas=1, remotes={2: RemoteReplica(2, follower_leo)})
    assert not joins_isr(view(0), 2)        # below the HW
    assert not joins_isr(view(1), 2)        # at the HW, but before this leader's first offset
    assert joins_isr(view(2), 2)
    assert not joins_isr(view(2), 1)        # already in the ISR
    assert not joins_isr(view(2), 0)        # the leader itself


def test_a_follower_that_keeps_fetching_but_falls_further_behind_leaves_the_isr(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=2)
    leader, follower = c.partitions[0], c.partitions[1]
    c.produce(0, b"a", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)
    dropped = []
    for _ in range(4):  # three batches a round, the follower takes one (max_bytes 1: one batch)
        clock.now += 10_000
        c.produce(0, b"x", b"y", b"z", acks=1)
        fetch = follower.next_fetch(1)
        follower.apply_fetch(fetch, leader.fetch_for_follower(fetch))
        dropped.append(leader.maybe_shrink_isr())
    assert dropped == [frozenset(), frozenset(), frozenset(), frozenset({1})]


def test_a_follower_that_does_not_catch_up_for_the_lag_time_leaves_the_isr_and_one_that_keeps_pace_stays(
        tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    leader = c.partitions[0]
    c.produce(0, b"a", acks=1)
    c.fetch(1, 0)
    c.fetch(2, 0)
    dropped = []
    for _ in range(4):   # a steady stream: 1 fetches after every append (always a bit behind), 2 never
        clock.now += 10_000
        c.produce(0, b"more", acks=1)
        c.fetch(1, 0)
        dropped.append(leader.maybe_shrink_isr())
    # 2 was last caught up at t=0: out once more than 30 s have passed (the fourth round, 40 s).
    assert dropped == [frozenset(), frozenset(), frozenset(), frozenset({2})]
    assert c.controller.state(TP).isr == (0, 1)


def test_the_lag_clock_starts_at_the_last_catch_up(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=2)
    leader = c.partitions[0]
    c.produce(0, b"a", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)                       # caught up at t0
    c.produce(0, b"b", acks=1)
    clock.now += LAG_MS
    assert leader.maybe_shrink_isr() == frozenset()      # exactly the lag time: still in
    clock.now += 1
    assert leader.maybe_shrink_isr() == frozenset({1})   # one ms more: out
    assert c.controller.state(TP).isr == (0,)


# -- answering on an event loop -----------------------------------------------------------------------
def test_a_fetch_answered_without_blocking_gives_the_same_answer_and_hands_back_the_isr_proposal(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    c.controller.alter_partition(TP, 0, 0, (0, 1), 0)   # 2 is out
    c.produce(0, b"a", acks=1)
    leader, follower = c.partitions[0], c.partitions[2]
    c.fetch(1, 0)
    c.fetch(1, 0)
    assert leader.log.high_watermark == 1
    fetch = follower.next_fetch(1 << 20)                # offset 0: below the HW, no proposal
    answer = leader.try_fetch_for_follower(fetch)
    assert answer is not None
    result, proposal = answer
    assert proposal is None
    assert result.data == leader.fetch_for_follower(fetch).data and result.log_end_offset == 1
    follower.apply_fetch(fetch, result)
    fetch = follower.next_fetch(1 << 20)
    answer = leader.try_fetch_for_follower(fetch)       # 2 reaches the HW: it may join
    assert answer is not None
    _, proposal = answer
    assert proposal is not None and 2 not in c.controller.state(TP).isr   # not sent by the fetch itself
    proposal()
    assert 2 in c.controller.state(TP).isr


def test_a_fetch_that_would_block_is_left_to_a_thread(tmp_path, clock):
    c = Cluster(tmp_path, clock, segment_bytes=200)
    for value in (b"a", b"b", b"c", b"d"):
        c.produce(0, value * 60, acks=1)
    leader = c.partitions[0]
    assert len(leader.log.segments) > 1
    from_start = c.partitions[1].next_fetch(1 << 20)    # offset 0: off the tail, maybe off the page cache
    assert leader.try_fetch_for_follower(from_start) is None
    at_tail = ReplicaFetch(1, leader.log.log_end_offset, 0, 0, 1 << 20)
    for lock in (leader.lock, leader.log.lock):         # an append (or a log task) in progress
        with held_elsewhere(lock):
            assert leader.try_fetch_for_follower(at_tail) is None
    assert leader.try_fetch_for_follower(at_tail) is not None
    assert leader.remotes[1].log_end_offset == leader.log.log_end_offset   # only the answered fetch counted


def test_a_produce_that_need_not_block_is_appended_at_once_and_refused_as_any_other(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=2)
    leader = c.partitions[0]
    c.produce(0, b"first", acks=1)                      # epoch 0's first append writes its checkpoint
    c.fetch(1, 0)
    c.fetch(1, 0)
    batch = build_batch([Record(0, clock.now, b"k", b"inline")])
    answer = leader.try_append_as_leader([batch], required_acks=-1)
    assert answer is not None
    infos, epoch = answer
    assert (infos[0].first_offset, epoch) == (1, 0) and leader.log.log_end_offset == 2
    c.fetch(1, 0)
    c.fetch(1, 0)
    assert leader.log.high_watermark == 2               # the HW moves with the followers as after any append
    with pytest.raises(UnknownLeaderEpochError):
        leader.try_append_as_leader([batch], leader_epoch=1)
    with pytest.raises(NotLeaderOrFollowerError):
        c.partitions[1].try_append_as_leader([batch])
    for lock in (leader.lock, leader.log.lock):         # an append (or a fetch, a flush) in progress on a thread
        with held_elsewhere(lock):
            assert leader.try_append_as_leader([batch]) is None
    assert leader.log.log_end_offset == 2
    solo = Cluster(tmp_path / "solo", clock, replicas=1)   # an ISR of the leader alone: its HW is its LEO
    solo.produce(0, b"first", acks=1)
    assert solo.partitions[0].try_append_as_leader([batch]) is not None
    assert offsets(solo.log(0)) == (2, 2)


def test_a_fetch_read_again_after_its_wait_acknowledges_nothing_more(tmp_path, clock):
    """A follower's fetch is its acknowledgement once, when it arrives (Kafka's DelayedFetch reads
    again on completion without updating the follower's state): the read after its wait returns the
    new data and leaves what the leader knows of the follower as the arrival left it."""
    c = Cluster(tmp_path, clock)
    leader = c.partitions[0]
    c.produce(0, b"a", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)                                       # the follower has offset 0; the HW is 1
    waiting = c.partitions[1].next_fetch(1 << 20)       # offset 1: nothing to read yet, it waits
    assert leader.fetch_for_follower(waiting).data == b""
    arrived = leader.remotes[1]
    clock.now += 1000
    c.produce(0, b"b", acks=1)                          # the append that ends its wait
    again = leader.fetch_for_follower(waiting, acknowledge=False)
    assert [r.value for r in decode_records(again.data)] == [b"b"]
    assert leader.remotes[1] == arrived
    answer = leader.try_fetch_for_follower(waiting, acknowledge=False)
    assert answer is not None and answer[0].data == again.data and answer[1] is None
    assert leader.remotes[1] == arrived


def test_a_fetch_read_again_after_its_wait_is_still_fenced_by_the_leader_epoch(tmp_path, clock):
    c = Cluster(tmp_path, clock)
    c.produce(0, b"a", acks=1)
    waiting = c.partitions[1].next_fetch(1 << 20)
    c.controller.elect(TP, 1)
    c.controller.elect(TP, 0)           # epoch 2 while the fetch of epoch 0 waited
    with pytest.raises(FencedLeaderEpochError):
        c.partitions[0].fetch_for_follower(waiting, acknowledge=False)


# -- fencing ------------------------------------------------------------------------------------------
def test_requests_with_another_leader_epoch_are_fenced(tmp_path, clock):
    c = Cluster(tmp_path, clock)
    c.controller.elect(TP, 1)
    c.controller.elect(TP, 0)           # epoch 2, replica 0 again
    leader = c.partitions[0]
    batch = build_batch([Record(0, clock.now, b"k", b"v")])
    with pytest.raises(FencedLeaderEpochError):
        leader.append_as_leader([batch], leader_epoch=1)
    with pytest.raises(UnknownLeaderEpochError):
        leader.append_as_leader([batch], leader_epoch=3)
    with pytest.raises(FencedLeaderEpochError):
        leader.fetch_for_follower(ReplicaFetch(1, 0, -1, 1, 1 << 20))
    with pytest.raises(NotLeaderOrFollowerError):
        c.partitions[1].append_as_leader([batch])


def test_a_replaced_leader_can_never_acknowledge_acks_all(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=2)
    last = c.produce(0, b"pending", acks=-1)
    assert not c.partitions[0].acks_all_complete(last, 0)
    c.controller.elect(TP, 1)           # replaced before the follower fetched it
    with pytest.raises(NotLeaderOrFollowerError, match="leadership moved"):
        c.partitions[0].acks_all_complete(last, 0)


def test_a_leader_moved_off_its_partition_resigns_and_its_waiting_acks_all_produce_is_refused(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=2)
    last = c.produce(0, b"pending", acks=-1)
    c.partitions[0].resign()            # reassigned away: StopReplica
    assert not c.partitions[0].is_leader
    with pytest.raises(NotLeaderOrFollowerError, match="leadership moved"):
        c.partitions[0].acks_all_complete(last, 0)
    with pytest.raises(NotLeaderOrFollowerError):
        c.partitions[0].fetch_for_follower(ReplicaFetch(1, 0, -1, 0, 1 << 20))


def test_acks_all_completes_once_the_hw_passes_and_fails_if_the_isr_fell_below_min(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3, min_insync_replicas=2)
    last = c.produce(0, b"x", acks=-1)
    c.fetch(1, 0)
    c.fetch(2, 0)
    c.fetch(1, 0)
    c.fetch(2, 0)
    assert c.partitions[0].acks_all_complete(last, 0)
    last = c.produce(0, b"y", acks=-1)
    c.fetch(1, 0)
    c.fetch(2, 0)
    c.fetch(1, 0)
    c.fetch(2, 0)
    c.controller.alter_partition(TP, 0, 0, (0,), c.controller.state(TP).partition_epoch)
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        c.partitions[0].acks_all_complete(last, 0)


def test_an_isr_change_against_an_old_partition_epoch_is_refused(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    c.controller.alter_partition(TP, 0, 0, (0, 1), 0)
    with pytest.raises(InvalidUpdateVersionError, match="partition epoch 0"):
        c.controller.alter_partition(TP, 0, 0, (0,), 0)
    with pytest.raises(FencedLeaderEpochError):
        c.controller.alter_partition(TP, 1, 0, (0, 1), 1)


# -- truncation (§5) --------------------------------------------------------------------------------------
def test_a_follower_truncates_to_the_leaders_end_of_the_epoch_where_they_diverged(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", b"b", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)
    c.produce(0, b"only on 0", acks=1)            # epoch 0 ends at 3 on replica 0 only
    c.controller.elect(TP, 1)                     # unreplicated m2 is not acknowledged
    c.produce(1, b"c", b"d", acks=1)              # epoch 1 starts at 2 on replica 1
    a = c.partitions[0]
    fetch = a.next_fetch(1 << 20)
    result = c.partitions[1].fetch_for_follower(fetch)
    assert result.diverging_epoch == (0, 2)       # epoch 0 ends at 2 on the leader
    truncation = a.apply_fetch(fetch, result)
    assert truncation is not None and truncation.truncated_to == 2 and truncation.complete
    c.fetch(0, 1)
    c.fetch(0, 1)
    assert [r.value for r in a.log.read_records(0)] == [b"a", b"b", b"c", b"d"]
    assert a.log.epoch_cache.entries == c.log(1).epoch_cache.entries == [(0, 0), (1, 2)]


def test_a_follower_that_never_saw_the_leaders_epoch_cuts_to_its_own_last_epoch_below_it_and_asks_again(
        tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    follower = c.partitions[1]
    log = follower.log
    for epoch, values in ((0, [b"a", b"b"]), (2, [b"c", b"d", b"e"])):   # epochs 0 and 2, never 1
        log.leader_epoch = epoch
        log.append_batches([build_batch([Record(0, clock.now, b"k", v)]) for v in values])
    assert log.epoch_cache.entries == [(0, 0), (2, 2)]
    # The leader says: your last epoch diverges; my epoch 1 ends at 4. 1 is unknown here: cut to
    # the end of epoch 0 (the largest below 1), 2, and ask again with epoch 0.
    truncation = follower._truncate_on_divergence(1, 4)
    assert truncation.truncated_to == 2 and truncation.complete is False
    assert log.log_end_offset == 2 and log.epoch_cache.entries == [(0, 0)]
    assert follower.next_fetch(1 << 20).last_fetched_epoch == 0


def test_a_follower_holding_an_epoch_the_leader_never_had_truncates_to_its_high_watermark(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", b"b", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)
    follower = c.partitions[1]
    follower.log.leader_epoch = 5            # it once led an epoch 5 the current leader never saw
    follower.log.append_batches([build_batch([Record(0, clock.now, b"k", b"from epoch 5")])])
    assert follower.log.epoch_cache.entries == [(0, 0), (5, 2)] and follower.log.high_watermark == 2
    fetch = follower.next_fetch(1 << 20)
    result = c.partitions[0].fetch_for_follower(fetch)
    assert result.diverging_epoch == (-1, -1)   # the leader knows no such epoch (Kafka's UNDEFINED)
    assert follower.apply_fetch(fetch, result) == Truncation(2, True)
    assert follower.log.log_end_offset == 2


def test_after_an_unclean_election_a_follower_past_the_leaders_end_truncates_to_it(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", b"b", b"c", acks=1)
    c.fetch(1, 0)
    c.log(1).truncate_to(1)                        # 1 lost its tail (a disk replaced)
    c.controller.alter_partition(TP, 0, 0, (0,), c.controller.state(TP).partition_epoch)
    c.controller.fence(TP, 0)                      # no clean choice: leaderless
    c.controller.elect(TP, 1, unclean=True)        # unclean: 1 leads with only [0, 1)
    a = c.partitions[0]
    fetch = a.next_fetch(1 << 20)
    result = c.partitions[1].fetch_for_follower(fetch)
    assert result.diverging_epoch == (0, 1)       # the new leader's epoch 0 ends where its log does
    assert a.apply_fetch(fetch, result) == Truncation(1, True)
    assert a.log.log_end_offset == 1


def test_a_follower_whose_log_ends_before_the_leaders_start_starts_afresh_there(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", b"b", b"c", b"d", acks=1)
    c.log(0).set_high_watermark(4)
    c.log(0).maybe_increment_log_start_offset(3)   # DeleteRecords on the leader before 1 fetched anything
    b = c.partitions[1]
    fetch = b.next_fetch(1 << 20)
    assert fetch.fetch_offset == 0 and fetch.last_fetched_epoch == -1
    result = c.partitions[0].fetch_for_follower(fetch)
    assert result.out_of_range and (result.log_start_offset, result.log_end_offset) == (3, 4)
    assert b.apply_fetch(fetch, result) == Truncation(3, True)
    assert b.log.log_start_offset == b.log.log_end_offset == 3


def test_a_log_start_inside_a_batch_does_not_stop_a_follower_from_catching_up(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.partitions[0].append_as_leader([build_batch([Record(i, clock.now, b"k", b"v%d" % i) for i in range(3)])])
    c.log(0).set_high_watermark(3)
    c.log(0).maybe_increment_log_start_offset(1)   # DeleteRecords inside the batch [0, 2]
    for _ in range(3):
        c.fetch(1, 0)
    assert c.log(1).log_end_offset == 3 and c.log(1).log_start_offset == 1
    assert [r.value for r in c.log(1).read_records(1)] == [b"v1", b"v2"]


def test_an_answer_to_a_fetch_that_no_longer_matches_the_follower_is_dropped(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", acks=1)
    follower = c.partitions[1]
    stale_fetch = follower.next_fetch(1 << 20)
    stale = c.partitions[0].fetch_for_follower(stale_fetch)   # answered, then delayed
    c.fetch(1, 0)                                              # a newer fetch got there first
    assert follower.log.log_end_offset == 1
    assert follower.apply_fetch(stale_fetch, stale) is None
    assert follower.log.log_end_offset == 1                    # not appended twice, no hole
    c.controller.elect(TP, 1)
    c.controller.elect(TP, 0)                                  # a new leader epoch meanwhile
    old_epoch = c.partitions[1].next_fetch(1 << 20)
    old_epoch = ReplicaFetch(old_epoch.replica_id, old_epoch.fetch_offset, old_epoch.last_fetched_epoch, 0,
                             old_epoch.max_bytes)
    assert follower.apply_fetch(old_epoch, stale) is None


def test_a_follower_takes_the_leaders_log_start_offset_and_high_watermark(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"a", b"b", b"c", acks=1)
    c.fetch(1, 0)
    c.fetch(1, 0)
    c.log(0).maybe_increment_log_start_offset(2)
    c.fetch(1, 0)
    assert c.log(1).log_start_offset == 2 and c.log(1).high_watermark == 3


def test_a_leader_whose_lease_lapsed_acknowledges_nothing_even_before_it_hears_of_its_replacement(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    leader = c.partitions[0]
    last = c.produce(0, b"before the pause", acks=-1)
    lease = {"valid": True}
    leader.may_lead = lambda: lease["valid"]
    lease["valid"] = False                  # paused past its lease; no new state has reached it
    with pytest.raises(NotLeaderOrFollowerError, match="lease has lapsed"):
        leader.acks_all_complete(last, 0)
    with pytest.raises(NotLeaderOrFollowerError, match="lease has lapsed"):
        c.produce(0, b"from a zombie", acks=1)
    with pytest.raises(NotLeaderOrFollowerError, match="lease has lapsed"):
        leader.fetch_for_follower(c.partitions[1].next_fetch(1 << 20))
    lease["valid"] = True                   # renewed, and still the leader by the controller's word
    c.fetch(1, 0)
    c.fetch(1, 0)
    assert leader.acks_all_complete(last, 0)


def test_a_fenced_replica_that_fetches_again_stays_out_of_the_isr_until_it_registers_again(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=3)
    c.produce(0, b"a", acks=1)
    c.controller.fence(TP, 2)                # its lease lapsed
    assert c.controller.state(TP).isr == (0, 1)
    c.fetch(1, 0)
    c.fetch(2, 0)                            # a zombie's fetches, caught up
    c.fetch(2, 0)
    assert c.controller.state(TP).isr == (0, 1)
    assert c.partitions[0].pending_isr is None   # refused, and nothing left pending
    c.controller.unfence(2)                  # registered again
    c.fetch(2, 0)
    assert c.controller.state(TP).isr == (0, 1, 2)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])   # closed once the block ends: nothing listens there


def test_a_controller_that_cannot_be_reached_leaves_nothing_pending(tmp_path, clock):
    c = Cluster(tmp_path, clock, replicas=2)
    c.controller.alter_partition(TP, 0, 0, (0,), 0)     # 1 out of the ISR
    c.produce(0, b"a", acks=1)
    leader = c.partitions[0]
    working = leader.controller
    leader.controller = ControllerClient(f"http://127.0.0.1:{closed_port()}")   # the real client, refused
    c.fetch(1, 0)
    c.fetch(1, 0)
    assert leader.pending_isr is None and c.controller.state(TP).isr == (0,)
    leader.controller = working
    c.fetch(1, 0)
    assert c.controller.state(TP).isr == (0, 1)


def test_a_followers_copy_is_flushed_by_flush_messages_as_the_leaders_is(tmp_path, clock):
    c = Cluster(tmp_path, clock, min_insync_replicas=1, flush_messages=2)
    c.produce(0, b"a", b"b", b"c", acks=1)
    c.fetch(1, 0)
    assert c.log(1).log_end_offset == 3 and c.log(1).recovery_point == 3
