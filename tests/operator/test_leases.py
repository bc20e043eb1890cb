"""Agents' Leases as values: what an agent writes, and when the controller counts it dead."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from stratalog_operator.leases import (
    ADVERTISED_ANNOTATION,
    KAFKA_ADVERTISED_ANNOTATION,
    KAFKA_REPLICA_FETCH_ANNOTATION,
    REJOINING_ANNOTATION,
    SHUTTING_DOWN_ANNOTATION,
    alive_logdirs,
    duration_seconds,
    expired,
    kafka_addresses,
    lease_body,
    lease_name,
    rejoining,
    renewal,
    shutting_down,
)

T0 = datetime(2026, 11, 24, 12, 0, 0, 123456, tzinfo=timezone.utc)


def test_a_lease_names_its_logdir_holder_duration_and_advertised_address():
    body = lease_body("dir-a", "ns", "agent-pod-1", 9000, T0, "http://10.0.0.7:8092")
    assert body["metadata"]["name"] == lease_name("dir-a") == "stratalog-agent-dir-a"
    assert body["metadata"]["labels"]["stratalog.io/logdir"] == "dir-a"
    assert body["metadata"]["annotations"][ADVERTISED_ANNOTATION] == "http://10.0.0.7:8092"
    assert body["spec"]["holderIdentity"] == "agent-pod-1"
    assert body["spec"]["leaseDurationSeconds"] == 9
    assert body["spec"]["renewTime"] == "2026-11-24T12:00:00.123456Z"


def test_the_session_timeout_rounds_up_to_whole_seconds_never_down():
    assert [duration_seconds(ms) for ms in (1, 1000, 1001, 9000, 9500)] == [1, 1, 2, 9, 10]


def test_a_lease_is_alive_until_its_duration_has_passed_since_the_last_renewal():
    body = lease_body("dir-a", "ns", "a", 9000, T0, None)
    assert not expired(body, T0 + timedelta(seconds=9))
    assert expired(body, T0 + timedelta(seconds=9, microseconds=1))
    renewed = {**body, "spec": {**body["spec"], **renewal("a", 9000, T0 + timedelta(seconds=8), None)["spec"]}}
    assert not expired(renewed, T0 + timedelta(seconds=16))


def test_a_lease_without_a_renewal_counts_as_expired():
    assert expired({"spec": {"leaseDurationSeconds": 9}}, T0)
    assert expired({}, T0)


def test_alive_logdirs_are_those_with_a_current_lease():
    leases = [lease_body("dir-a", "ns", "a", 9000, T0, None), lease_body("dir-b", "ns", "b", 9000,
                                                                         T0 - timedelta(seconds=20), None)]
    assert alive_logdirs(leases, T0 + timedelta(seconds=1)) == {"dir-a"}


def test_an_agent_in_controlled_shutdown_says_so_on_its_lease_and_a_later_renewal_clears_it():
    body = lease_body("dir-a", "ns", "a", 9000, T0, None)
    leaving = renewal("a", 9000, T0, None, leaving=True)["metadata"]["annotations"]
    assert leaving == {SHUTTING_DOWN_ANNOTATION: "true", REJOINING_ANNOTATION: None,
                       KAFKA_ADVERTISED_ANNOTATION: None, KAFKA_REPLICA_FETCH_ANNOTATION: None}
    marked = {**body, "metadata": {**body["metadata"], "annotations": leaving}}
    assert shutting_down([marked, lease_body("dir-b", "ns", "b", 9000, T0, None)]) == {"dir-a"}
    # A merge patch's null removes the mark a previous process of this agent left.
    assert renewal("a", 9000, T0, "http://h:1")["metadata"]["annotations"] == {
        SHUTTING_DOWN_ANNOTATION: None, REJOINING_ANNOTATION: None, ADVERTISED_ANNOTATION: "http://h:1",
        KAFKA_ADVERTISED_ANNOTATION: None, KAFKA_REPLICA_FETCH_ANNOTATION: None}


def test_a_restarted_agent_says_it_is_rejoining_from_its_first_write_until_it_clears_the_mark():
    created = lease_body("dir-a", "ns", "a", 9000, T0, None, rejoining=True)
    assert created["metadata"]["annotations"] == {REJOINING_ANNOTATION: "true"}
    renewed = renewal("a", 9000, T0, None, rejoining=True)["metadata"]["annotations"]
    assert renewed == {SHUTTING_DOWN_ANNOTATION: None, REJOINING_ANNOTATION: "true", KAFKA_ADVERTISED_ANNOTATION: None,
                       KAFKA_REPLICA_FETCH_ANNOTATION: None}
    assert rejoining([created, lease_body("dir-b", "ns", "b", 9000, T0, None)]) == {"dir-a"}
    assert shutting_down([created]) == set()
    assert lease_body("dir-a", "ns", "a", 9000, T0, None)["metadata"]["annotations"] == {}


def test_an_agent_with_a_kafka_listener_advertises_it_and_only_live_agents_are_listed_to_clients():
    created = lease_body("dir-a", "ns", "a", 9000, T0, None, kafka_advertised="dir-a.ns.svc:9092")
    # ... and that it serves followers there (agents of earlier versions advertised it without).
    assert created["metadata"]["annotations"] == {KAFKA_ADVERTISED_ANNOTATION: "dir-a.ns.svc:9092",
                                                  KAFKA_REPLICA_FETCH_ANNOTATION: "true"}
    assert renewal("a", 9000, T0, None, kafka_advertised="dir-a.ns.svc:9092")["metadata"]["annotations"][
        KAFKA_ADVERTISED_ANNOTATION] == "dir-a.ns.svc:9092"
    lapsed = lease_body("dir-b", "ns", "b", 9000, T0 - timedelta(seconds=20), None, kafka_advertised="b:9092")
    without = lease_body("dir-c", "ns", "c", 9000, T0, None)
    v6 = lease_body("dir-d", "ns", "d", 9000, T0, None, kafka_advertised="[fd00::7]:9093")
    malformed = lease_body("dir-e", "ns", "e", 9000, T0, None, kafka_advertised="dir-e.ns.svc")
    assert kafka_addresses([created, lapsed, without, v6, malformed], T0 + timedelta(seconds=1)) == {
        "dir-a": ("dir-a.ns.svc", 9092), "dir-d": ("fd00::7", 9093)}
