"""One LogDir's agent: the Topic reconcile, the maintenance tasks and the status reports.

Everything here is blocking (engine calls, API requests) and runs on the agent's worker
threads; :mod:`.handlers` schedules it from kopf. Each method returns an
:class:`~stratalog_operator.outcome.Outcome` whose events the asyncio side posts.

Status is written with server-side apply under this agent's own field manager
(``stratalog-agent-<logdir>``): the Topic's ``status.logDirs.<logdir>`` entry and the
LogDir's ``DiskPressure`` / ``CheckpointStale`` conditions and per-volume usage. The
controller's fields and other agents' entries are other managers' and are never touched.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratalog.common.errors import StratalogError, UnknownTopicOrPartitionError
from stratalog.common.names import TopicPartition
from stratalog.broker.engine import Engine
from stratalog.broker.replication import ReplicaSet
from stratalog.broker.topics import TopicAdmin

from ..conditions import Condition, merge_conditions, now_rfc3339
from ..kube import ApiError, Kube
from ..names import agent_finalizer, is_unmanaged
from ..outcome import Outcome
from ..properties import topic_overrides
from ..status import apply_status
from .figures import PartitionFigures, WritePolicy, topic_entry
from .placement import LocalTopic, effective_name, plan_topic_here

__all__ = ["Agent", "AgentSettings", "agent_manager"]

logger = logging.getLogger("stratalog.agent")

Json = dict[str, Any]
Key = tuple[str, str]   # namespace, name


AGENT_CONDITIONS = ("DiskPressure", "CheckpointStale", "RetentionHealthy", "LogDirectoriesOnline")


def agent_manager(logdir: str) -> str:
    return f"stratalog-agent-{logdir}"[:128]


@dataclass
class AgentSettings:
    logdir: str
    namespace: str
    policy: WritePolicy = field(default_factory=WritePolicy)
    disk_pressure_free_ratio: float = 0.1
    checkpoint_stale_factor: float = 3.0


class Agent:
    def __init__(self, kube: Kube, engine: Engine, settings: AgentSettings,
                 topics: dict[str, Json] | None = None) -> None:
        self.kube = kube
        self.engine = engine
        self.settings = settings
        self.logdir = settings.logdir
        self.namespace = settings.namespace
        self.finalizer = agent_finalizer(settings.logdir)
        self.manager = agent_manager(settings.logdir)
        # Topic name -> latest body (a dict the caller may share: the Kafka listener reads it too)
        self.topics: dict[str, Json] = topics if topics is not None else {}
        self.logdir_body: Json | None = None
        self._lock = threading.Lock()               # the Topic reconcile and status writes, one at a time
        self.partitions_lock = threading.Lock()     # partition deletion vs. the replica driver
        self._written: dict[str, tuple[Json, float]] = {}   # Topic name -> (entry, monotonic time)
        self._logdir_written: tuple[Json, float] | None = None
        self.last_retention_ms: dict[TopicPartition, int] = {}
        self.replicas: ReplicaSet | None = None     # the engine's replicas, once replication is on
        self.on_topic_event: Callable[[], None] = lambda: None   # wakes the replica driver

    # -- inputs --------------------------------------------------------------------------------
    def topic_defaults(self) -> dict[str, str]:
        spec = (self.logdir_body or {}).get("spec") or {}
        return topic_overrides(spec.get("topicDefaults"), where="LogDir spec.topicDefaults")

    def _local(self, name: str) -> LocalTopic | None:
        try:
            described = self.engine.manager.describe_topic(name)
        except UnknownTopicOrPartitionError:
            return None
        return LocalTopic(frozenset(described.partitions), dict(described.overrides))

    def owner_of(self, kafka_name: str) -> Json | None:
        """The Topic whose data this is: the one carrying this agent's finalizer."""
        for body in list(self.topics.values()):   # a snapshot: the event loop updates the dict
            if effective_name(body) == kafka_name and self.finalizer in (body["metadata"].get("finalizers") or []):
                return body
        return None

    # -- Topic reconcile -------------------------------------------------------------------------
    def reconcile_topic(self, body: Mapping[str, Any]) -> Outcome:
        with self._lock:
            return self._reconcile_topic(body)

    def reconcile_all(self) -> Outcome:
        total = Outcome()
        for name in sorted(list(self.topics)):
            body = self.topics.get(name)
            if body is None:
                continue
            one = self.reconcile_topic(body)
            total.events += one.events
            total.writes += one.writes
        return total

    def _reconcile_topic(self, body: Mapping[str, Any]) -> Outcome:
        outcome = Outcome()
        name = effective_name(body)
        try:
            wanted = {**self.topic_defaults(), **topic_overrides((body.get("spec") or {}).get("config"))}
            normalized = TopicAdmin(self.engine.manager).normalize_overrides(name, wanted)
        except StratalogError as error:
            outcome.result = "invalid"
            outcome.event(body, "Warning", "InvalidConfig", f"LogDir {self.logdir}: {error}")
            return outcome
        local = self._local(name)
        actions = plan_topic_here(body, self.logdir, self.finalizer, normalized, local)
        if actions.empty:
            outcome.result = "unchanged"
            return outcome
        manager = self.engine.manager
        if actions.add_finalizer:
            # Before any data exists: a Topic is never deleted with data its agent does not know of.
            if not self.kube.add_finalizer("Topic", body, self.finalizer):
                fresh = self.kube.get("Topic", self.namespace, body["metadata"]["name"])
                if fresh is None or self.finalizer not in (fresh["metadata"].get("finalizers") or []):
                    outcome.result = "gone"
                    return outcome
            outcome.writes += 1
        if actions.alter_config and local is not None:
            TopicAdmin(manager).alter_topic_config(name, actions.overrides or {})
            outcome.event(body, "Normal", "ConfigApplied",
                          f"LogDir {self.logdir}: applied config to {len(local.partitions)} partition(s) of {name}")
        if actions.create:
            created = TopicAdmin(manager).ensure_partitions(name, actions.create, actions.overrides)
            if created:
                outcome.event(body, "Normal", "PartitionsCreated",
                              f"LogDir {self.logdir}: created partitions {created} of {name}")
        if actions.keep or actions.delete:
            # Neither kept nor deleted partitions are replicas any more (Kafka's StopReplica, with or
            # without deletion): nothing more is acknowledged on them, no fetch appends to a log being
            # deleted, and a Topic made again under this name starts its records at leader epoch 0,
            # which a state held from before would ignore as stale.
            with self.partitions_lock:
                if self.replicas is not None:
                    for p in (*actions.keep, *actions.delete):
                        self.replicas.remove(TopicPartition(name, p))
                if actions.delete:
                    TopicAdmin(manager).delete_partitions(name, actions.delete)
        if actions.delete:
            for p in actions.delete:
                self.last_retention_ms.pop(TopicPartition(name, p), None)
            outcome.event(body, "Normal", "PartitionsDeleted",
                          f"LogDir {self.logdir}: deleted partitions {actions.delete} of {name} ({actions.reason})")
        released = False
        if actions.remove_finalizer:
            released = self.kube.remove_finalizer("Topic", body, self.finalizer)
            outcome.writes += int(released)
            self._written.pop(body["metadata"]["name"], None)
        # Said once: a stale event replaying the deletion finds the finalizer already gone.
        if actions.keep and actions.reason and (released or not actions.remove_finalizer):
            outcome.event(body, "Normal", "DataRetained",
                          f"LogDir {self.logdir}: kept partitions {actions.keep} of {name} on disk "
                          f"({actions.reason})")
        return outcome

    def forget_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._written.pop(name, None)

    # -- maintenance tasks (called one at a time by the timers) ----------------------------------
    def run_retention(self) -> Outcome:
        outcome = Outcome()
        done = self.engine.run_retention()
        now = self.engine.clock()
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, deletion in done:
            self.last_retention_ms[tp] = now
            by_topic.setdefault(tp.topic, []).append((tp.partition, deletion.base_offset))
        for kafka_name, deleted in sorted(by_topic.items()):
            owner = self.owner_of(kafka_name)
            if owner is None:
                continue
            parts = sorted({p for p, _ in deleted})
            outcome.event(owner, "Normal", "SegmentsDeleted",
                          f"LogDir {self.logdir}: retention deleted {len(deleted)} segment(s) of {kafka_name} "
                          f"partition(s) {parts}")
        return outcome

    def run_cleaner(self) -> Outcome:
        outcome = Outcome()
        for report in self.engine.run_cleaner():
            owner = self.owner_of(report.topic_partition.topic)
            if owner is None:
                continue
            outcome.event(owner, "Normal", "Cleaned",
                          f"LogDir {self.logdir}: cleaned {report.topic_partition}: dirty ratio "
                          f"{report.dirty_ratio_before:.2f} -> {report.dirty_ratio_after:.2f}, "
                          f"{report.bytes_reclaimed} bytes reclaimed")
        return outcome

    def write_checkpoints(self) -> Outcome:
        self.engine.write_checkpoints()
        return Outcome()

    def flush(self) -> Outcome:
        self.engine.flush_dirty_logs()
        return Outcome()

    def delete_expired(self) -> Outcome:
        self.engine.delete_expired()
        return Outcome()

    def remove_expired_producers(self) -> Outcome:
        self.engine.remove_expired_producers()   # producer.id.expiration.ms
        return Outcome()

    # -- status ------------------------------------------------------------------------------------
    def figures(self) -> dict[str, list[PartitionFigures]]:
        """Per Kafka topic, the figures of the partitions this engine holds."""
        cleaner = self.engine.cleaner
        ratios = cleaner.dirty_ratios() if cleaner is not None else {}
        out: dict[str, list[PartitionFigures]] = {}
        for tp, log in sorted(self.engine.manager.logs().items()):
            status = cleaner.status.get(tp) if cleaner is not None else None
            out.setdefault(tp.topic, []).append(PartitionFigures(
                tp.partition, log.log_start_offset, log.log_end_offset, log.size, len(log.segments),
                ratios.get(tp), self.last_retention_ms.get(tp), status.last_clean_ms if status else None))
        return out

    def write_status(self) -> Outcome:
        with self._lock:
            outcome = Outcome()
            figures = self.figures()
            now = time.monotonic()
            for name, body in sorted(list(self.topics.items())):
                if body["metadata"].get("deletionTimestamp") or is_unmanaged(body["metadata"]):
                    continue
                ours = self.finalizer in (body["metadata"].get("finalizers") or [])
                mine = figures.get(effective_name(body)) if ours else None
                entry = topic_entry(mine) if mine else None
                last = self._written.get(name)
                current = ((body.get("status") or {}).get("logDirs") or {}).get(self.logdir)
                if entry is None:
                    if current is None and last is None:
                        continue
                    fragment: Json = {}
                    if last is not None and last[0] == {}:
                        continue
                elif not self.settings.policy.should_write(last[0] if last else current, entry,
                                                           last[1] if last else None, now):
                    continue
                else:
                    fragment = {"logDirs": {self.logdir: entry}}
                try:
                    if apply_status(self.kube, body, fragment, manager=self.manager, force_check=True):
                        outcome.writes += 1
                except ApiError as error:
                    if error.status != 404:
                        raise
                    continue
                self._written[name] = (entry or {}, now)
            outcome.writes += self._write_logdir_status(now)
            return outcome

    def volumes(self) -> list[Json]:
        logs = self.engine.manager.logs()
        out = []
        for path in self.engine.manager.data_dirs:
            usage = shutil.disk_usage(path)
            held = [log for log in logs.values() if log.dir.parent == path]
            out.append({"name": Path(path).name, "capacityBytes": usage.total, "usedBytes": usage.used,
                        "freeBytes": usage.free, "logBytes": sum(log.size for log in held),
                        "partitions": len(held)})
        return out

    def conditions(self, volumes: Iterable[Mapping[str, Any]]) -> list[Condition]:
        short = [v for v in volumes
                 if v["capacityBytes"] and v["freeBytes"] / v["capacityBytes"] < self.settings.disk_pressure_free_ratio]
        conditions = []
        if short:
            names = ", ".join(f"{v['name']} ({100 * v['freeBytes'] / v['capacityBytes']:.1f}% free)" for v in short)
            conditions.append(Condition("DiskPressure", True, "LowFreeSpace",
                                        f"free space under {self.settings.disk_pressure_free_ratio:.0%}: {names}"))
        else:
            conditions.append(Condition("DiskPressure", False, "EnoughFreeSpace", "every volume has free space"))
        age = self.engine.checkpoint_age_ms()
        limit = self.settings.checkpoint_stale_factor * self.engine.config.log_flush_offset_checkpoint_interval_ms
        if age is not None and age > limit:
            conditions.append(Condition("CheckpointStale", True, "CheckpointsStopped",
                                        f"last checkpoint write {age / 1000:.0f}s ago (interval "
                                        f"{self.engine.config.log_flush_offset_checkpoint_interval_ms / 1000:.0f}s)"))
        elif age is None:
            # Its own reason, not just a message: status writes compare reasons, so the first
            # checkpoint is news that gets written promptly.
            conditions.append(Condition("CheckpointStale", False, "NoCheckpointYet", "no checkpoint written yet"))
        else:
            conditions.append(Condition("CheckpointStale", False, "CheckpointsCurrent",
                                        "checkpoints are written on schedule"))
        retention = self.engine.tasks.get("retention")
        if retention is not None and retention.last_error:
            conditions.append(Condition("RetentionHealthy", False, "RetentionFailing",
                                        f"the last retention check failed: {retention.last_error}"))
        else:
            # One reason before and after the first check: its first run is no news worth a write.
            conditions.append(Condition("RetentionHealthy", True, "NoFailures",
                                        "retention checks run every "
                                        f"{self.engine.config.log_retention_check_interval_ms / 1000:g}s"))
        offline = self.engine.offline_dirs()
        if offline:
            # Kafka's offline log directory: named with its error; only a restart brings it back.
            conditions.append(Condition("LogDirectoriesOnline", False, "LogDirectoryOffline",
                                        "; ".join(o.describe() for o in offline.values())))
        else:
            conditions.append(Condition("LogDirectoriesOnline", True, "AllOnline",
                                        "every data directory is online"))
        return conditions

    def _logdir_due(self, old: Mapping[str, Any], new: Mapping[str, Any], elapsed: float) -> bool:
        """Conditions and partition counts are written promptly; byte counts only now and then."""
        return _logdir_due_impl(self.settings.policy, old, new, elapsed)

    def disk_pressure(self) -> bool:
        return any(c.type == "DiskPressure" and c.status for c in self.conditions(self.volumes()))

    def _write_logdir_status(self, now: float) -> int:
        body = self.logdir_body
        if body is None or body["metadata"].get("deletionTimestamp"):
            return 0
        volumes = self.volumes()
        conditions = self.conditions(volumes)
        status = body.get("status") or {}
        own = [c for c in status.get("conditions") or [] if c.get("type") in AGENT_CONDITIONS]
        shown = [{k: v for k, v in vol.items() if k != "freeBytes"} for vol in volumes]
        # Usage in steps of 1% of the volume (at least 1 MiB): bytes move with every append, and a
        # shared filesystem's usage with every other writer; exact figures are in /metrics.
        coarse = [{**v, "usedBytes": _step(v["usedBytes"], v["capacityBytes"]),
                   "logBytes": _step(v["logBytes"], v["capacityBytes"])} for v in shown]
        fragment: Json = {"volumes": coarse,
                          "conditions": merge_conditions(own, conditions, generation=None, now=now_rfc3339(),
                                                         keep_others=False)}
        comparable = {"volumes": coarse, "conditions": [(c.type, c.status, c.reason) for c in conditions]}
        last = self._logdir_written
        if last is not None and not self._logdir_due(last[0], comparable, now - last[1]):
            return 0
        if last is None and _same_conditions(own, conditions) and _same_volumes(status, coarse):
            self._logdir_written = (comparable, now)
            return 0
        written = apply_status(self.kube, body, fragment, manager=self.manager, force_check=True)
        self._logdir_written = (comparable, now)
        return int(written)


def _logdir_due_impl(policy: WritePolicy, old: Mapping[str, Any], new: Mapping[str, Any], elapsed: float) -> bool:
    if old == new:
        return False
    counts = [(v["name"], v["partitions"]) for v in old["volumes"]] != [(v["name"], v["partitions"])
                                                                       for v in new["volumes"]]
    if old["conditions"] != new["conditions"] or counts:
        return elapsed >= policy.min_interval
    return elapsed >= policy.max_interval


def _step(n: int, capacity: int) -> int:
    step = max(1 << 20, capacity // 100)
    return n // step * step


def _same_conditions(current: list[Mapping[str, Any]], wanted: list[Condition]) -> bool:
    have = {(c.get("type"), c.get("status"), c.get("reason")) for c in current}
    return have == {(c.type, c.status_text, c.reason) for c in wanted}


def _same_volumes(status: Mapping[str, Any], coarse: list[Json]) -> bool:
    by_name = {v.get("name"): v for v in status.get("volumes") or []}
    return all(all(by_name.get(v["name"], {}).get(k) == val for k, val in v.items()) for v in coarse)
