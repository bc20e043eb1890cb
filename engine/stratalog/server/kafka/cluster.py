"""Who the cluster is, as Kafka clients see it: its brokers, each partition's leader and ISR, and
where a group is coordinated (Kafka's ``MetadataCache``).

Metadata, DescribeCluster and FindCoordinator answer from a ``ClusterView``, and the
administration APIs ask it whether topics are administered here at all. ``stratalog serve`` is a
cluster of one (``LocalCluster``): it lists itself, leads every partition it holds (or follows the
state its replication controller gave it), coordinates every group, and administers its topics.
An agent on Kubernetes is given a view built by the operator from the Topic resources and the
agents' Leases: every engine of the namespace, every Topic's partitions, and the Topic resources
as the only place topics are administered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition

if TYPE_CHECKING:
    from stratalog.server.kafka.context import KafkaContext

CLUSTER_ID = "stratalog"   # one engine is its own cluster


@dataclass(frozen=True)
class Node:
    """A broker as clients reach it: its id and advertised Kafka address."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionView:
    """One partition as Metadata describes it; ``error`` is a Kafka error name (NONE when served)."""

    partition: int
    leader: int                 # -1: no leader now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str = "NONE"


class CoordinatorNotAvailable(StratalogError):
    """No broker coordinates the group now (its offsets partition has no reachable leader, or the
    offsets topic is not made yet): clients retry, as Kafka's do."""

    code = "COORDINATOR_NOT_AVAILABLE"


class AdministeredElsewhere(StratalogError):
    """A topic change asked of an engine whose topics are administered elsewhere (Topic resources)."""

    code = "POLICY_VIOLATION"


class ClusterView(Protocol):
    """What the listener tells clients about the cluster. Calls may block (they run on the pool)."""

    cluster_id: str

    def nodes(self) -> list[Node]:
        """The brokers clients may connect to, this one included."""

    def controller_id(self) -> int: ...

    def topic_names(self) -> list[str]: ...

    def partitions(self, topic: str) -> list[PartitionView]:
        """Every partition of ``topic``; a StratalogError (its code is the topic's error) if it has none."""

    def group_coordinator(self, group_id: str) -> Node:
        """The broker coordinating ``group_id``; a StratalogError saying why there is none."""

    def administered_elsewhere(self, topic: str) -> str | None:
        """Why topics cannot be created, deleted, grown or reconfigured here; None when they can."""

    def topic_overrides(self, topic: str) -> dict[str, str] | None:
        """The config overrides of a topic of the cluster this engine holds no replica of, as the
        cluster records them (DescribeConfigs is answered by any broker); None if it knows none."""


class LocalCluster:
    """``stratalog serve``: one engine, which is the whole cluster."""

    cluster_id = CLUSTER_ID

    def __init__(self, ctx: KafkaContext) -> None:
        self.ctx = ctx   # read at each call: the advertised address is known only once listening

    def _self(self) -> Node:
        return Node(self.ctx.node_id, self.ctx.advertised_host, self.ctx.advertised_port)

    def nodes(self) -> list[Node]:
        return [self._self()]

    def controller_id(self) -> int:
        return self.ctx.node_id

    def topic_names(self) -> list[str]:
        return self.ctx.engine.manager.topics()

    def partitions(self, topic: str) -> list[PartitionView]:
        description = self.ctx.broker.topics.describe_topic(topic)
        return [self._partition(TopicPartition(topic, p)) for p in description.partitions]

    def _partition(self, tp: TopicPartition) -> PartitionView:
        me = self.ctx.node_id
        if self.ctx.broker.replicas is None:
            return PartitionView(tp.partition, me, 0, (me,), (me,))
        partition = self.ctx.broker.replicas.get(tp)
        state = partition.state if partition is not None else None
        if state is None:   # the controller has not spoken of it yet
            return PartitionView(tp.partition, -1, -1, (), (), "LEADER_NOT_AVAILABLE")
        return PartitionView(tp.partition, state.leader, state.leader_epoch, tuple(state.replicas), tuple(state.isr))

    def group_coordinator(self, group_id: str) -> Node:
        return self._self()

    def administered_elsewhere(self, topic: str) -> str | None:
        return None

    def topic_overrides(self, topic: str) -> dict[str, str] | None:
        return None   # every topic of a lone engine is held here
