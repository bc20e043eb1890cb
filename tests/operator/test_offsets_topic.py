"""The namespace's __consumer_offsets Topic: made when an agent asks for it, as a value of what exists."""

from __future__ import annotations

from stratalog_operator.controller.offsets_topic import OffsetsTopicOptions, desired_offsets_topic
from stratalog_operator.names import MANAGED_ANNOTATION, OFFSETS_TOPIC_REQUESTED_ANNOTATION

ASKED = {OFFSETS_TOPIC_REQUESTED_ANNOTATION: "true"}


def logdir(name: str, annotations: dict | None = None, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T08:00:00Z"
    return {"metadata": meta, "spec": {}}


def topic(name: str, topic_name: str | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {"topicName": topic_name} if topic_name else {}}


def test_nothing_is_made_until_an_agent_asks_for_a_groups_coordinator():
    assert desired_offsets_topic([], [logdir("a"), logdir("b")], OffsetsTopicOptions()) is None


def test_asked_it_is_a_compacted_retained_topic_of_kafkas_partitions_and_at_most_one_copy_per_logdir():
    made = desired_offsets_topic([topic("orders")], [logdir("a", ASKED), logdir("b")], OffsetsTopicOptions())
    assert made is not None
    assert made["metadata"]["name"] == "consumer-offsets"
    assert made["spec"] == {"topicName": "__consumer_offsets", "partitions": 50, "replicas": 2,
                            "deletionPolicy": "Retain",
                            "config": {"cleanup.policy": ["compact"], "segment.bytes": 104857600}}
    five = [logdir(n, ASKED) for n in "abcde"]
    assert desired_offsets_topic([], five, OffsetsTopicOptions(partitions=3))["spec"]["replicas"] == 3


def test_it_is_made_once_and_not_on_logdirs_going_away_or_forgotten():
    logdirs = [logdir("a", ASKED)]
    assert desired_offsets_topic([topic("consumer-offsets", "__consumer_offsets")], logdirs,
                                 OffsetsTopicOptions()) is None
    assert desired_offsets_topic([topic("mine", "__consumer_offsets")], logdirs, OffsetsTopicOptions()) is None
    assert desired_offsets_topic([], [logdir("a", ASKED, deleting=True)], OffsetsTopicOptions()) is None
    assert desired_offsets_topic([], [logdir("a", {**ASKED, MANAGED_ANNOTATION: "false"})],
                                 OffsetsTopicOptions()) is None
