"""The replicated partitions of one engine: states from the controller in, fetchers and HW signals out.

An engine that is given a broker id takes part in replication: the controller pushes each
partition's state (Kafka's LeaderAndIsr), and this set makes the engine's replica the leader or
a follower of it; every partition it follows from one leader is fetched by that leader's one
``LeaderFetcher``, in one request per round. Partitions the controller never mentions stay
single-copy, as before.

News of a partition (a new leadership, a committed ISR change, its removal, a follower's
applied fetch) is reported through ``on_high_watermark``, and a leader's high watermark moved by a
follower's fetch through ``on_high_watermark_advanced``, so the transport can wake the acks=all
produces and the fetches waiting on it: every one on news, and on an advance only those it
concerns (the followers' own long polls read to the log end, and do not wait for it).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Mapping
from types import TracebackType
from dataclasses import dataclass, field
from typing import TypeVar

from stratalog.broker.controller import Controller
from stratalog.broker.fetcher import FetcherSettings, LeaderFetcher, LeaderSessionClient
from stratalog.broker.partition import Partition, ReplicaFetch, ReplicaFetchResult
from stratalog.broker.replica_state import PartitionState
from stratalog.broker.topics import TopicAdmin
from stratalog.common.config import EngineConfig
from stratalog.common.errors import NotLeaderOrFollowerError
from stratalog.common.names import TopicPartition
from stratalog.storage.log_manager import LogManager

T = TypeVar("T")

logger = logging.getLogger(__name__)

ClientFactory = Callable[[str], LeaderSessionClient]   # leader's endpoint → its fetch client


@dataclass
class ReplicationSettings:
    broker_id: int
    replica_lag_time_max_ms: int = 30_000
    fetcher: FetcherSettings = field(default_factory=FetcherSettings)

    @classmethod
    def from_config(cls, broker_id: int, config: EngineConfig) -> ReplicationSettings:
        """The replica.* settings of an engine's config, under Kafka's names."""
        return cls(broker_id, config.replica_lag_time_max_ms,
                   FetcherSettings(config.replica_fetch_max_bytes, config.replica_fetch_wait_max_ms,
                                   config.replica_fetch_min_bytes))


class ReplicaSet:
    def __init__(self, manager: LogManager, settings: ReplicationSettings, controller: Controller,
                 client_factory: ClientFactory, *, clock: Callable[[], int],
                 on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
                 on_high_watermark_advanced: Callable[[TopicPartition], None] | None = None,
                 may_lead: Callable[[], bool] = lambda: True) -> None:
        self.manager = manager
        self.settings = settings
        self.controller = controller
        self.client_factory = client_factory
        self.clock = clock
        self.on_high_watermark = on_high_watermark
        self.on_high_watermark_advanced = on_high_watermark_advanced or on_high_watermark
        self.may_lead = may_lead   # the engine's liveness lease (an agent's); always True without one
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[TopicPartition, LeaderFetcher] = {}        # each followed partition's fetcher
        self._by_leader: dict[tuple[int, str], LeaderFetcher] = {}      # one per leader and address
        self.endpoints: dict[int, str] = {}         # each broker's API: the leader named to misdirected clients
        self.fetch_endpoints: dict[int, str] = {}   # where followers fetch, where not the API (kafka://)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._expiry: threading.Thread | None = None
        # ISR changes proposed from fetches answered on the event loop: AlterPartition waits for the
        # controller, which must not hold up the loop (Kafka's AlterPartitionManager is asynchronous too).
        self._proposals = ThreadPoolExecutor(1, thread_name_prefix="isr-proposals")

    @property
    def broker_id(self) -> int:
        return self.settings.broker_id

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    # -- states from the controller ---------------------------------------------------------
    def apply_state(self, tp: TopicPartition, state: PartitionState, endpoints: Mapping[int, str],
                    fetch_endpoints: Mapping[int, str] | None = None) -> Partition:
        """LeaderAndIsr for one partition: create it here if needed, lead it or follow its leader.
        ``endpoints``: each broker's API; ``fetch_endpoints``: where a follower fetches from a broker
        instead (its Kafka listener), for the brokers that have one."""
        if self.broker_id not in state.replicas:
            raise NotLeaderOrFollowerError(f"{tp}: broker {self.broker_id} is not among its replicas "
                                           f"{list(state.replicas)}")
        with self._lock:
            self.endpoints.update(endpoints)
            if fetch_endpoints is not None:
                for broker in endpoints:   # a broker's word on where to fetch is replaced, not merged
                    self.fetch_endpoints.pop(broker, None)
                self.fetch_endpoints.update(fetch_endpoints)
            partition = self.partitions.get(tp)
            if partition is None:
                TopicAdmin(self.manager).ensure_partitions(tp.topic, [tp.partition])
                log = self.manager.log_of(tp)
                partition = Partition(log, self.broker_id, self.controller, clock=self.clock,
                                      replica_lag_time_max_ms=self.settings.replica_lag_time_max_ms,
                                      high_watermark=self.manager.checkpointed_high_watermarks.get(tp),
                                      may_lead=self.may_lead)
                self.partitions[tp] = partition
            before, was_leader = partition.log.high_watermark, partition.is_leader
            partition.apply_state(state)
            self._follow(tp, partition)
        # Waiters wake on any leadership news: a demoted leader's acks=all produces answer now.
        if partition.log.high_watermark != before or partition.is_leader or was_leader:
            self.on_high_watermark(tp)
        return partition

    def remove(self, tp: TopicPartition) -> None:
        """Stop replicating ``tp`` here (Kafka's StopReplica): this engine is no longer among its replicas,
        or its log is about to be deleted. No fetcher appends to it after this returns, and a produce
        still waiting on it as leader answers NOT_LEADER_OR_FOLLOWER at once."""
        with self._lock:
            self._unfollow(tp)   # no answer is applied to it after this
            partition = self.partitions.pop(tp, None)
        if partition is not None:
            partition.resign()
            self.on_high_watermark(tp)

    def remove_topic_then(self, topic: str, delete: Callable[[], T]) -> T:
        """Stop replicating every partition of ``topic`` held here, then run ``delete`` (their logs'
        deletion), both under this set's lock: a state applied in between would otherwise make a
        replica again of a log being deleted, or make the log again just after."""
        with self._lock:
            for tp in [tp for tp in self.partitions if tp.topic == topic]:
                self.remove(tp)
            return delete()

    def _unfollow(self, tp: TopicPartition) -> None:
        fetcher = self.fetchers.pop(tp, None)
        if fetcher is not None and not fetcher.drop(tp):
            del self._by_leader[(fetcher.leader, fetcher.endpoint)]
            fetcher.stop(wait=False)   # its thread ends after its round; nothing is left for it to apply

    def _applied(self, tp: TopicPartition) -> None:
        # Looked up at each call: a fetcher made before the transport attached its callback reports to it.
        self.on_high_watermark(tp)

    def _follow(self, tp: TopicPartition, partition: Partition) -> None:
        state = partition.state
        fetcher = self.fetchers.get(tp)
        wanted = None if state is None or partition.is_leader or state.leader < 0 else state.leader
        endpoint = self.fetch_endpoints.get(wanted) or self.endpoints.get(wanted) if wanted is not None else None
        if fetcher is not None and (fetcher.leader != wanted or fetcher.endpoint != endpoint or not fetcher.running):
            self._unfollow(tp)
            fetcher = None
        if fetcher is None and wanted is not None and endpoint is not None:
            fetcher = self._by_leader.get((wanted, endpoint))
            if fetcher is None or not fetcher.running:
                fetcher = self._by_leader[(wanted, endpoint)] = LeaderFetcher(
                    wanted, endpoint, self.client_factory(endpoint), self.settings.fetcher,
                    on_applied=self._applied).start()
            fetcher.add(tp, partition)
            self.fetchers[tp] = fetcher

    # -- the leader's side ------------------------------------------------------------------
    def fetch_for_follower(self, tp: TopicPartition, fetch: ReplicaFetch, *, acknowledge: bool = True
                           ) -> ReplicaFetchResult:
        """See ``Partition.fetch_for_follower``; ``acknowledge=False`` reads only, so moves nothing."""
        partition = self._replica(tp)
        if not acknowledge:
            return partition.fetch_for_follower(fetch, acknowledge=False)
        # Compared with the log, not the answer: an ISR proposal settled after the answer was
        # built (refused, or committed) may have moved the HW too, and its waiters must wake.
        with self._waking_on_high_watermark_move(tp, partition, advanced_only=True):
            return partition.fetch_for_follower(fetch)

    def try_fetch_for_follower(self, tp: TopicPartition, fetch: ReplicaFetch, *, acknowledge: bool = True
                               ) -> ReplicaFetchResult | None:
        """``fetch_for_follower`` without blocking (for the event loop), or None: see
        ``Partition.try_fetch_for_follower``. An ISR proposal goes to the proposals thread."""
        partition = self._replica(tp)
        if not acknowledge:
            read = partition.try_fetch_for_follower(fetch, acknowledge=False)
            return None if read is None else read[0]
        with self._waking_on_high_watermark_move(tp, partition, advanced_only=True):
            answer = partition.try_fetch_for_follower(fetch)
        if answer is None:
            return None
        result, proposal = answer
        if proposal is not None:
            self._proposals.submit(self._propose, tp, partition, proposal)
        return result

    def _propose(self, tp: TopicPartition, partition: Partition, proposal: Callable[[], None]) -> None:
        with self._waking_on_high_watermark_move(tp, partition):
            try:
                proposal()
            except Exception:  # noqa: BLE001 - one failed proposal must not end the thread's work
                logger.exception("%s: ISR proposal failed", tp)

    def expire_lagging_followers(self) -> None:
        """Kafka's isr-expiration task: every leader drops the followers that fell behind."""
        for tp, partition in list(self.partitions.items()):
            with self._waking_on_high_watermark_move(tp, partition):
                partition.maybe_shrink_isr()

    def _replica(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise NotLeaderOrFollowerError(f"replica fetch from {tp}: broker {self.broker_id} has no replica of it")
        return partition

    def _waking_on_high_watermark_move(self, tp: TopicPartition, partition: Partition, *,
                                       advanced_only: bool = False) -> _WakingOnHighWatermarkMove:
        """Wakes the acks=all produces and fetches waiting on ``tp`` if the block moved its high watermark.
        ``advanced_only``: the block changes nothing a waiter the HW did not pass must hear of (a
        follower's fetch: the only ISR change it proposes is the follower joining)."""
        wake = self.on_high_watermark_advanced if advanced_only else self.on_high_watermark
        return _WakingOnHighWatermarkMove(tp, partition, wake)

    def take_over_logs(self) -> None:
        """From now on every log of this engine belongs to replication: until the controller's state
        for it arrives it serves nothing (``ReplicaManager`` refuses it), and its high watermark is
        the checkpointed one, never its log end (what only this copy has is not committed)."""
        for tp, log in self.manager.logs().items():
            if tp not in self.partitions:
                log.hw_follows_leo = False
                log.set_high_watermark(self.manager.checkpointed_high_watermarks.get(tp, 0))

    def start(self) -> ReplicaSet:
        self.take_over_logs()
        interval = self.settings.replica_lag_time_max_ms / 2000

        def run() -> None:
            while not self._stop.wait(interval):
                try:
                    self.expire_lagging_followers()
                except Exception:  # noqa: BLE001 - the task must outlive one failed proposal
                    logger.exception("ISR expiration failed")

        self._expiry = threading.Thread(target=run, name="isr-expiration", daemon=True)
        self._expiry.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            fetchers = list(self._by_leader.values())
            self.fetchers, self._by_leader = {}, {}
        for fetcher in fetchers:   # all told first, then each joined: their rounds end together
            fetcher.stop(wait=False)
        for fetcher in fetchers:
            fetcher.stop()
        if self._expiry is not None:
            self._expiry.join(timeout=5)
        self._proposals.shutdown(wait=False, cancel_futures=True)


class _WakingOnHighWatermarkMove:
    """``ReplicaSet._waking_on_high_watermark_move``'s context: a class, not a generator, as every
    follower's round enters one (a generator context costs it a few microseconds more)."""

    __slots__ = ("tp", "partition", "wake", "before")

    def __init__(self, tp: TopicPartition, partition: Partition, wake: Callable[[TopicPartition], None]) -> None:
        self.tp, self.partition, self.wake = tp, partition, wake
        self.before = partition.log.high_watermark

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
                 ) -> None:
        if self.partition.log.high_watermark != self.before:
            self.wake(self.tp)
