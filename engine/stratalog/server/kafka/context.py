"""What every Kafka API handler needs: the broker layer and how this engine is reached."""

from __future__ import annotations

from dataclasses import dataclass

from stratalog.broker.engine import Engine
from stratalog.broker.groups.coordinator import GroupCoordinator
from stratalog.broker.producer_ids import ProducerIdAllocator
from stratalog.broker.replica_manager import ReplicaManager
from stratalog.server.access.model import OPEN, AccessControl

CLUSTER_ID = "stratalog"   # one engine is its own cluster until the operator names one


@dataclass
class KafkaContext:
    broker: ReplicaManager
    engine: Engine
    node_id: int                # the broker id in Metadata: --broker-id, or 0 for a lone engine
    advertised_host: str        # where clients reach this listener (Metadata's broker address)
    advertised_port: int
    max_fetch_wait_ms: int      # the upper bound of a fetch's long poll
    producer_ids: ProducerIdAllocator
    groups: GroupCoordinator
    access: AccessControl = OPEN
