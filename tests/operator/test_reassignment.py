"""Moving a partition between LogDirs as a pure plan: add, let catch up, then remove (KIP-455)."""

from __future__ import annotations

from stratalog_operator.agent.placement import LocalTopic, plan_topic_here
from stratalog_operator.election import PartitionRecord
from stratalog_operator.reassignment import plan_reassignment, plan_reassignments, targets


def record(replicas=("a", "b"), leader="a", isr=("a", "b"), *, adding=(), removing=(), epoch=4, version=9):
    return PartitionRecord(0, tuple(replicas), leader, epoch, tuple(isr), version, tuple(adding), tuple(removing))


def test_a_partition_where_it_should_be_is_left_alone():
    assert plan_reassignment(record(), ("a", "b")) is None


def test_a_move_starts_by_adding_the_new_replicas_beside_the_old_ones():
    change = plan_reassignment(record(), ("b", "c"))
    assert change is not None and change.reason == "ReassignmentStarted"
    after = change.after
    assert (after.replicas, after.adding, after.removing) == (("b", "c", "a"), ("c",), ("a",))
    assert (after.leader, after.leader_epoch, after.isr, after.partition_epoch) == ("a", 4, ("a", "b"), 10)


def test_the_move_waits_while_a_new_replica_is_not_in_sync():
    moving = record(("b", "c", "a"), isr=("a", "b"), adding=("c",), removing=("a",))
    assert plan_reassignment(moving, ("b", "c")) is None


def test_once_the_new_replicas_are_in_sync_the_old_ones_leave_and_a_leaving_leader_hands_over():
    moving = record(("b", "c", "a"), isr=("a", "b", "c"), adding=("c",), removing=("a",))
    change = plan_reassignment(moving, ("b", "c"))
    assert change is not None and change.reason == "Reassigned"
    after = change.after
    assert (after.replicas, after.isr, after.adding, after.removing) == (("b", "c"), ("b", "c"), (), ())
    assert (after.leader, after.leader_epoch, after.partition_epoch) == ("b", 5, 10)


def test_a_staying_leader_keeps_its_epoch_when_the_move_finishes():
    moving = record(("a", "c", "b"), isr=("a", "b", "c"), adding=("c",), removing=("b",))
    after = plan_reassignment(moving, ("a", "c")).after
    assert (after.leader, after.leader_epoch, after.isr) == ("a", 4, ("a", "c"))


def test_a_target_changed_mid_move_keeps_every_replica_that_may_hold_data():
    moving = record(("b", "c", "a"), isr=("a", "b"), adding=("c",), removing=("a",))
    after = plan_reassignment(moving, ("b", "d")).after
    assert (after.replicas, after.adding, after.removing) == (("b", "d", "c", "a"), ("d",), ("c", "a"))


def test_a_new_order_alone_is_written_at_once():
    after = plan_reassignment(record(), ("b", "a")).after
    assert (after.replicas, after.leader, after.leader_epoch) == (("b", "a"), "a", 4)


def test_targets_come_from_the_topics_assignment():
    assignment = [{"partition": 0, "logDirs": ["b", "c"]}, {"partition": 1, "logDirs": []}, {"bad": 1}]
    assert targets(assignment) == {0: ("b", "c")}
    assert [c.after.partition for c in plan_reassignments([record()], targets(assignment))] == [0]


def test_an_agent_keeps_a_replica_that_a_record_still_lists_though_the_assignment_moved_it():
    topic = {"metadata": {"name": "t", "finalizers": ["fin"]}, "spec": {},
             "status": {"assignment": [{"partition": 0, "logDirs": ["b", "c"]}],
                        "partitions": [{"partition": 0, "replicas": ["b", "c", "a"], "leader": "a", "leaderEpoch": 4,
                                        "isr": ["a", "b"], "partitionEpoch": 10}]}}
    held = LocalTopic(frozenset({0}), {})
    kept = plan_topic_here(topic, "a", "fin", {}, held)
    assert kept.delete == [] and not kept.remove_finalizer
    topic["status"]["partitions"][0].update(replicas=["b", "c"], isr=["b", "c"], leader="b")
    done = plan_topic_here(topic, "a", "fin", {}, held)
    assert done.delete == [0] and done.remove_finalizer
