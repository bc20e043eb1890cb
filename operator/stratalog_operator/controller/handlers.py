"""kopf wiring of the controller: indexes, watch-event handlers, retries and a periodic resync.

Why level-triggered (``on.event`` plus indexes) rather than kopf's create/update/delete
handlers: each reconcile recomputes the whole desired state from the object and its
namespace's indexes, so a restarted controller simply reconciles everything it lists and
converges, and it needs neither kopf's diff-base nor progress annotations (no writes of
its own bookkeeping into users' objects). kopf guarantees the indexes are complete
before the first handler runs, so a Topic is never judged against half the LogDirs.

Reconcilers are blocking (the Kubernetes client) and run one at a time on one worker
thread: a LogDir change that re-reconciles its namespace's Topics can never race with a
Topic's own reconcile.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import kopf

from ..children import AgentOptions
from ..kube import Kube
from ..leases import AGENT_LEASE_SELECTOR, alive_logdirs, rejoining, shutting_down
from ..metrics import OperatorMetrics
from ..names import GROUP, LABEL_LOGDIR, LABEL_MANAGED_BY, LOGDIRS, TOPICS, VERSION, is_paused, is_unmanaged
from ..outcome import Outcome
from ..election import records_of
from .leadership import elect_topic, post_election_event
from .logdirs import reconcile_logdir
from .offsets_topic import OffsetsTopicOptions, ensure_offsets_topic
from .topics import effective_name, reconcile_topic

__all__ = ["Controller"]

logger = logging.getLogger("stratalog.operator")

Json = dict[str, Any]
Key = tuple[str, str, str]   # kind, namespace, name


def _plain(body: Mapping[str, Any]) -> Json:
    return copy.deepcopy(dict(body))


class Controller:
    def __init__(self, kube: Kube, options: AgentOptions, metrics: OperatorMetrics, *,
                 resync_seconds: float = 300.0, election_seconds: float = 1.0,
                 offsets_topic: OffsetsTopicOptions = OffsetsTopicOptions()) -> None:
        self.kube = kube
        self.offsets_topic = offsets_topic
        self.election_seconds = election_seconds
        self._election_task: asyncio.Task[None] | None = None
        self.options = options
        self.metrics = metrics
        self.resync_seconds = resync_seconds
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="stratalog-reconcile")
        self.logdirs: dict[Key, Json] = {}
        self.topics: dict[Key, Json] = {}
        self._fingerprints: dict[str, object] = {}
        self._retries: dict[Key, asyncio.Task[None]] = {}
        self._resync_task: asyncio.Task[None] | None = None
        self._attempts: dict[Key, int] = {}

    # -- state from the indexes ---------------------------------------------------------------
    def _in(self, store: Mapping[Key, Json], namespace: str) -> list[Json]:
        return [b for (_, ns, _), b in sorted(store.items()) if ns == namespace]

    def _logdir_fingerprint(self, namespace: str) -> object:
        # What Topic assignment depends on: which LogDirs exist, their labels, and whether usable.
        return tuple((d["metadata"]["name"], tuple(sorted((d["metadata"].get("labels") or {}).items())),
                      bool(d["metadata"].get("deletionTimestamp")),
                      (d["metadata"].get("annotations") or {}).get(f"{GROUP}/managed"))
                     for d in self._in(self.logdirs, namespace))

    # -- running reconciles -------------------------------------------------------------------
    async def _run(self, key: Key, fn: Callable[[], Outcome]) -> None:
        kind = key[0]
        loop = asyncio.get_running_loop()
        try:
            with self.metrics.reconcile_seconds.labels(kind).time():
                outcome = await loop.run_in_executor(self.worker, fn)
        except Exception as error:   # retried with backoff; the next watch event also retries
            self.metrics.errors.labels(kind).inc()
            self.metrics.reconciles.labels(kind, "error").inc()
            attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
            delay = min(60.0, 2.0 ** attempt) * random.uniform(0.8, 1.2)
            logger.warning("reconcile of %s %s/%s failed (attempt %d, retry in %.0fs): %s",
                           kind, key[1], key[2], attempt, delay, error)
            self._schedule_retry(key, delay)
            return
        self._attempts.pop(key, None)
        self.metrics.reconciles.labels(kind, outcome.result).inc()
        for event in outcome.events:
            try:
                kopf.event(event.body, type=event.type, reason=event.reason, message=event.message)  # type: ignore[arg-type]
            except Exception:  # pragma: no cover - an event is best effort
                logger.exception("cannot post event %s", event.reason)
        self.metrics.last_activity = loop.time()

    def _schedule_retry(self, key: Key, delay: float) -> None:
        old = self._retries.pop(key, None)
        if old is not None:
            old.cancel()

        async def retry() -> None:
            await asyncio.sleep(delay)
            self._retries.pop(key, None)
            await self.reconcile_key(key)
        self._retries[key] = asyncio.create_task(retry())

    async def reconcile_key(self, key: Key) -> None:
        kind, namespace, _ = key
        if kind == "LogDir":
            logdir = self.logdirs.get(key)
            if logdir is not None:
                topics = self._in(self.topics, namespace)
                logdirs = self._in(self.logdirs, namespace)

                def reconcile() -> Outcome:
                    outcome = reconcile_logdir(self.kube, logdir, self.options, topics=topics)
                    # The namespace's __consumer_offsets Topic, once one of its agents asked for it.
                    outcome.writes += ensure_offsets_topic(self.kube, namespace, topics, logdirs,
                                                           self.offsets_topic).writes
                    return outcome
                await self._run(key, reconcile)
        else:
            body = self.topics.get(key)
            if body is not None:
                peers = self._in(self.topics, namespace)
                logdirs = self._in(self.logdirs, namespace)
                await self._run(key, lambda: reconcile_topic(self.kube, body, peers, logdirs))

    async def _topics_named(self, namespace: str, names: Iterable[str]) -> None:
        wanted = {n.replace(".", "_") for n in names}
        for key, body in sorted(self.topics.items()):
            if key[1] == namespace and effective_name(body).replace(".", "_") in wanted:
                await self.reconcile_key(key)

    async def _all_topics(self, namespace: str) -> None:
        for key in sorted(k for k in self.topics if k[1] == namespace):
            await self.reconcile_key(key)

    async def resync(self) -> None:
        self.kube.applied.clear()
        for key in sorted(self.logdirs):
            await self.reconcile_key(key)
        for key in sorted(self.topics):
            await self.reconcile_key(key)

    # -- kopf -------------------------------------------------------------------------------
    def register(self, registry: kopf.OperatorRegistry) -> None:
        @kopf.on.startup(registry=registry)
        async def started(**_: Any) -> None:
            self._resync_task = asyncio.create_task(self._resync_loop())
            self._election_task = asyncio.create_task(self._election_loop())

        @kopf.on.cleanup(registry=registry)
        async def cleanup(**_: Any) -> None:
            # A task left running makes kopf wait 5 s for "hung tasks" before it exits.
            for loop_task in (self._resync_task, self._election_task):
                if loop_task is not None:
                    loop_task.cancel()
            for task in self._retries.values():
                task.cancel()
            self.worker.shutdown(wait=True, cancel_futures=True)

        @kopf.index(GROUP, VERSION, LOGDIRS, registry=registry)
        def logdir_index(body: kopf.Body, namespace: str | None, name: str | None, **_: Any) -> dict[str, str]:
            assert namespace is not None and name is not None
            self.logdirs[("LogDir", namespace, name)] = _plain(body)
            self.metrics.objects.labels("LogDir").set(len(self.logdirs))
            return {namespace: name}

        @kopf.index(GROUP, VERSION, TOPICS, registry=registry)
        def topic_index(body: kopf.Body, namespace: str | None, name: str | None, **_: Any) -> dict[str, str]:
            assert namespace is not None and name is not None
            self.topics[("Topic", namespace, name)] = _plain(body)
            self.metrics.objects.labels("Topic").set(len(self.topics))
            return {namespace: name}

        @kopf.on.event(GROUP, VERSION, LOGDIRS, registry=registry)
        async def logdir_event(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str | None,
                               **_: Any) -> None:
            assert namespace is not None and name is not None
            key = ("LogDir", namespace, name)
            if event.get("type") == "DELETED":
                self.logdirs.pop(key, None)
                self.metrics.objects.labels("LogDir").set(len(self.logdirs))
            else:
                self.logdirs[key] = _plain(body)
                await self.reconcile_key(key)
            fingerprint = self._logdir_fingerprint(namespace)
            if self._fingerprints.get(namespace) != fingerprint:
                self._fingerprints[namespace] = fingerprint
                await self._all_topics(namespace)

        @kopf.on.event(GROUP, VERSION, TOPICS, registry=registry)
        async def topic_event(event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str | None,
                              **_: Any) -> None:
            assert namespace is not None and name is not None
            key = ("Topic", namespace, name)
            previous = self.topics.get(key)
            if event.get("type") == "DELETED":
                self.topics.pop(key, None)
                self.metrics.objects.labels("Topic").set(len(self.topics))
                await self._topics_named(namespace, [effective_name(body)])   # a loser may now win
                return
            self.topics[key] = _plain(body)
            await self.reconcile_key(key)
            first_seen = previous is None
            deleting_now = bool(body["metadata"].get("deletionTimestamp")) and not (
                previous and previous["metadata"].get("deletionTimestamp"))
            if first_seen or deleting_now:
                others = [effective_name(body)]
                await self._topics_named(namespace, others)

        async def child_event(body: kopf.Body, namespace: str | None, **_: Any) -> None:
            if namespace is None:
                return
            logdir = (body["metadata"].get("labels") or {}).get(LABEL_LOGDIR)
            if logdir and ("LogDir", namespace, logdir) in self.logdirs:
                await self.reconcile_key(("LogDir", namespace, logdir))

        managed = {LABEL_MANAGED_BY: "stratalog-operator"}
        kopf.on.event("", "v1", "persistentvolumeclaims", labels=managed, registry=registry)(child_event)
        kopf.on.event("apps", "v1", "statefulsets", labels=managed, registry=registry,
                      id="statefulset_event")(child_event)
        kopf.on.event("", "v1", "services", labels=managed, registry=registry, id="service_event")(child_event)
        kopf.on.event("", "v1", "configmaps", labels=managed, registry=registry, id="configmap_event")(child_event)

    async def _election_loop(self) -> None:
        # Lease expiry is a time, not an event: look every election_seconds (Kafka's controller
        # checks broker sessions the same way). Runs on the reconcile worker, never beside a reconcile.
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.election_seconds)
            try:
                await loop.run_in_executor(self.worker, self.elect_all)
            except Exception:  # noqa: BLE001 - the next tick tries again
                logger.exception("elections failed")

    def elect_all(self) -> int:
        """One election round over every managed Topic; the number of partition records changed.

        Each change is also an Event on its Topic, written through the API from this worker thread
        (kopf's event poster only works inside its handlers).
        """
        changed = 0
        now = datetime.now(timezone.utc)
        for namespace in sorted({ns for _, ns, _ in self.topics}):
            leases = self.kube.list("Lease", namespace, label_selector=AGENT_LEASE_SELECTOR)
            if not leases:
                continue  # no agent here keeps a Lease: nothing to judge liveness by
            alive = alive_logdirs(leases, now)
            leaving = shutting_down(leases) & alive
            restarted = rejoining(leases) & alive
            for body in self._in(self.topics, namespace):
                meta = body["metadata"]
                if is_paused(meta) or is_unmanaged(meta) or meta.get("deletionTimestamp"):
                    continue
                for election in elect_topic(self.kube, body, alive, leaving=leaving, restarted=restarted):
                    self.metrics.elections.labels(election.reason).inc()
                    post_election_event(self.kube, body, election, now)
                    changed += 1
        records = [r for body in list(self.topics.values()) for r in records_of(body).values()]
        self.metrics.offline_partitions.set(sum(r.leader is None for r in records))
        self.metrics.under_replicated.set(sum(len(r.isr) < len(r.replicas) for r in records))
        return changed

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds * random.uniform(0.9, 1.1))
            try:
                await self.resync()
            except Exception:  # pragma: no cover
                logger.exception("resync failed")
