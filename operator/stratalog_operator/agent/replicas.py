"""The agent's half of replication: partition records in the Topic's status drive the engine's replicas.

The controller decides leaders (``controller.leadership``); this module makes the embedded
engine act on what it decided. On every Topic event, and at least every second, it reads each
partition record naming this LogDir and hands the engine its state (Kafka's LeaderAndIsr): lead
at that epoch, or follow that leader, whose address comes from the Lease its agent advertises.

ISR changes go the other way: the leader's engine proposes (Kafka's AlterPartition) and *this
agent* commits the proposal itself, by compare-and-swap on the Topic's ``resourceVersion``,
rather than asking the controller to. The API server is already the single writer that orders
every change; an extra hop through the controller would add latency to every ISR expansion
(which is what lets ``acks=all`` go on after a follower returns), and would make ISR changes
stop whenever the controller is down, without making them any safer: the partition-epoch check
in ``replica_records.alter_isr`` plus the CAS is what fences a stale proposal, wherever it runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Protocol

from stratalog.broker.replica_state import PartitionState
from stratalog.broker.replication import ReplicaSet
from stratalog.common.errors import IneligibleReplicaError, UnknownTopicOrPartitionError
from stratalog.common.names import TopicPartition

from ..controller.leadership import CAS_ATTEMPTS
from ..election import PartitionRecord, records_of, render_records
from ..kube import ApiError, Kube
from ..leases import AGENT_LEASE_SELECTOR, alive_logdirs, kafka_addresses, rejoining, shutting_down
from ..names import is_paused, is_unmanaged
from ..replica_records import advertised_urls, alter_isr, broker_id, engine_state, replication_endpoints
from .lease import AgentLease
from .placement import effective_name

__all__ = ["KubeAlterPartition", "ReplicaDriver", "SYNC_INTERVAL_S"]

logger = logging.getLogger("stratalog.agent")

SYNC_INTERVAL_S = 1.0
Json = dict[str, Any]


class KubeAlterPartition:
    """The engine's ``Controller``: an ISR change is committed into the Topic's status by CAS."""

    def __init__(self, kube: Kube, namespace: str, owner_of: Callable[[str], Json | None],
                 alive: Callable[[], set[str]]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.owner_of = owner_of     # Kafka topic name → the Topic object holding it here
        self.alive = alive           # LogDirs whose agents hold a live Lease, as last read

    def alter_partition(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
                        partition_epoch: int) -> PartitionState:
        owner = self.owner_of(tp.topic)
        if owner is None:
            raise UnknownTopicOrPartitionError(f"{tp}: no Topic in {self.namespace} holds it here")
        name = owner["metadata"]["name"]
        # A follower without a live Lease (or shutting down) may go on fetching, and so be proposed
        # on every fetch: refuse it here from the last Lease read, without a request per fetch.
        unknown = set(isr) - {broker_id(n) for n in self.alive()}
        if unknown and not self._held(tp, unknown):
            raise IneligibleReplicaError(f"{tp}: brokers {sorted(unknown)} hold no live Lease (or are shutting "
                                         "down); they cannot join the ISR")
        for _ in range(CAS_ATTEMPTS):
            body = self.kube.get("Topic", self.namespace, name)
            records = records_of(body or {})
            if body is None or tp.partition not in records:
                raise UnknownTopicOrPartitionError(f"{tp}: Topic {self.namespace}/{name} has no record of it")
            after = alter_isr(records[tp.partition], leader, leader_epoch, isr, partition_epoch, self.alive())
            records[tp.partition] = after
            patch = {"metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
                     "status": {"partitions": render_records(records),
                                "underReplicatedPartitions": sum(len(r.isr) < len(r.replicas)
                                                                 for r in records.values())}}
            try:
                self.kube.patch("Topic", self.namespace, name, patch, subresource="status")
            except ApiError as error:
                if error.status == 409:
                    continue   # the Topic moved on (figures, another record): check the proposal again
                raise
            logger.info("%s: ISR committed %s (partition epoch %d)", tp, list(after.isr), after.partition_epoch)
            return engine_state(after)
        raise OSError(f"{tp}: AlterPartition still conflicting after {CAS_ATTEMPTS} attempts")

    def _held(self, tp: TopicPartition, replicas: set[int]) -> bool:
        """Whether ``replicas`` are all in the ISR already (by the watched record): staying is no joining."""
        owner = self.owner_of(tp.topic)
        record = records_of(owner or {}).get(tp.partition)
        return record is not None and replicas <= {broker_id(r) for r in record.isr}


class Registrations(Protocol):
    """The agent's Lease, as the driver sees it (``AgentLease``)."""

    registration: int
    rejoining: bool

    def confirm(self, registration: int) -> None: ...

    def rejoined(self) -> None: ...


class ReplicaDriver:
    """Keeps the engine's replicas in step with the records (a thread; woken by Topic events)."""

    def __init__(self, kube: Kube, namespace: str, logdir: str, replicas: ReplicaSet,
                 topics: Mapping[str, Json], lock: threading.Lock, lease: Registrations) -> None:
        self.kube = kube
        self.lease = lease
        self.namespace = namespace
        self.logdir = logdir
        self.replicas = replicas
        self.topics = topics          # the agent's latest Topic bodies, by object name
        self.lock = lock              # the agent's: no state is applied while a reconcile deletes
        self.alive: set[str] = set()
        self.endpoints: dict[int, str] = {}         # each engine's API (misdirected clients are sent there)
        self.fetch_endpoints: dict[int, str] = {}   # its Kafka listener, where followers fetch (if it runs one)
        self.kafka_listeners: dict[str, tuple[str, int]] = {}   # live LogDir -> its Kafka listener
        self._confirmed = -1
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        self._wake.set()

    def read_leases(self) -> None:
        leases = self.kube.list("Lease", self.namespace, label_selector=AGENT_LEASE_SELECTOR)
        now = datetime.now(timezone.utc)
        # Eligible for the ISR: a live Lease and not in a controlled shutdown (KIP-841).
        self.alive = alive_logdirs(leases, now) - shutting_down(leases) - rejoining(leases)
        # Listed to Kafka clients: every live agent with a listener, shutting down or not (it still serves).
        self.kafka_listeners = kafka_addresses(leases, now)
        self.endpoints = {broker_id(n): url for n, url in advertised_urls(leases).items()}
        self.fetch_endpoints = {broker_id(n): url for n, url in replication_endpoints(leases).items()}

    def leading(self, bodies: list[Json]) -> list[TopicPartition]:
        """The partitions whose records in ``bodies`` name this LogDir their leader."""
        return [tp for tp, r in _managed_records(bodies) if r.leader == self.logdir]

    def controlled_shutdown(self, lease: AgentLease, timeout_s: float) -> list[TopicPartition]:
        """Kafka's controlled shutdown: ask the controller to move every leadership away and wait
        (following the records as they change) until none is left here, or the time is up; what
        is still led here then."""
        if not lease.leave():
            return self.leading(self.kube.list("Topic", self.namespace))
        deadline = time.monotonic() + timeout_s
        while True:
            # The watch is stopped by now: one read of the records per round, followed and checked.
            bodies = self.kube.list("Topic", self.namespace)
            self.sync_once(bodies)
            still = self.leading(bodies)
            if not still or time.monotonic() >= deadline:
                return still
            time.sleep(0.2)

    def sync_once(self, listed: list[Json] | None = None) -> int:
        """Apply every record naming this LogDir whose state the engine lacks; how many were applied.

        Under a new Lease registration (the first, or after a lapse) the Topics are listed afresh
        rather than taken from the watch, which may lag, and only then may the engine lead again.
        ``listed``: Topics the caller has just listed from the API (they count as a fresh read).
        """
        registration = self.lease.registration
        # Rejoining, too, reads the records afresh: the watch may not run yet, and they must show the move.
        fresh = listed is not None or registration != self._confirmed or self.lease.rejoining
        self.read_leases()
        if listed is not None:
            bodies = listed
        elif fresh:
            bodies = self.kube.list("Topic", self.namespace)
        else:
            bodies = list(self.topics.values())
        applied = 0
        with self.lock:
            logs = self.replicas.manager.logs()
            for body in bodies:
                if (body.get("metadata") or {}).get("deletionTimestamp"):
                    continue
                name = effective_name(body)
                for record in records_of(body).values():
                    tp = TopicPartition(name, record.partition)
                    if self.logdir not in record.replicas:
                        if self.replicas.get(tp) is not None:
                            self.replicas.remove(tp)   # moved away (reassigned): no longer a replica here
                        continue
                    if tp not in logs:
                        continue   # not created here yet (the reconcile comes first)
                    try:
                        state = engine_state(record)
                    except ValueError as error:
                        logger.error("%s: %s", tp, error)
                        continue
                    if self._current(tp, state):
                        continue
                    try:
                        self.replicas.apply_state(tp, state, self.endpoints, self.fetch_endpoints)
                    except Exception as error:  # noqa: BLE001 - the others must not wait on this one
                        logger.warning("%s: cannot apply %s: %s", tp, state, error)
                        continue
                    applied += 1
        if fresh:
            self.lease.confirm(registration)
            self._confirmed = registration
        if self.lease.rejoining and not self._held(bodies):
            self.lease.rejoined()
            logger.info("LogDir %s: rejoined: its earlier leaderships and ISR places have moved; it follows "
                        "until it is in sync again", self.logdir)
        return applied

    def _held(self, bodies: list[Json]) -> list[TopicPartition]:
        """The partitions whose records still name this LogDir leader, or in sync under a leader."""
        return [tp for tp, r in _managed_records(bodies)
                if r.leader == self.logdir or (r.leader is not None and self.logdir in r.isr)]

    def serving(self) -> bool:
        """Rejoined, and no record that counts this LogDir in sync is left without a leader (read now)."""
        if self.lease.rejoining:
            return False
        bodies = self.kube.list("Topic", self.namespace)
        self.sync_once(bodies)
        return not any(r.leader is None and self.logdir in r.isr for _, r in _managed_records(bodies))

    def _current(self, tp: TopicPartition, state: PartitionState) -> bool:
        """Whether the engine already acts on ``state`` (and follows the leader at its address)."""
        partition = self.replicas.get(tp)
        if partition is None or partition.state != state:
            return False
        if state.leader < 0 or state.leader == self.replicas.broker_id:
            return True
        fetcher = self.replicas.fetchers.get(tp)
        endpoint = self.fetch_endpoints.get(state.leader) or self.endpoints.get(state.leader)
        return fetcher is not None and fetcher.running and fetcher.endpoint == endpoint

    def start(self) -> ReplicaDriver:
        def run() -> None:
            while not self._stop.is_set():
                self._wake.wait(SYNC_INTERVAL_S)
                self._wake.clear()
                if self._stop.is_set():
                    return
                try:
                    self.sync_once()
                except Exception as error:  # noqa: BLE001 - the next round tries again
                    logger.warning("LogDir %s: replica sync failed: %s", self.logdir, error)

        self._thread = threading.Thread(target=run, name=f"replicas-{self.logdir}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _managed_records(bodies: list[Json]) -> Iterator[tuple[TopicPartition, PartitionRecord]]:
    """The partition records of the Topics the controller keeps (not paused, unmanaged or being
    deleted): waiting on a move anywhere else would only time out."""
    for body in bodies:
        meta = body.get("metadata") or {}
        if is_paused(meta) or is_unmanaged(meta) or meta.get("deletionTimestamp"):
            continue
        name = effective_name(body)
        for record in records_of(body).values():
            yield TopicPartition(name, record.partition), record
