"""The namespace's ``__consumer_offsets`` Topic, made by the controller when a client first needs it.

Kafka makes its offsets topic when a client first asks for a group's coordinator. Here Topics are
resources and only the controller makes them: the agent asked marks its LogDir
(``stratalog.io/consumer-offsets-requested``), and the controller, seeing the mark on a LogDir of
a namespace without the Topic, makes ``consumer-offsets`` with
``spec.topicName: __consumer_offsets``, compacted, with
Kafka's ``offsets.topic.num.partitions`` (50) and ``offsets.topic.replication.factor`` (3)
unless the operator is told otherwise. A namespace with fewer LogDirs than that gets one copy
per LogDir: Kafka would refuse to make the topic until enough brokers exist, which would leave a
one-LogDir namespace without consumer groups. The leader of each partition coordinates the
groups hashed to it (``stratalog.broker.groups.ownership``).

Once made it is a Topic like any other (the user may grow it, or set its config). Deleted, it is
made again while the mark stays; its ``deletionPolicy`` is Retain, so the committed offsets stay
on disk for the one made again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stratalog.common.names import OFFSETS_TOPIC

from ..kube import ApiError, Kube
from ..names import (API_VERSION, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_NAME, OFFSETS_TOPIC_REQUESTED_ANNOTATION,
                     is_unmanaged)
from ..outcome import Outcome
from .topics import effective_name

__all__ = ["OffsetsTopicOptions", "OFFSETS_TOPIC_RESOURCE", "desired_offsets_topic", "ensure_offsets_topic"]

logger = logging.getLogger("stratalog.operator")

OFFSETS_TOPIC_RESOURCE = "consumer-offsets"
SEGMENT_BYTES = 100 * 1024 * 1024   # Kafka's offsets.topic.segment.bytes
Json = dict[str, Any]


@dataclass(frozen=True)
class OffsetsTopicOptions:
    partitions: int = 50   # Kafka's offsets.topic.num.partitions
    replicas: int = 3      # Kafka's offsets.topic.replication.factor


def desired_offsets_topic(topics: Sequence[Mapping[str, Any]], logdirs: Sequence[Mapping[str, Any]],
                          options: OffsetsTopicOptions) -> Json | None:
    """The Topic to make (no I/O): one when an agent asked for it, no Topic of the namespace names
    ``__consumer_offsets`` yet, and the namespace has a usable LogDir; None otherwise."""
    asked = any((d["metadata"].get("annotations") or {}).get(OFFSETS_TOPIC_REQUESTED_ANNOTATION) == "true"
                for d in logdirs)
    usable = [d for d in logdirs if not d["metadata"].get("deletionTimestamp") and not is_unmanaged(d["metadata"])]
    if not asked or not usable or any(effective_name(t) == OFFSETS_TOPIC for t in topics):
        return None
    return {"apiVersion": API_VERSION, "kind": "Topic",
            "metadata": {"name": OFFSETS_TOPIC_RESOURCE,
                         "labels": {LABEL_NAME: "stratalog", LABEL_COMPONENT: "consumer-offsets",
                                    LABEL_MANAGED_BY: "stratalog-operator"}},
            "spec": {"topicName": OFFSETS_TOPIC, "partitions": options.partitions,
                     "replicas": min(options.replicas, len(usable)), "deletionPolicy": "Retain",
                     "config": {"cleanup.policy": ["compact"], "segment.bytes": SEGMENT_BYTES}}}


def ensure_offsets_topic(kube: Kube, namespace: str, topics: Sequence[Mapping[str, Any]],
                         logdirs: Sequence[Mapping[str, Any]], options: OffsetsTopicOptions) -> Outcome:
    """Make the Topic ``desired_offsets_topic`` says is missing."""
    outcome = Outcome()
    outcome.result = "unchanged"
    desired = desired_offsets_topic(topics, logdirs, options)
    if desired is None:
        return outcome
    try:
        kube.create("Topic", namespace, desired)
    except ApiError as error:
        if error.status != 409:   # 409: made already (the watch has not shown it yet)
            raise
        return outcome
    logger.info("namespace %s: made Topic %s (%s, %d partitions × %d replicas) for consumer groups", namespace,
                OFFSETS_TOPIC_RESOURCE, OFFSETS_TOPIC, desired["spec"]["partitions"], desired["spec"]["replicas"])
    outcome.result = "created"
    outcome.writes += 1
    return outcome
