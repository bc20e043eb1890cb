"""The engine as a long-running service: log manager, cleaner and Kafka's LogManager schedule.

``stratalog serve`` and the Kubernetes agent both run one ``Engine``. It opens
the directories (recovering as needed), and unless told otherwise runs in its
own threads the periodic work Kafka's ``LogManager.startup`` schedules:

==============================  ============================================
retention check                 every ``log.retention.check.interval.ms``
flush of logs past flush.ms     every ``log.flush.scheduler.interval.ms``
recovery-point checkpoint       every ``log.flush.offset.checkpoint.interval.ms``
log-start-offset checkpoint     every ``log.flush.start.offset.checkpoint.interval.ms``
high-watermark checkpoint       every ``replica.high.watermark.checkpoint.interval.ms``
``.deleted`` / ``-delete`` removal  every second (each file waits its ``file.delete.delay.ms``)
cleaner threads                 ``log.cleaner.threads``, idle ``log.cleaner.backoff.ms``
==============================  ============================================

With ``schedule=False`` nothing runs by itself and an outside scheduler (the
agent's kopf timers, or the HTTP maintenance endpoints) calls the same task
methods. Every task returns what it did.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratalog.storage.cleaner import CleanReport, LogCleaner, LogToClean, log_to_clean
from stratalog.common.config import EngineConfig
from stratalog.common.errors import KafkaStorageError
from stratalog.storage.log import Clock, Log, wall_clock_ms
from stratalog.storage.log_dir_failure import OfflineDir
from stratalog.storage.log_manager import LogManager, ShutdownReport
from stratalog.common.names import TopicPartition
from stratalog.storage.retention import Deletion, delete_old_segments

logger = logging.getLogger(__name__)

FILE_DELETION_INTERVAL_MS = 1000


@dataclass
class TaskRecord:
    """When a periodic task last ran, for metrics and the checkpoint-age gauges."""

    runs: int = 0
    last_run_ms: int | None = None
    last_error: str | None = None


@dataclass(order=True)
class _Scheduled:
    due: float
    name: str = field(compare=False)
    period_s: float = field(compare=False)
    task: Callable[[], object] = field(compare=False)


class Engine:
    def __init__(self, data_dirs: Sequence[Path | str], properties: Mapping[str, object] | None = None, *,
                 schedule: bool = True, clock: Clock = wall_clock_ms) -> None:
        self.config = EngineConfig.from_properties(dict(properties or {}))
        self.manager = LogManager(data_dirs, self.config, clock=clock)
        self.schedule = schedule
        self.clock = clock
        self.cleaner: LogCleaner | None = None
        self.tasks: dict[str, TaskRecord] = {}
        self.retention_deletions_total = 0
        self.ready = False
        self._stop = threading.Event()
        self._scheduler: threading.Thread | None = None
        # One maintenance task at a time: a slow pass never stacks up behind itself.
        self._task_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Engine:
        self.manager.open()
        self.cleaner = LogCleaner(self.manager)
        if self.schedule:
            if self.config.log_cleaner_enable:
                self.cleaner.start()
            self._scheduler = threading.Thread(target=self._run_schedule, name="stratalog-scheduler", daemon=True)
            self._scheduler.start()
        self.ready = True
        return self

    def stop(self) -> ShutdownReport:
        """Clean shutdown: stop the tasks, then flush, checkpoint and mark the directories clean.

        Never raises for a failed disk: the report says which directories could not be made safe.
        """
        self.ready = False
        self._stop.set()
        if self._scheduler is not None:
            self._scheduler.join()
        if self.cleaner is not None:
            self.cleaner.stop()
        return self.manager.close()

    def offline_dirs(self) -> dict[Path, OfflineDir]:
        return self.manager.offline_dirs()

    def opening_summary(self) -> list[str]:
        """One line per data directory on how it opened: its partitions, and whether it was closed
        cleanly (recovery skipped) or segments had to be recovered."""
        manager = self.manager
        clean = manager.had_clean_shutdown()
        lines = []
        for path in manager.data_dirs:
            logs = [log for log in manager.logs().values() if log.dir.parent == path]
            recovered = sum(len(manager.load_reports[log.topic_partition].recovered_segments) for log in logs
                            if log.topic_partition in manager.load_reports)
            lines.append(f"data directory {path}: {len(logs)} partitions, "
                         f"{'clean shutdown (recovery skipped)' if clean.get(path) else 'no clean-shutdown marker'}, "
                         f"{recovered} segments recovered")
        return lines

    # -- tasks (each callable from outside) ------------------------------------------------
    def _record(self, name: str, task: Callable[[], Any]) -> Any:
        record = self.tasks.setdefault(name, TaskRecord())
        with self._task_lock:
            try:
                result = task()
                record.last_error = None
                return result
            except Exception as error:
                record.last_error = str(error)
                raise
            finally:
                record.runs += 1
                record.last_run_ms = self.clock()

    def run_retention(self, topic: str | None = None) -> list[tuple[TopicPartition, Deletion]]:
        def task() -> list[tuple[TopicPartition, Deletion]]:
            done: list[tuple[TopicPartition, Deletion]] = []
            failed: KafkaStorageError | None = None
            for tp, log in sorted(self.manager.logs().items()):
                if (topic is not None and tp.topic != topic) or log.offline:
                    continue
                try:
                    done.extend((tp, d) for d in delete_old_segments(log))
                except KafkaStorageError as error:  # that directory is offline now; the others go on
                    failed = failed or error
            self.retention_deletions_total += len(done)
            if failed is not None:
                raise failed
            return done
        result: list[tuple[TopicPartition, Deletion]] = self._record("retention", task)
        return result

    def run_cleaner(self, topic: str | None = None, force: bool = False) -> list[CleanReport]:
        assert self.cleaner is not None, "the engine is not started"
        cleaner = self.cleaner
        result: list[CleanReport] = self._record("cleaner", lambda: cleaner.run_pass(force=force, topic=topic))
        return result

    def write_checkpoints(self) -> dict[str, int]:
        def task() -> dict[str, int]:
            self.manager.write_checkpoints()
            return {"partitions": len(self.manager.logs())}
        result: dict[str, int] = self._record("checkpoints", task)
        return result

    def flush_dirty_logs(self) -> list[TopicPartition]:
        result: list[TopicPartition] = self._record("flush", self.manager.flush_dirty_logs)
        return result

    def delete_expired(self) -> dict[str, int]:
        def task() -> dict[str, int]:
            return {"segmentFiles": self.manager.delete_expired_segment_files(),
                    "directories": self.manager.delete_pending_dirs()}
        result: dict[str, int] = self._record("deletion", task)
        return result

    def remove_expired_producers(self) -> dict[str, int]:
        result: dict[str, int] = self._record(
            "producer-expiration", lambda: {"producers": self.manager.remove_expired_producers()})
        return result

    def cleanable(self, log: Log, now_ms: int | None = None) -> LogToClean:
        """What the cleaner would clean of a compacted log now: its dirty ratio and first dirty offset."""
        now = self.clock() if now_ms is None else now_ms
        return log_to_clean(log, self.manager.checkpoints.cleaner_offset(log.topic_partition), now)

    def checkpoint_age_ms(self) -> int | None:
        record = self.tasks.get("checkpoints")
        return None if record is None or record.last_run_ms is None else self.clock() - record.last_run_ms

    # -- the in-process schedule ------------------------------------------------------------
    def _periodic(self) -> list[_Scheduled]:
        c = self.config
        initial = c.log_initial_task_delay_ms / 1000
        now = time.monotonic()
        entries: list[tuple[str, int, Callable[[], object]]] = [
            ("retention", c.log_retention_check_interval_ms, self.run_retention),
            ("flush", c.log_flush_scheduler_interval_ms, self.flush_dirty_logs),
            ("recovery-point-checkpoint", c.log_flush_offset_checkpoint_interval_ms,
             lambda: self._record("checkpoints", self.manager.checkpoints.recovery_points)),
            ("log-start-offset-checkpoint", c.log_flush_start_offset_checkpoint_interval_ms,
             lambda: self._record("checkpoints", self.manager.checkpoints.log_start_offsets)),
            ("high-watermark-checkpoint", c.replica_high_watermark_checkpoint_interval_ms,
             lambda: self._record("checkpoints", self.manager.checkpoints.high_watermarks)),
            ("deletion", FILE_DELETION_INTERVAL_MS, self.delete_expired),
            ("producer-expiration", c.producer_id_expiration_check_interval_ms, self.remove_expired_producers),
        ]
        # A period of Long.MAX (Kafka's "never") simply never comes due.
        return [_Scheduled(now + initial, name, period / 1000, task) for name, period, task in entries
                if period < 2**62]

    def _run_schedule(self) -> None:
        queue = self._periodic()
        heapq.heapify(queue)
        while queue and not self._stop.is_set():
            entry = queue[0]
            wait = entry.due - time.monotonic()
            if wait > 0:
                self._stop.wait(min(wait, 1.0))
                continue
            heapq.heappop(queue)
            try:
                entry.task()
            except Exception:
                logger.exception("scheduled task %s failed", entry.name)
            entry.due = time.monotonic() + entry.period_s
            heapq.heappush(queue, entry)
