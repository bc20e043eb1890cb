"""What a LogDir's agent does for a Topic: plan_topic_here, without a cluster or an engine."""

from __future__ import annotations

from typing import Any

from stratalog_operator.agent.placement import LocalTopic, plan_topic_here

FIN = "stratalog.io/agent-dir-a"


def topic(*, assignment: dict[int, list[str]] | None = None, finalizers: list[str] | None = None,
          deleting: bool = False, policy: str = "Delete", annotations: dict[str, str] | None = None,
          topic_name: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "orders", "finalizers": finalizers or [], "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T00:00:00Z"
    spec: dict[str, Any] = {"partitions": 4, "deletionPolicy": policy}
    if topic_name:
        spec["topicName"] = topic_name
    status = {"assignment": [{"partition": p, "logDirs": d} for p, d in (assignment or {}).items()]}
    return {"metadata": meta, "spec": spec, "status": status}


ASSIGNED = {0: ["dir-a"], 1: ["dir-b"], 2: ["dir-a"], 3: ["dir-b"]}


def test_the_finalizer_comes_before_the_partitions_assigned_here_are_created() -> None:
    actions = plan_topic_here(topic(assignment=ASSIGNED), "dir-a", FIN, {"retention.ms": "1000"}, None)
    assert actions.add_finalizer and actions.create == [0, 2]
    assert actions.overrides == {"retention.ms": "1000"} and not actions.delete


def test_nothing_is_done_when_the_engine_already_holds_what_is_assigned() -> None:
    local = LocalTopic(frozenset({0, 2}), {"retention.ms": "1000"})
    actions = plan_topic_here(topic(assignment=ASSIGNED, finalizers=[FIN]), "dir-a", FIN, {"retention.ms": "1000"},
                              local)
    assert actions.empty


def test_a_config_change_is_applied_to_the_partitions_held() -> None:
    local = LocalTopic(frozenset({0, 2}), {"retention.ms": "1000"})
    actions = plan_topic_here(topic(assignment=ASSIGNED, finalizers=[FIN]), "dir-a", FIN, {"retention.ms": "5"},
                              local)
    assert actions.alter_config and actions.overrides == {"retention.ms": "5"} and not actions.create


def test_partitions_moved_away_are_deleted_or_kept_under_retain() -> None:
    local = LocalTopic(frozenset({0, 2}), {})
    moved = {0: ["dir-a"], 2: ["dir-b"]}
    assert plan_topic_here(topic(assignment=moved, finalizers=[FIN]), "dir-a", FIN, {}, local).delete == [2]
    kept = plan_topic_here(topic(assignment=moved, finalizers=[FIN], policy="Retain"), "dir-a", FIN, {}, local)
    assert kept.keep == [2] and not kept.delete


def test_a_deleted_topic_has_its_data_deleted_then_the_finalizer_released() -> None:
    local = LocalTopic(frozenset({0, 2}), {})
    actions = plan_topic_here(topic(assignment=ASSIGNED, finalizers=[FIN], deleting=True), "dir-a", FIN, {}, local)
    assert actions.delete == [0, 2] and actions.remove_finalizer


def test_retain_and_unmanaged_topics_keep_their_data_on_deletion() -> None:
    local = LocalTopic(frozenset({0, 2}), {})
    retained = plan_topic_here(topic(assignment=ASSIGNED, finalizers=[FIN], deleting=True, policy="Retain"),
                               "dir-a", FIN, {}, local)
    assert retained.keep == [0, 2] and not retained.delete and retained.remove_finalizer
    unmanaged = plan_topic_here(topic(assignment=ASSIGNED, finalizers=[FIN], deleting=True,
                                      annotations={"stratalog.io/managed": "false"}), "dir-a", FIN, {}, local)
    assert not unmanaged.delete and unmanaged.remove_finalizer


def test_a_topic_without_this_agents_finalizer_never_deletes_data_here() -> None:
    # A conflicting Topic (no assignment) naming a Kafka topic this engine holds for another Topic.
    local = LocalTopic(frozenset({0, 2}), {"retention.ms": "1000"})
    assert plan_topic_here(topic(assignment={}), "dir-a", FIN, {}, local).empty
    assert plan_topic_here(topic(assignment={}, deleting=True), "dir-a", FIN, {}, local).empty


def test_a_paused_topic_is_left_alone_and_its_effective_name_is_used() -> None:
    paused = topic(assignment=ASSIGNED, annotations={"stratalog.io/pause-reconciliation": "true"})
    assert plan_topic_here(paused, "dir-a", FIN, {}, None).empty
    named = plan_topic_here(topic(assignment=ASSIGNED, topic_name="orders.v2"), "dir-a", FIN, {}, None)
    assert named.topic == "orders.v2"
