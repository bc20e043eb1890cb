"""The cluster as an agent's Kafka listener describes it to clients, from the Topic resources and
the agents' Leases (the engine's ``ClusterView``; Kafka's ``MetadataCache``, fed by the operator).

Every agent of a namespace tells the same story, read from what every agent already watches:

* the brokers are the LogDirs whose agents hold a live Lease advertising a Kafka listener
  (``stratalog.io/kafka-advertised``), each under its broker id (``replica_records.broker_id``);
* the topics are the Topics of the namespace, by their Kafka names, and each partition's leader,
  leader epoch, replicas and ISR are its record in the Topic's status, as the controller and the
  leaders' ISR changes wrote it. A leader that lists no listener now is no leader to a client
  (LEADER_NOT_AVAILABLE: it retries, as while Kafka elects); a Topic without records yet is
  LEADER_NOT_AVAILABLE as a whole, as a topic still being created is in Kafka;
* topics are administered through their Topic resources only, so CreateTopics and the like are
  refused with the resource to edit;
* a group's coordinator is the leader of its partition of ``__consumer_offsets``, a Topic the
  controller makes when an agent first asks for it (``request_offsets_topic``, at the first
  FindCoordinator, as Kafka makes it); until it is made and led, FindCoordinator answers
  COORDINATOR_NOT_AVAILABLE and clients retry.

Nothing here does I/O: the Topic bodies are the agent's watch cache, and the listeners are the
replica driver's last Lease read (every second).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, partition_for
from stratalog.common.errors import StratalogError, UnknownTopicOrPartitionError
from stratalog.server.kafka.cluster import CoordinatorNotAvailable, Node, PartitionView

from ..election import records_of
from ..names import GROUP, VERSION, is_unmanaged
from ..properties import topic_overrides
from ..replica_records import broker_id, broker_ids
from .placement import effective_name

__all__ = ["AgentCluster", "LeaderNotAvailable"]

Json = dict[str, Any]


class LeaderNotAvailable(StratalogError):
    """A Topic whose partitions have no records yet (the controller has not placed them)."""

    code = "LEADER_NOT_AVAILABLE"


class AgentCluster:
    def __init__(self, namespace: str, logdir: str, own_listener: tuple[str, int], topics: Mapping[str, Json],
                 listeners: Callable[[], Mapping[str, tuple[str, int]]],
                 request_offsets_topic: Callable[[], None] = lambda: None,
                 topic_defaults: Callable[[], Mapping[str, str]] = dict) -> None:
        self.namespace = namespace
        self.logdir = logdir
        self.cluster_id = f"stratalog.{namespace}"
        self.own_listener = own_listener
        self.topics = topics          # the agent's watched Topic bodies, by object name
        self.listeners = listeners    # live LogDir -> its advertised Kafka listener
        self.request_offsets_topic = request_offsets_topic
        self.topic_defaults = topic_defaults   # this LogDir's spec.topicDefaults

    def _listeners(self) -> dict[str, tuple[str, int]]:
        return {**self.listeners(), self.logdir: self.own_listener}   # this one, even before its Lease is read

    def nodes(self) -> list[Node]:
        return sorted((Node(broker_id(name), host, port) for name, (host, port) in self._listeners().items()),
                      key=lambda n: n.node_id)

    def controller_id(self) -> int:
        # The controller is the operator, which clients cannot reach; this engine answers the
        # administration requests Kafka clients send the controller (refusing them with the resource).
        return broker_id(self.logdir)

    def _bodies(self) -> list[Json]:
        out = []
        for body in list(self.topics.values()):   # a snapshot: the event loop updates the dict
            meta = body.get("metadata") or {}
            if not meta.get("deletionTimestamp") and not is_unmanaged(meta):
                out.append(body)
        return out

    def _body(self, topic: str) -> Json | None:
        found = [b for b in self._bodies() if effective_name(b) == topic]
        # Two resources naming one Kafka topic: the one the controller placed (it refuses the other).
        found.sort(key=lambda b: not records_of(b))
        return found[0] if found else None

    def topic_names(self) -> list[str]:
        return sorted({effective_name(b) for b in self._bodies()})

    def partitions(self, topic: str) -> list[PartitionView]:
        body = self._body(topic)
        if body is None:
            raise UnknownTopicOrPartitionError(f"no Topic in namespace {self.namespace} is named {topic!r}")
        records = records_of(body)
        if not records:
            raise LeaderNotAvailable(f"topic {topic!r}: its partitions are not placed on LogDirs yet")
        listed = set(self._listeners())
        out = []
        for number, record in sorted(records.items()):
            try:
                ids = broker_ids(record.replicas)
            except ValueError:
                out.append(PartitionView(number, -1, -1, (), (), "LEADER_NOT_AVAILABLE"))
                continue
            replicas = tuple(ids[r] for r in record.replicas)
            isr = tuple(ids[r] for r in record.isr if r in ids)
            if record.leader is None or record.leader not in listed or record.leader not in ids:
                out.append(PartitionView(number, -1, record.leader_epoch, replicas, isr, "LEADER_NOT_AVAILABLE"))
            else:
                out.append(PartitionView(number, ids[record.leader], record.leader_epoch, replicas, isr))
        return out

    def offsets_partitions(self) -> int | None:
        """How many partitions ``__consumer_offsets`` has; None until its Topic is made and placed."""
        body = self._body(OFFSETS_TOPIC)
        return len(records_of(body)) or None if body is not None else None

    def group_coordinator(self, group_id: str) -> Node:
        count = self.offsets_partitions()
        if count is None:
            self.request_offsets_topic()
            raise CoordinatorNotAvailable(f"group {group_id!r}: {OFFSETS_TOPIC} is not made in namespace "
                                          f"{self.namespace} yet (the operator is asked to make it)")
        partition = partition_for(group_id, count)
        (view,) = [p for p in self.partitions(OFFSETS_TOPIC) if p.partition == partition]
        node = next((n for n in self.nodes() if n.node_id == view.leader), None)
        if node is None:
            raise CoordinatorNotAvailable(f"group {group_id!r}: {OFFSETS_TOPIC} partition {partition} has no "
                                          "leader reachable now")
        return node

    def topic_overrides(self, topic: str) -> dict[str, str] | None:
        """A Topic's config over this LogDir's topic defaults, as its agents apply it."""
        body = self._body(topic)
        if body is None:
            return None
        return {**self.topic_defaults(), **topic_overrides((body.get("spec") or {}).get("config"),
                                                           where=f"Topic {body['metadata']['name']} spec.config")}

    def administered_elsewhere(self, topic: str) -> str | None:
        body = self._body(topic)
        if body is not None:
            name = body["metadata"]["name"]
            return (f"topic {topic!r} is the Topic resource {self.namespace}/{name}: change it there "
                    f"(kubectl edit topics.{GROUP} {name} -n {self.namespace})")
        return (f"topics of namespace {self.namespace} are Topic resources: create one "
                f"(apiVersion: {GROUP}/{VERSION}, kind: Topic, spec.topicName: {topic}) to create topic {topic!r}")
