"""kopf wiring of an agent: Topic and LogDir watches, and the maintenance timers of its LogDir.

Timers hang off the agent's own LogDir object (filtered by name), so there is one timer
per task per LogDir, not one per Topic. Each tick first waits a random jitter (a tenth
of its interval) so that agents started together do not hit their disks together, and a
tick that finds another engine task still running is skipped rather than queued: a slow
cleaner pass never makes retention and checkpoint work stack up behind it.

Topic events are level-triggered, as in the controller: every event recomputes what this
LogDir should hold for that Topic, and a restarted agent converges by reconciling what it
lists. kopf's indexes are filled before the first handler, so the LogDir's topic defaults
are known before any Topic is acted on.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import kopf

from ..metrics import OperatorMetrics
from ..names import GROUP, LOGDIRS, TOPICS, VERSION
from ..outcome import Outcome
from .agent import Agent

__all__ = ["AgentRuntime", "Intervals"]

logger = logging.getLogger("stratalog.agent")

NEVER_MS = 2**62


@dataclass(frozen=True)
class Intervals:
    """Seconds between runs of each task (None: never)."""

    retention: float | None
    cleaner: float | None
    checkpoints: float | None
    flush: float | None
    deletion: float
    status: float
    resync: float = 300.0
    producer_expiration: float | None = None

    @classmethod
    def from_engine(cls, agent: Agent, status: float) -> Intervals:
        c = agent.engine.config

        def seconds(ms: int) -> float | None:
            return None if ms >= NEVER_MS else ms / 1000
        return cls(retention=seconds(c.log_retention_check_interval_ms),
                   cleaner=seconds(c.log_cleaner_backoff_ms) if c.log_cleaner_enable else None,
                   checkpoints=seconds(c.log_flush_offset_checkpoint_interval_ms),
                   flush=seconds(c.log_flush_scheduler_interval_ms),
                   deletion=min(30.0, max(1.0, c.log_segment_delete_delay_ms / 2000)),
                   status=status,
                   producer_expiration=seconds(c.producer_id_expiration_check_interval_ms))


class AgentRuntime:
    def __init__(self, agent: Agent, metrics: OperatorMetrics, intervals: Intervals) -> None:
        self.agent = agent
        self.metrics = metrics
        self.intervals = intervals
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="stratalog-agent")
        self.maintenance = ThreadPoolExecutor(1, thread_name_prefix="stratalog-agent-maintenance")
        self.busy = asyncio.Lock()
        self.skipped = self.metrics.reconciles   # counted as reconciles{kind=task,result=skipped}

    async def _call(self, pool: ThreadPoolExecutor, kind: str, fn: Callable[[], Outcome]) -> Outcome | None:
        loop = asyncio.get_running_loop()
        try:
            with self.metrics.reconcile_seconds.labels(kind).time():
                outcome = await loop.run_in_executor(pool, fn)
        except Exception as error:
            self.metrics.errors.labels(kind).inc()
            self.metrics.reconciles.labels(kind, "error").inc()
            logger.warning("%s failed: %s", kind, error, exc_info=logger.isEnabledFor(logging.DEBUG))
            return None
        self.metrics.reconciles.labels(kind, "ok" if outcome.result != "unchanged" else "unchanged").inc()
        for event in outcome.events:
            try:
                kopf.event(event.body, type=event.type, reason=event.reason, message=event.message)  # type: ignore[arg-type]
            except Exception:  # pragma: no cover - events are best effort
                logger.exception("cannot post event %s", event.reason)
        return outcome

    async def task(self, name: str, fn: Callable[[], Outcome]) -> None:
        """One engine task at a time: a tick that finds another task running is skipped."""
        if self.busy.locked():
            self.metrics.reconciles.labels(name, "skipped").inc()
            return
        async with self.busy:
            await self._call(self.maintenance, name, fn)

    async def reconcile(self, body: Mapping[str, Any]) -> None:
        await self._call(self.worker, "Topic", lambda: self.agent.reconcile_topic(body))

    async def status(self) -> None:
        await self._call(self.worker, "status", self.agent.write_status)

    def shutdown(self) -> None:
        self.worker.shutdown(wait=True, cancel_futures=True)
        self.maintenance.shutdown(wait=True, cancel_futures=True)

    # -- kopf --------------------------------------------------------------------------------
    def register(self, registry: kopf.OperatorRegistry) -> None:
        agent = self.agent
        mine = agent.logdir

        def is_mine(name: str | None, **_: Any) -> bool:
            return name == mine

        @kopf.index(GROUP, VERSION, LOGDIRS, when=is_mine, registry=registry)
        def logdir_index(body: kopf.Body, **_: Any) -> dict[str, bool]:
            agent.logdir_body = copy.deepcopy(dict(body))
            return {"self": True}

        @kopf.index(GROUP, VERSION, TOPICS, registry=registry)
        def topic_index(body: kopf.Body, name: str | None, **_: Any) -> dict[str, bool]:
            assert name is not None
            agent.topics[name] = copy.deepcopy(dict(body))
            return {"topic": True}

        @kopf.on.event(GROUP, VERSION, TOPICS, registry=registry)
        async def topic_event(event: kopf.RawEvent, body: kopf.Body, name: str | None, **_: Any) -> None:
            assert name is not None
            if event.get("type") == "DELETED":
                agent.forget_topic(name)
                return
            agent.topics[name] = copy.deepcopy(dict(body))
            await self.reconcile(agent.topics[name])
            agent.on_topic_event()   # partition records may have changed: act on them now

        @kopf.on.event(GROUP, VERSION, LOGDIRS, when=is_mine, registry=registry)
        async def logdir_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
            if event.get("type") == "DELETED":
                return
            before = ((agent.logdir_body or {}).get("spec") or {}).get("topicDefaults")
            agent.logdir_body = copy.deepcopy(dict(body))
            if (body.get("spec") or {}).get("topicDefaults") != before:
                await self._call(self.worker, "Topic", agent.reconcile_all)

        def timer(name: str, interval: float | None, fn: Callable[[], Outcome] | None,
                  run: Callable[[], Any] | None = None) -> None:
            if interval is None:
                return

            async def tick(**_: Any) -> None:
                await asyncio.sleep(random.uniform(0, interval / 10))
                if run is not None:
                    await run()
                else:
                    assert fn is not None
                    await self.task(name, fn)
            kopf.timer(GROUP, VERSION, LOGDIRS, when=is_mine, interval=interval, id=name, registry=registry,
                       initial_delay=random.uniform(0, interval / 10))(tick)

        iv = self.intervals
        timer("retention", iv.retention, agent.run_retention)
        timer("cleaner", iv.cleaner, agent.run_cleaner)
        timer("checkpoints", iv.checkpoints, agent.write_checkpoints)
        timer("flush", iv.flush, agent.flush)
        timer("deletion", iv.deletion, agent.delete_expired)
        timer("producer-expiration", iv.producer_expiration, agent.remove_expired_producers)
        timer("status", iv.status, None, run=self._status_tick)
        timer("resync", iv.resync, None,
              run=lambda: self._call(self.worker, "Topic", agent.reconcile_all))

    async def _status_tick(self) -> None:
        loop = asyncio.get_running_loop()
        # Under disk pressure, retention acts first (the condition is still reported).
        if await loop.run_in_executor(self.worker, self.agent.disk_pressure):
            await self.task("retention", self.agent.run_retention)
        await self.status()
