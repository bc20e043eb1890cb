"""The cluster an agent describes to Kafka clients, as a value of the Topic bodies and the listeners."""

from __future__ import annotations

import pytest

from stratalog.common.errors import UnknownTopicOrPartitionError
from stratalog.server.kafka.cluster import CoordinatorNotHere, Node, PartitionView
from stratalog_operator.agent.cluster import AgentCluster, LeaderNotAvailable
from stratalog_operator.replica_records import broker_id

A, B, C = "dir-a", "dir-b", "dir-c"


def topic(name: str, records: list[dict], *, topic_name: str | None = None, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T08:00:00Z"
    spec = {"partitions": len(records) or 1, **({"topicName": topic_name} if topic_name else {})}
    return {"metadata": meta, "spec": spec, "status": {"partitions": records}}


def record(partition: int, leader: str | None, isr: list[str], epoch: int = 3) -> dict:
    return {"partition": partition, "replicas": [A, B, C], "leader": leader, "leaderEpoch": epoch, "isr": isr,
            "partitionEpoch": 7}


def cluster(topics: dict, listeners: dict) -> AgentCluster:
    return AgentCluster("ns", A, ("dir-a.ns.svc", 9092), topics, lambda: listeners)


def test_the_brokers_are_this_agent_and_every_live_agent_with_a_listener_by_broker_id():
    view = cluster({}, {B: ("dir-b.ns.svc", 9092)})
    assert view.nodes() == sorted([Node(broker_id(A), "dir-a.ns.svc", 9092), Node(broker_id(B), "dir-b.ns.svc", 9092)],
                                  key=lambda n: n.node_id)
    assert view.cluster_id == "stratalog.ns"


def test_each_partition_is_described_by_its_record_and_a_leader_nobody_can_reach_is_no_leader():
    listeners = {B: ("dir-b.ns.svc", 9092)}
    view = cluster({"orders": topic("orders", [record(0, B, [B, A, C]), record(1, C, [C, A]),
                                               record(2, None, [A])])}, listeners)
    ids = (broker_id(A), broker_id(B), broker_id(C))
    assert view.partitions("orders") == [
        PartitionView(0, broker_id(B), 3, ids, (broker_id(B), broker_id(A), broker_id(C))),
        PartitionView(1, -1, 3, ids, (broker_id(C), broker_id(A)), "LEADER_NOT_AVAILABLE"),   # C lists no listener
        PartitionView(2, -1, 3, ids, (broker_id(A),), "LEADER_NOT_AVAILABLE"),                # offline
    ]


def test_topics_go_by_their_kafka_names_and_topics_being_deleted_or_not_yet_placed_are_told_apart():
    view = cluster({"payments-v2": topic("payments-v2", [record(0, A, [A])], topic_name="payments.v2"),
                    "gone": topic("gone", [record(0, A, [A])], deleting=True),
                    "fresh": topic("fresh", [])}, {})
    assert view.topic_names() == ["fresh", "payments.v2"]
    assert view.partitions("payments.v2")[0].leader == broker_id(A)
    with pytest.raises(LeaderNotAvailable, match="'fresh'.*not placed"):
        view.partitions("fresh")
    with pytest.raises(UnknownTopicOrPartitionError, match="'gone'"):
        view.partitions("gone")


def test_topic_changes_name_the_resource_to_edit_and_groups_are_not_coordinated_here():
    view = cluster({"payments-v2": topic("payments-v2", [record(0, A, [A])], topic_name="payments.v2")}, {})
    assert "Topic resource ns/payments-v2" in (view.administered_elsewhere("payments.v2") or "")
    assert "kubectl edit topics.stratalog.io payments-v2 -n ns" in (view.administered_elsewhere("payments.v2") or "")
    assert "spec.topicName: brand.new" in (view.administered_elsewhere("brand.new") or "")
    with pytest.raises(CoordinatorNotHere, match="'billing'.*do not coordinate consumer groups"):
        view.group_coordinator("billing")
