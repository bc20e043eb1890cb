"""The controller's elections as a pure plan: Leases and controlled shutdowns in, partition records out."""

from __future__ import annotations

from stratalog_operator.election import PartitionRecord, plan_leadership

ABC = ("a", "b", "c")


def record(leader: str | None = "a", isr: tuple[str, ...] = ABC, *, epoch: int = 3, version: int = 7) -> PartitionRecord:
    return PartitionRecord(0, ABC, leader, epoch, isr, version)


def only(changes):
    [change] = changes
    return change.reason, change.after


def test_nothing_changes_while_every_agent_is_alive_and_the_preferred_replica_leads():
    assert plan_leadership([record()], {"a", "b", "c"}) == []


def test_a_lost_leader_hands_over_to_the_next_isr_member_in_assignment_order_and_leaves_the_isr():
    reason, after = only(plan_leadership([record("a", ("a", "c", "b"))], {"b", "c"}))
    assert reason == "LeaderLost"
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == ("b", ("b", "c"), 4, 8)


def test_an_out_of_sync_replica_never_leads_a_clean_election():
    reason, after = only(plan_leadership([record("a", ("a", "c"))], {"b", "c"}))
    assert (reason, after.leader, after.isr) == ("LeaderLost", "c", ("c",))


def test_with_no_isr_member_alive_the_partition_goes_offline_keeping_its_isr():
    reason, after = only(plan_leadership([record("a", ("a",))], {"b", "c"}))
    assert (reason, after.leader, after.isr, after.leader_epoch) == ("Offline", None, ("a",), 4)
    assert plan_leadership([after], {"b", "c"}) == []                  # no news while it stays so


def test_unclean_election_lets_the_first_alive_replica_lead_alone():
    reason, after = only(plan_leadership([record("a", ("a",))], {"b", "c"}, unclean=True))
    assert (reason, after.leader, after.isr) == ("Unclean", "b", ("b",))


def test_an_offline_partition_comes_back_when_an_isr_member_does():
    offline = record(None, ("a",), epoch=4)
    reason, after = only(plan_leadership([offline], {"a", "b"}))
    assert (reason, after.leader, after.isr, after.leader_epoch) == ("Online", "a", ("a",), 5)


def test_a_lost_follower_leaves_the_isr_and_the_leader_stays():
    reason, after = only(plan_leadership([record("a", ABC)], {"a", "b"}))
    assert (reason, after.leader, after.isr, after.leader_epoch, after.partition_epoch) == \
        ("IsrShrink", "a", ("a", "b"), 3, 8)


def test_controlled_shutdown_moves_leadership_first_and_takes_the_leaving_agent_out_of_the_isr():
    reason, after = only(plan_leadership([record("a", ABC)], {"a", "b", "c"}, leaving={"a"}))
    assert (reason, after.leader, after.isr) == ("ControlledShutdown", "b", ("b", "c"))
    # A leaving follower leaves the ISR as well, so acks=all never waits for it.
    reason, after = only(plan_leadership([record("b", ABC)], {"a", "b", "c"}, leaving={"c"}, rebalance=False))
    assert (reason, after.leader, after.isr) == ("IsrShrink", "b", ("a", "b"))


def test_a_restarted_leader_hands_over_as_in_a_shutdown_so_it_never_leads_on_at_its_old_epoch():
    reason, after = only(plan_leadership([record("a", ABC)], {"a", "b", "c"}, restarted={"a"}))
    assert (reason, after.leader, after.isr, after.leader_epoch) == ("LeaderRestarted", "b", ("b", "c"), 4)
    # A restarted follower leaves the ISR: its log may have lost its unflushed tail.
    reason, after = only(plan_leadership([record("b", ABC)], {"a", "b", "c"}, restarted={"c"}, rebalance=False))
    assert (reason, after.leader, after.isr) == ("IsrShrink", "b", ("a", "b"))
    # Alone in sync, it cannot hand over: the partition goes offline, and comes back under a new
    # leader epoch once the agent has rejoined.
    reason, after = only(plan_leadership([record("a", ("a",))], {"a", "b", "c"}, restarted={"a"}))
    assert (reason, after.leader, after.isr, after.leader_epoch) == ("Offline", None, ("a",), 4)
    reason, after = only(plan_leadership([after], {"a", "b", "c"}))
    assert (reason, after.leader, after.leader_epoch) == ("Online", "a", 5)


def test_leadership_returns_to_the_preferred_replica_once_it_is_back_in_the_isr():
    assert plan_leadership([record("b", ("b", "c"))], {"a", "b", "c"}) == []   # a not in sync yet
    reason, after = only(plan_leadership([record("b", ABC)], {"a", "b", "c"}))
    assert (reason, after.leader, after.leader_epoch) == ("PreferredLeader", "a", 4)
    assert plan_leadership([record("b", ABC)], {"a", "b", "c"}, rebalance=False) == []


def test_each_partition_is_planned_on_its_own():
    second = PartitionRecord(1, ("b", "c", "a"), "b", 0, ("b", "c", "a"), 0)
    changes = plan_leadership([record("a", ABC), second], {"a", "c"})
    assert [(c.after.partition, c.reason, c.after.leader) for c in changes] == [(0, "IsrShrink", "a"),
                                                                               (1, "LeaderLost", "c")]
