"""A follower's fetch loop (Kafka's ``ReplicaFetcherThread``, one per followed partition here).

It asks the leader for what follows its log end, with its last fetched epoch, and hands the
answer to its ``Partition``: append and follow the leader's marks, or truncate on divergence
or out-of-range and ask again. The leader holds a fetch that finds nothing new for up to
``replica.fetch.wait.max.ms``, so an idle partition costs one request per wait.

The transport is injected (``LeaderClient``), so this layer knows no HTTP. Errors that say the
leadership moved (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH) or that the leader is
unreachable back off and retry; the controller's next state restarts the loop at the new leader.
Kafka runs one thread per source broker for many partitions; one per partition is simpler and
enough at the partition counts an engine holds here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from stratalog.broker.partition import Partition, ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError

logger = logging.getLogger(__name__)

LeaderClient = Callable[[ReplicaFetch, int, int], ReplicaFetchResult]   # (fetch, max wait ms, min bytes)


@dataclass(frozen=True)
class FetcherSettings:
    max_bytes: int = 1 << 20        # replica.fetch.max.bytes
    max_wait_ms: int = 500          # replica.fetch.wait.max.ms
    min_bytes: int = 1              # replica.fetch.min.bytes
    backoff_s: float = 0.1          # after an error (Kafka's replica.fetch.backoff.ms is 1 s)


class ReplicaFetcher:
    def __init__(self, partition: Partition, leader: int, client: LeaderClient, settings: FetcherSettings,
                 *, endpoint: str | None = None, on_applied: Callable[[], None] = lambda: None) -> None:
        self.partition = partition
        self.leader = leader
        self.endpoint = endpoint   # where the leader was when this fetcher started (a new address: a new fetcher)
        self.client = client
        self.settings = settings
        self.on_applied = on_applied
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"replica-fetcher-{partition.log.topic_partition}-from-{leader}")
        self.fetches = 0
        self.errors = 0

    def start(self) -> ReplicaFetcher:
        self._thread.start()
        return self

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.settings.max_wait_ms / 1000 + 10)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def _run(self) -> None:
        partition = self.partition
        while not self._stop.is_set():
            state = partition.state
            if state is None or state.leader != self.leader or partition.is_leader:
                return  # leadership moved: the replica set starts a fetcher for the new leader
            try:
                fetch = partition.next_fetch(self.settings.max_bytes)
                result = self.client(fetch, self.settings.max_wait_ms, self.settings.min_bytes)
                if self._stop.is_set():
                    return
                partition.apply_fetch(fetch, result)   # dropped if it no longer matches the replica
                self.fetches += 1
                self.on_applied()
            except (StratalogError, OSError) as error:
                self.errors += 1
                logger.debug("replica fetch of %s from %d failed: %s", partition.log.topic_partition,
                             self.leader, error)
                self._stop.wait(self.settings.backoff_s)
