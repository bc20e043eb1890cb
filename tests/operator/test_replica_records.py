"""Partition records turned into the engine's states, and AlterPartition's rule, without I/O."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from stratalog.broker.replica_state import PartitionState
from stratalog.common.errors import FencedLeaderEpochError, IneligibleReplicaError, InvalidUpdateVersionError
from stratalog_operator.election import PartitionRecord
from stratalog_operator.leases import (
    ADVERTISED_ANNOTATION,
    KAFKA_ADVERTISED_ANNOTATION,
    KAFKA_REPLICA_FETCH_ANNOTATION,
    lease_body,
    renewal,
)
from stratalog_operator.names import LABEL_LOGDIR
from stratalog_operator.replica_records import (
    advertised_urls,
    alter_isr,
    broker_id,
    broker_ids,
    engine_state,
    replication_endpoints,
)

ABC = ("a", "b", "c")
A, B, C = (broker_id(n) for n in ABC)


def record(leader: str | None = "a", isr: tuple[str, ...] = ("a", "b"), *, epoch: int = 3,
           version: int = 7) -> PartitionRecord:
    return PartitionRecord(0, ABC, leader, epoch, isr, version)


def test_a_logdirs_broker_id_is_a_stable_non_negative_int32_from_its_name():
    assert broker_id("dir-a") == broker_id("dir-a") != broker_id("dir-b")
    assert all(0 <= broker_id(n) < 2**31 for n in ("dir-a", "x" * 253, ""))


def test_two_names_with_one_id_are_refused_naming_both(monkeypatch):
    monkeypatch.setattr("stratalog_operator.replica_records.broker_id", lambda name: 7)
    with pytest.raises(ValueError, match="'a' and 'b' hash to the same broker id 7"):
        broker_ids(["a", "b"])


def test_the_engine_state_keeps_the_records_order_and_epochs():
    assert engine_state(record()) == PartitionState((A, B, C), A, 3, (A, B), 7)
    assert engine_state(record(None, ("a",))).leader == -1


def test_the_leaders_proposal_against_the_current_record_commits_with_the_next_partition_epoch():
    after = alter_isr(record(), A, 3, (B, A, C), 7, alive={"a", "b", "c"})
    assert (after.isr, after.partition_epoch, after.leader_epoch, after.leader) == (ABC, 8, 3, "a")


def test_a_proposal_against_an_older_partition_epoch_is_refused_as_invalid_update_version():
    with pytest.raises(InvalidUpdateVersionError, match="partition epoch 6, the current one is 7"):
        alter_isr(record(), A, 3, (A,), 6, alive=set(ABC))


def test_a_replaced_leader_is_fenced_by_its_leader_epoch():
    with pytest.raises(FencedLeaderEpochError, match="from a at leader epoch 2, but the leader is a at epoch 3"):
        alter_isr(record(), A, 2, (A,), 7, alive=set(ABC))
    with pytest.raises(FencedLeaderEpochError, match="the leader is b"):
        alter_isr(record("b"), A, 3, (A,), 7, alive=set(ABC))


def test_a_replica_without_a_live_lease_cannot_join_the_isr_but_may_stay_in_it():
    with pytest.raises(IneligibleReplicaError, match="c hold no live Lease"):
        alter_isr(record(), A, 3, (A, B, C), 7, alive={"a", "b"})
    assert alter_isr(record(), A, 3, (A, B), 7, alive={"a"}).partition_epoch == 8   # b stays though silent


def test_the_isr_must_hold_the_leader_and_only_assigned_replicas():
    with pytest.raises(InvalidUpdateVersionError, match="must hold the leader"):
        alter_isr(record(), A, 3, (B,), 7, alive=set(ABC))
    with pytest.raises(InvalidUpdateVersionError, match="only its replicas"):
        alter_isr(record(), A, 3, (A, 12345), 7, alive=set(ABC))


def test_each_agent_is_found_at_the_url_it_advertises_on_its_lease():
    leases = [{"metadata": {"labels": {LABEL_LOGDIR: "a"}, "annotations": {ADVERTISED_ANNOTATION: "http://h:1"}}},
              {"metadata": {"labels": {LABEL_LOGDIR: "b"}}},
              {"metadata": {"annotations": {ADVERTISED_ANNOTATION: "http://stray:2"}}}]
    assert advertised_urls(leases) == {"a": "http://h:1"}


def test_followers_fetch_from_an_agents_kafka_listener_when_it_serves_them_there_over_tls_when_its_api_is_https():
    def lease(logdir: str, url: str, kafka: str | None = None, replica_fetch: bool = True) -> dict:
        annotations = {ADVERTISED_ANNOTATION: url}
        if kafka:
            annotations[KAFKA_ADVERTISED_ANNOTATION] = kafka
            if replica_fetch:
                annotations[KAFKA_REPLICA_FETCH_ANNOTATION] = "true"
        return {"metadata": {"labels": {LABEL_LOGDIR: logdir}, "annotations": annotations}}

    leases = [lease("a", "http://a:8092", "a:9092"), lease("b", "https://b:8092", "b.ns.svc:9093"),
              lease("c", "http://c:8092"), lease("d", "http://d:8092", "not an address"),
              lease("e", "http://e:8092", "[fd00::5]:9092"), lease("f", "http://f:8092", "f/x:9092"),
              lease("old", "http://old:8092", "old:9092", replica_fetch=False)]
    # c has no listener, d and f no usable address, old an agent that does not serve followers there.
    assert replication_endpoints(leases) == {
        "a": "kafka://a:9092", "b": "kafka+ssl://b.ns.svc:9093", "e": "kafka://[fd00::5]:9092"}


def test_an_agent_says_it_serves_followers_on_its_kafka_listener_and_unsays_it_without_one():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    body = lease_body("a", "ns", "pod", 9000, now, "http://a:8092", kafka_advertised="a:9092")
    assert body["metadata"]["annotations"][KAFKA_REPLICA_FETCH_ANNOTATION] == "true"
    assert renewal("pod", 9000, now, "http://a:8092", kafka_advertised="a:9092")["metadata"]["annotations"][
        KAFKA_REPLICA_FETCH_ANNOTATION] == "true"
    assert renewal("pod", 9000, now, "http://a:8092")["metadata"]["annotations"][
        KAFKA_REPLICA_FETCH_ANNOTATION] is None   # a merge patch's None removes it
    assert KAFKA_REPLICA_FETCH_ANNOTATION not in lease_body("a", "ns", "pod", 9000, now, "http://a:8092")[
        "metadata"]["annotations"]
