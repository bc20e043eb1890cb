"""The engine's log cleaner: picks logs, runs passes, keeps checkpoints and statistics.

Kafka's ``LogCleaner`` + ``LogCleanerManager`` glue. A pass on one log goes:
choose the filthiest due log, clean it (``Cleaner``), write its new first
dirty offset to ``cleaner-offset-checkpoint``, and record what it did. For a
``compact,delete`` log the cleaner also runs retention after cleaning, as
Kafka's cleaner threads do for compacted logs. Threads (``log.cleaner.threads``)
are optional: ``run_pass`` does the same work on demand for the CLI, the HTTP
API and the Kubernetes agent's timers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from stratalog.common.errors import StratalogError
from stratalog.storage.log_manager import LogManager
from stratalog.common.names import TopicPartition
from stratalog.storage.retention import Deletion, delete_old_segments
from stratalog.storage.cleaner.cleaner import Cleaner, CleanerStats, Progress
from stratalog.storage.cleaner.offset_map import new_offset_map
from stratalog.storage.cleaner.selection import LogToClean, log_to_clean, pick_filthiest
from stratalog.storage.cleaner.throttler import Throttler

logger = logging.getLogger(__name__)

MAX_MAP_BYTES = 2**31 - 1  # Kafka caps each thread's dedupe buffer at Int.MaxValue


@dataclass(frozen=True)
class CleanReport:
    """What one cleaning of one log did, for people and for metrics."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    dirty_ratio_before: float
    dirty_ratio_after: float
    bytes_before: int
    bytes_after: int
    stats: CleanerStats
    segments_before: int
    segments_after: int
    retention_deletions: tuple[Deletion, ...] = ()

    @property
    def bytes_reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after

    def to_dict(self) -> dict[str, object]:
        """The JSON form that ``stratalog compact`` prints and the HTTP API returns."""
        stats = self.stats
        return {
            "topic": self.topic_partition.topic, "partition": self.topic_partition.partition,
            "firstDirtyOffset": self.first_dirty_offset, "cleanedUpTo": self.end_offset,
            "bytesRead": stats.bytes_read, "bytesWritten": stats.bytes_written,
            "recordsKept": stats.records_retained, "recordsRemoved": stats.records_removed,
            "dirtyRatioBefore": round(self.dirty_ratio_before, 4),
            "dirtyRatioAfter": round(self.dirty_ratio_after, 4),
            "sizeBefore": self.bytes_before, "sizeAfter": self.bytes_after,
            "segmentsBefore": self.segments_before, "segmentsAfter": self.segments_after,
            "seconds": round(stats.elapsed_seconds, 3), "MBps": round(stats.mb_per_second, 2),
            "retentionDeletions": [d.base_offset for d in self.retention_deletions],
        }


@dataclass
class PartitionCleanerStatus:
    last_clean_ms: int | None = None
    dirty_ratio: float = 0.0
    bytes_reclaimed_total: int = 0
    # Running totals over every pass (thread or on demand), for the service's metrics.
    bytes_read_total: int = 0
    bytes_written_total: int = 0
    records_removed_total: int = 0
    passes: int = 0
    last_report: CleanReport | None = None
    uncleanable_reason: str | None = None


@dataclass
class _Selection:
    chosen: LogToClean | None
    ratios: dict[TopicPartition, float] = field(default_factory=dict)


class LogCleaner:
    def __init__(self, manager: LogManager, *, hash_function: Callable[[bytes], int] | None = None,
                 progress: Progress | None = None, throttler: Throttler | None = None) -> None:
        self.manager = manager
        config = manager.config
        self.threads = config.log_cleaner_threads
        self.map_bytes = min(config.log_cleaner_dedupe_buffer_size // max(self.threads, 1), MAX_MAP_BYTES)
        self.load_factor = config.log_cleaner_io_buffer_load_factor
        self.backoff_ms = config.log_cleaner_backoff_ms
        self.throttler = throttler or Throttler(config.log_cleaner_io_max_bytes_per_second)
        self.hash_function = hash_function
        self.progress = progress
        self.status: dict[TopicPartition, PartitionCleanerStatus] = {}
        self._in_progress: set[TopicPartition] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []

    # -- selection --------------------------------------------------------------------------
    def _select(self, now_ms: int, *, force: bool, topic: str | None,
                exclude: set[TopicPartition]) -> _Selection:
        candidates = []
        ratios = {}
        for tp, log in self.manager.logs().items():
            if not log.config.compact or log.offline or tp in self._in_progress or tp in exclude:
                continue
            if topic is not None and tp.topic != topic:
                continue
            if self.status.get(tp, PartitionCleanerStatus()).uncleanable_reason is not None:
                continue
            candidate = log_to_clean(log, self.manager.checkpoints.cleaner_offset(tp), now_ms)
            ratios[tp] = candidate.dirty_ratio
            self.status.setdefault(tp, PartitionCleanerStatus()).dirty_ratio = candidate.dirty_ratio
            candidates.append((candidate, log.config.min_cleanable_dirty_ratio))
        return _Selection(pick_filthiest(candidates, force=force), ratios)

    # -- one cleaning -----------------------------------------------------------------------
    def clean_filthiest(self, *, force: bool = False, topic: str | None = None,
                        exclude: set[TopicPartition] | None = None) -> CleanReport | None:
        now = self.manager.clock()
        with self._lock:
            selection = self._select(now, force=force, topic=topic, exclude=exclude or set())
            chosen = selection.chosen
            if chosen is None:
                return None
            self._in_progress.add(chosen.topic_partition)
        try:
            return self._clean(chosen, now)
        finally:
            with self._lock:
                self._in_progress.discard(chosen.topic_partition)

    def _clean(self, to_clean: LogToClean, now_ms: int) -> CleanReport | None:
        tp = to_clean.topic_partition
        log = self.manager.log_of(tp)
        status = self.status.setdefault(tp, PartitionCleanerStatus())
        offset_map = new_offset_map(self.map_bytes, self.load_factor, self.hash_function)
        bytes_before = log.size
        try:
            result = Cleaner(offset_map, self.throttler, progress=self.progress,
                             producer_expiration_ms=self.manager.config.producer_id_expiration_ms
                             ).clean(log, to_clean, now_ms)
        except (StratalogError, OSError) as error:
            # As Kafka: a log that fails to clean is marked uncleanable, the others go on.
            logger.error("cleaning %s failed, marking it uncleanable: %s", tp, error)
            status.uncleanable_reason = str(error)
            return None
        try:
            self.manager.checkpoints.set_cleaner_offset(tp, result.end_offset)
        except StratalogError as error:  # the swap is done; only the checkpoint's directory failed
            logger.error("cleaned %s, but its cleaner checkpoint was not written: %s", tp, error)
        deletions: tuple[Deletion, ...] = ()
        if log.config.delete:
            deletions = tuple(delete_old_segments(log, now_ms))
        after = log_to_clean(log, result.end_offset, now_ms)
        report = CleanReport(tp, to_clean.first_dirty_offset, result.end_offset, to_clean.dirty_ratio,
                             after.dirty_ratio, bytes_before, log.size, result.stats,
                             result.segments_before, result.segments_after, deletions)
        status.last_clean_ms = now_ms
        status.dirty_ratio = after.dirty_ratio
        status.bytes_reclaimed_total += max(report.bytes_reclaimed, 0)
        status.bytes_read_total += result.stats.bytes_read
        status.bytes_written_total += result.stats.bytes_written
        status.records_removed_total += result.stats.records_removed
        status.passes += 1
        status.last_report = report
        return report

    def run_pass(self, *, force: bool = False, topic: str | None = None) -> list[CleanReport]:
        """Clean every due compacted log once, filthiest first."""
        reports: list[CleanReport] = []
        done: set[TopicPartition] = set()
        while True:
            report = self.clean_filthiest(force=force, topic=topic, exclude=done)
            if report is None:
                return reports
            done.add(report.topic_partition)
            reports.append(report)

    def dirty_ratios(self) -> dict[TopicPartition, float]:
        now = self.manager.clock()
        return {tp: log_to_clean(log, self.manager.checkpoints.cleaner_offset(tp), now).dirty_ratio
                for tp, log in self.manager.logs().items() if log.config.compact}

    # -- background threads -----------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        for number in range(self.threads):
            worker = threading.Thread(target=self._loop, name=f"stratalog-cleaner-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def _loop(self) -> None:
        while not self._stop.is_set():
            report = self.clean_filthiest()
            if report is None:
                self._stop.wait(self.backoff_ms / 1000)

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join()
        self._workers.clear()
