"""A follower's fetch loop (Kafka's ``ReplicaFetcherThread``): one thread per leader, for all its partitions.

Each round asks the leader, in one request, for what follows the log end of every partition
this engine follows there, each with its last fetched epoch, and hands each answer to its
``Partition``: append and follow the leader's marks, or truncate on divergence or out-of-range
and ask again. The leader holds a round that finds nothing new for up to
``replica.fetch.wait.max.ms``, so idle partitions cost one request per wait for all of them,
not one each: with hundreds of followed partitions a thread and a long poll per partition
would cost more than the data.

The transport is injected (``LeaderSessionClient``), so this layer knows no HTTP. An error for
one partition (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH: the leadership moved) leaves
the others alone; an unreachable leader backs the whole round off. The controller's next state
moves a partition to the fetcher of its new leader (``ReplicaSet``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stratalog.broker.partition import Partition, ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition

logger = logging.getLogger(__name__)

# (the partitions' fetches, max wait ms, min bytes, max bytes) → each partition's answer or error, in order
LeaderSessionClient = Callable[[Sequence[tuple[TopicPartition, ReplicaFetch]], int, int, int],
                               Sequence["ReplicaFetchResult | StratalogError"]]


@dataclass(frozen=True)
class FetcherSettings:
    max_bytes: int = 1 << 20        # replica.fetch.max.bytes (per partition)
    max_wait_ms: int = 500          # replica.fetch.wait.max.ms
    min_bytes: int = 1              # replica.fetch.min.bytes
    backoff_s: float = 0.1          # after an error (Kafka's replica.fetch.backoff.ms is 1 s)
    response_max_bytes: int = 10 << 20   # replica.fetch.response.max.bytes


class LeaderFetcher:
    def __init__(self, leader: int, endpoint: str, client: LeaderSessionClient, settings: FetcherSettings,
                 *, on_applied: Callable[[TopicPartition], None] = lambda tp: None) -> None:
        self.leader = leader
        self.endpoint = endpoint   # where the leader is; a new address gets a new fetcher
        self.client = client
        self.settings = settings
        self.on_applied = on_applied
        self.partitions: dict[TopicPartition, Partition] = {}
        self._lock = threading.Lock()        # the partition set
        self._applying = threading.Lock()    # held while a round's answers are applied
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"replica-fetcher-from-{leader}")
        self.fetches = 0
        self.errors = 0

    def start(self) -> LeaderFetcher:
        self._thread.start()
        return self

    def add(self, tp: TopicPartition, partition: Partition) -> None:
        with self._lock:
            self.partitions[tp] = partition
        self._changed.set()

    def drop(self, tp: TopicPartition) -> bool:
        """Stop fetching ``tp``; once this returns no answer is applied to it. Whether any partition is left."""
        with self._lock:
            self.partitions.pop(tp, None)
            left = bool(self.partitions)
        with self._applying:   # a round applying right now finishes first; later ones skip tp
            pass
        return left

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        self._changed.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.settings.max_wait_ms / 1000 + 10)

    def _close_client(self) -> None:
        close = getattr(self.client, "close", None)   # a client that keeps a connection open
        if close is not None:
            close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def follows(self, tp: TopicPartition) -> bool:
        return tp in self.partitions and self.running

    def _round(self) -> list[tuple[TopicPartition, ReplicaFetch]]:
        with self._lock:
            followed = list(self.partitions.items())
        fetches = []
        for tp, partition in followed:
            state = partition.state
            if state is None or state.leader != self.leader or partition.is_leader:
                continue   # the leadership moved: the replica set hands it to another fetcher
            try:
                fetches.append((tp, partition.next_fetch(self.settings.max_bytes)))
            except StratalogError:
                continue
        return fetches

    def _run(self) -> None:
        try:
            self._rounds()
        finally:
            self._close_client()   # on its own thread: a round in flight is not cut from another

    def _rounds(self) -> None:
        while not self._stop.is_set():
            fetches = self._round()
            if not fetches:
                self._changed.wait(self.settings.max_wait_ms / 1000)
                self._changed.clear()
                continue
            try:
                answers = self.client(fetches, self.settings.max_wait_ms, self.settings.min_bytes,
                                      self.settings.response_max_bytes)
            except (StratalogError, OSError) as error:
                self.errors += 1
                logger.debug("replica fetch from %d at %s failed: %s", self.leader, self.endpoint, error)
                self._stop.wait(self.settings.backoff_s)
                continue
            except Exception:   # noqa: BLE001 - a bug of a client's: this round fails, the fetcher goes on
                self.errors += 1
                logger.exception("replica fetch from %d at %s failed unexpectedly", self.leader, self.endpoint)
                self._stop.wait(self.settings.backoff_s)
                continue
            if self._stop.is_set():
                return
            self.fetches += 1
            failed = self._apply(fetches, answers)
            if failed == len(fetches):
                self._stop.wait(self.settings.backoff_s)

    def _apply(self, fetches: list[tuple[TopicPartition, ReplicaFetch]],
               answers: Sequence[ReplicaFetchResult | StratalogError]) -> int:
        failed = 0
        with self._applying:
            for (tp, fetch), answer in zip(fetches, answers):
                partition = self.partitions.get(tp)
                if partition is None:
                    continue   # dropped while the round was out
                if isinstance(answer, StratalogError):
                    failed += 1
                    logger.debug("replica fetch of %s from %d: %s", tp, self.leader, answer)
                    continue
                try:
                    partition.apply_fetch(fetch, answer)   # dropped if it no longer matches the replica
                except (StratalogError, OSError) as error:
                    failed += 1
                    self.errors += 1
                    logger.debug("applying the fetch of %s from %d failed: %s", tp, self.leader, error)
                    continue
                self.on_applied(tp)
        return failed
