"""controller.topics.plan_topic: a Topic's status from the Topic, its namespace's Topics and LogDirs."""

from __future__ import annotations

from typing import Any

from stratalog_operator.conditions import condition
from stratalog_operator.controller.topics import conflict_winner, effective_name, placement_condition, plan_topic

NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"


def topic(name: str, *, created: str = "2026-01-01T00:00:00Z", partitions: int = 3, replicas: int = 1,
          topic_name: str | None = None, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "stratalog.io/v1alpha1", "kind": "Topic",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1,
                     "creationTimestamp": created},
        "spec": {"partitions": partitions, "replicas": replicas, **spec},
    }
    if topic_name is not None:
        body["spec"]["topicName"] = topic_name
    if status is not None:
        body["status"] = status
    return body


def logdir(name: str, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}, **meta}}


DIRS = [logdir("dir-c"), logdir("dir-a"), logdir("dir-b")]


def conds(plan: Any) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in plan.fragment["conditions"]}


def test_a_topic_is_assigned_over_its_namespaces_logdirs() -> None:
    t = topic("orders", partitions=3, replicas=2)
    plan = plan_topic(t, [t], DIRS, now=NOW)
    assert plan.fragment["topicName"] == "orders"
    assert plan.fragment["observedGeneration"] == 1
    assert plan.fragment["assignment"] == [{"partition": 0, "logDirs": ["dir-a", "dir-b"]},
                                           {"partition": 1, "logDirs": ["dir-b", "dir-c"]},
                                           {"partition": 2, "logDirs": ["dir-c", "dir-a"]}]
    assert conds(plan) == {"Ready": ("True", "Assigned", "3 partitions × 2 replicas on 3 LogDirs"),
                           "ResourceConflict": ("False", "NoConflict", ""),
                           "ReconciliationPaused": ("False", "NotPaused", ""),
                           "PartitionsPlaced": ("False", "WaitingForAgents", "not yet reported by their "
                                                "LogDir's agent: dir-a: [0, 2]; dir-b: [0, 1]; dir-c: [1, 2]")}
    assert all(c["lastTransitionTime"] == NOW and c["observedGeneration"] == 1 for c in plan.fragment["conditions"])


def test_the_effective_name_is_spec_topic_name_else_metadata_name() -> None:
    assert effective_name(topic("orders")) == "orders"
    assert effective_name(topic("orders", topic_name="orders.v2")) == "orders.v2"
    t = topic("orders", topic_name="orders.v2")
    assert plan_topic(t, [t], DIRS, now=NOW).fragment["topicName"] == "orders.v2"


def test_logdirs_are_filtered_by_selector_deletion_and_management() -> None:
    dirs = [logdir("fast-1", {"pool": "fast"}), logdir("fast-2", {"pool": "fast"}, deletionTimestamp=NOW),
            logdir("fast-3", {"pool": "fast"}, annotations={"stratalog.io/managed": "false"}),
            logdir("slow-1", {"pool": "slow"})]
    t = topic("t", partitions=2, logDirSelector={"matchLabels": {"pool": "fast"}})
    plan = plan_topic(t, [t], dirs, now=NOW)
    assert plan.fragment["assignment"] == [{"partition": 0, "logDirs": ["fast-1"]},
                                           {"partition": 1, "logDirs": ["fast-1"]}]


def test_existing_assignment_is_kept_when_logdirs_are_added() -> None:
    status = {"assignment": [{"partition": 0, "logDirs": ["dir-b"]}, {"partition": 1, "logDirs": ["dir-c"]}]}
    t = topic("t", partitions=3, status=status)
    plan = plan_topic(t, [t], DIRS, now=NOW)
    assert plan.fragment["assignment"] == [{"partition": 0, "logDirs": ["dir-b"]},
                                           {"partition": 1, "logDirs": ["dir-c"]},
                                           {"partition": 2, "logDirs": ["dir-c"]}]


def test_the_older_topic_wins_a_shared_name_and_the_other_is_a_conflict() -> None:
    old = topic("zz-old", created="2026-01-01T00:00:00Z", topic_name="shared")
    new = topic("aa-new", created="2026-01-01T00:00:01Z", topic_name="shared")
    assert conflict_winner(old, [old, new]) is None
    assert conflict_winner(new, [old, new]) is old
    plan = plan_topic(new, [old, new], DIRS, now=NOW)
    assert plan.fragment["assignment"] == []
    assert plan.assignment is None
    c = conds(plan)
    assert c["ResourceConflict"] == ("True", "TopicNameInUse",
                                     "Topic zz-old (older) already manages Kafka topic 'shared'; "
                                     "this Topic is ignored until that one is gone")
    assert c["Ready"] == ("False", "ResourceConflict", "Kafka topic 'shared' is managed by Topic zz-old")
    winner = plan_topic(old, [old, new], DIRS, now=NOW)
    assert conds(winner)["ResourceConflict"][0] == "False"
    assert len(winner.fragment["assignment"]) == 3


def test_a_loser_drops_its_assignment() -> None:
    old = topic("a", topic_name="shared")
    new = topic("b", topic_name="shared", created="2026-01-02T00:00:00Z",
                status={"assignment": [{"partition": 0, "logDirs": ["dir-a"]}]})
    assert plan_topic(new, [old, new], DIRS, now=NOW).fragment["assignment"] == []


def test_same_creation_time_is_decided_by_name() -> None:
    a, b = topic("a", topic_name="shared"), topic("b", topic_name="shared")
    assert conflict_winner(b, [a, b]) is a
    assert conflict_winner(a, [a, b]) is None


def test_metadata_name_and_topic_name_conflict_and_dot_equals_underscore() -> None:
    plain = topic("orders")
    named = topic("orders-v2", topic_name="orders", created="2026-01-01T00:00:01Z")
    assert conflict_winner(named, [plain, named]) is plain
    dotted = topic("x", topic_name="a.b")
    underscored = topic("y", topic_name="a_b", created="2026-01-01T00:00:01Z")
    assert conflict_winner(underscored, [dotted, underscored]) is dotted
    other = topic("z", topic_name="a-b", created="2026-01-01T00:00:01Z")
    assert conflict_winner(other, [dotted, other]) is None


def test_a_deleting_topic_still_holds_its_name() -> None:
    old = topic("a", topic_name="shared")
    old["metadata"]["deletionTimestamp"] = NOW
    new = topic("b", topic_name="shared", created="2026-01-01T00:00:01Z")
    assert conflict_winner(new, [old, new]) is old


def test_an_invalid_effective_name_is_reported_with_its_field() -> None:
    long = "spec.config-" + "x" * 240        # a valid Kubernetes name, too long for Kafka
    t = topic(long)
    c = conds(plan_topic(t, [t], DIRS, now=NOW))
    status, reason, message = c["Ready"]
    assert (status, reason) == ("False", "InvalidTopicName")
    assert message.startswith("metadata.name: topic name ") and "the limit is 249" in message
    t = topic("ok", topic_name="a/b")           # the CRD refuses this; the plan does not rely on it
    status, reason, message = conds(plan_topic(t, [t], DIRS, now=NOW))["Ready"]
    assert (status, reason) == ("False", "InvalidTopicName")
    assert message.startswith("spec.topicName: topic name 'a/b' is illegal")


def test_an_invalid_config_is_reported_naming_the_key_once() -> None:
    t = topic("t", config={"segment.bytes": 1})
    plan = plan_topic(t, [t], DIRS, now=NOW)
    status, reason, message = conds(plan)["Ready"]
    assert (status, reason) == ("False", "InvalidConfig")
    assert message == "spec.config.segment.bytes: invalid value '1' for config 'segment.bytes': " \
                      "must be at least 14 (allowed: [14, 2147483647])"
    assert plan.fragment["assignment"] == []


def test_an_invalid_topic_keeps_a_previous_assignment() -> None:
    status = {"assignment": [{"partition": 0, "logDirs": ["dir-a"]}]}
    t = topic("t", partitions=1, config={"segment.bytes": 1}, status=status)
    assert plan_topic(t, [t], DIRS, now=NOW).fragment["assignment"] == status["assignment"]


def test_too_many_replicas_is_not_ready_and_keeps_the_assignment() -> None:
    status = {"assignment": [{"partition": 0, "logDirs": ["dir-a", "dir-b"]}]}
    t = topic("t", partitions=2, replicas=4, status=status)
    plan = plan_topic(t, [t], DIRS, now=NOW)
    assert conds(plan)["Ready"] == ("False", "InsufficientLogDirs",
                                    "4 replicas need 4 LogDirs but only 3 LogDirs are selected "
                                    "(dir-a, dir-b, dir-c)")
    assert plan.fragment["assignment"] == status["assignment"]


def test_an_unusable_selector_is_not_ready() -> None:
    t = topic("t", logDirSelector={"matchExpressions": [{"key": "k", "operator": "In", "values": []}]})
    status, reason, message = conds(plan_topic(t, [t], DIRS, now=NOW))["Ready"]
    assert (status, reason) == ("False", "InvalidSelector")
    assert message == "logDirSelector.matchExpressions[0]: operator In needs at least one value"


def test_replanning_an_unchanged_topic_gives_the_same_fragment() -> None:
    t = topic("t", partitions=2)
    first = plan_topic(t, [t], DIRS, now=NOW)
    t["status"] = first.fragment
    again = plan_topic(t, [t], DIRS, now=LATER)
    assert again.fragment == first.fragment          # lastTransitionTime included: nothing to write


def test_agents_conditions_are_not_the_controllers() -> None:
    agent = {"type": "Serving", "status": "True", "reason": "x", "message": "", "lastTransitionTime": NOW}
    t = topic("t", status={"conditions": [agent]})
    types = [c["type"] for c in plan_topic(t, [t], DIRS, now=NOW).fragment["conditions"]]
    assert types == ["PartitionsPlaced", "Ready", "ReconciliationPaused", "ResourceConflict"]
    assert condition(plan_topic(t, [t], DIRS, now=NOW).fragment["conditions"], "Ready") is not None


def test_partitions_are_placed_once_every_logdirs_agent_reports_its_replicas() -> None:
    assignment = [{"partition": 0, "logDirs": ["dir-a", "dir-b"]}, {"partition": 1, "logDirs": ["dir-b", "dir-a"]}]
    partial = {"dir-a": {"partitions": {"0": {}, "1": {}}}, "dir-b": {"partitions": {"1": {}}}}
    waiting = placement_condition(assignment, partial)
    assert (waiting.status, waiting.reason) == (False, "WaitingForAgents") and "dir-b: [0]" in waiting.message
    full = {"dir-a": {"partitions": {"0": {}, "1": {}}}, "dir-b": {"partitions": {"0": {}, "1": {}}}}
    placed = placement_condition(assignment, full)
    assert (placed.status, placed.reason) == (True, "AllPlaced") and "all 4 partition replicas" in placed.message
    assert placement_condition([], full).reason == "NotAssigned"
