"""The cluster an agent describes to Kafka clients, as a value of the Topic bodies and the listeners."""

from __future__ import annotations

import pytest

from stratalog.common.errors import UnknownTopicOrPartitionError
from stratalog.broker.groups.offsets_records import partition_for
from stratalog.server.kafka.cluster import CoordinatorNotAvailable, Node, PartitionView
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


def cluster(topics: dict, listeners: dict, asked: list | None = None) -> AgentCluster:
    return AgentCluster("ns", A, ("dir-a.ns.svc", 9092), topics, lambda: listeners,
                        lambda: (asked if asked is not None else []).append("asked"))


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


def test_topic_changes_name_the_resource_to_edit():
    view = cluster({"payments-v2": topic("payments-v2", [record(0, A, [A])], topic_name="payments.v2")}, {})
    assert "Topic resource ns/payments-v2" in (view.administered_elsewhere("payments.v2") or "")
    assert "kubectl edit topics.stratalog.io payments-v2 -n ns" in (view.administered_elsewhere("payments.v2") or "")
    assert "spec.topicName: brand.new" in (view.administered_elsewhere("brand.new") or "")


def test_a_groups_coordinator_is_its_offsets_partitions_leader_and_without_the_topic_it_is_asked_for():
    asked: list = []
    bare = cluster({}, {}, asked)
    with pytest.raises(CoordinatorNotAvailable, match="'billing'.*__consumer_offsets is not made"):
        bare.group_coordinator("billing")
    assert asked == ["asked"] and bare.offsets_partitions() is None

    partition = partition_for("billing", 3)
    leaders = {partition: B, (partition + 1) % 3: A, (partition + 2) % 3: A}
    offsets = topic("consumer-offsets", [record(p, leaders[p], [A, B, C]) for p in range(3)],
                    topic_name="__consumer_offsets")
    view = cluster({"consumer-offsets": offsets}, {B: ("dir-b.ns.svc", 9092)})
    assert view.offsets_partitions() == 3
    assert view.group_coordinator("billing") == Node(broker_id(B), "dir-b.ns.svc", 9092)
    gone = cluster({"consumer-offsets": offsets}, {})   # B's Lease lapsed: no coordinator until a new leader
    with pytest.raises(CoordinatorNotAvailable, match=f"partition {partition} has no leader"):
        gone.group_coordinator("billing")


def test_a_topics_config_is_its_spec_over_this_logdirs_topic_defaults_for_describing_it_from_anywhere():
    body = topic("orders", [record(0, B, [B])])
    body["spec"]["config"] = {"retention.ms": 3600000, "cleanup.policy": ["compact"]}
    view = AgentCluster("ns", A, ("dir-a.ns.svc", 9092), {"orders": body}, lambda: {},
                        topic_defaults=lambda: {"retention.ms": "60000", "segment.bytes": "1048576"})
    assert view.topic_overrides("orders") == {"retention.ms": "3600000", "cleanup.policy": "compact",
                                              "segment.bytes": "1048576"}
    assert view.topic_overrides("unknown") is None
