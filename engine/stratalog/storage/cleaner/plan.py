"""Applying a compaction plan: one cleaner pass whose "latest offset per key" was computed elsewhere.

Kafka's cleaner builds its key → latest-offset map in memory, bounded by
``log.cleaner.dedupe.buffer.size``; a key space larger than that takes several
passes. A plan (see ``plan_file``) moves that map out of the engine: Spark
computes the offsets to keep over the whole topic, sorted, and the engine
merges that stream with the batches in offset order, so one pass cleans
everything the plan covers with O(1) memory.

Only the "which record is its key's latest" decision comes from the plan.
The rest is the cleaner's own code and rules: the cleanable range (never the
active segment, ``min.compaction.lag.ms``), segment grouping, tombstones kept
until their delete horizon, transactional batches and markers, keyless
records dropped, batches rebuilt with their codec and producer fields, and
the crash-safe ``.cleaned`` → ``.swap`` → final swap per group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stratalog.storage.log import Log
from stratalog.storage.log_manager import LogManager
from stratalog.common.names import TopicPartition
from stratalog.records import Record
from stratalog.storage.cleaner.cleaner import Cleaner, CleanerStats
from stratalog.storage.cleaner.offset_map import OffsetMap
from stratalog.storage.cleaner.producers import PRODUCER_ID_EXPIRATION_MS
from stratalog.storage.cleaner.plan_file import CompactionPlanError, PlanHeader, check_keep_file, iter_keep_offsets, read_header
from stratalog.storage.cleaner.selection import cleanable_range
from stratalog.storage.cleaner.throttler import Throttler

_NO_MORE = 2**63 - 1


@dataclass(frozen=True)
class PlanReport:
    topic_partition: TopicPartition
    plan: PlanHeader
    end_offset: int  # offsets below it were rewritten by the plan; the cleaner checkpoint can move here
    stats: CleanerStats
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int

    def to_json(self) -> dict[str, object]:
        stats = self.stats
        return {"topic": self.topic_partition.topic, "partition": self.topic_partition.partition,
                "planHighWatermark": self.plan.high_watermark, "planOffsets": self.plan.count,
                "cleanedUpTo": self.end_offset, "recordsRead": stats.records_read,
                "recordsKept": stats.records_retained, "recordsRemoved": stats.records_removed,
                "bytesRead": stats.bytes_read, "bytesWritten": stats.bytes_written,
                "sizeBefore": self.bytes_before, "sizeAfter": self.bytes_after,
                "segmentsBefore": self.segments_before, "segmentsAfter": self.segments_after,
                "seconds": round(stats.elapsed_seconds, 3)}


class KeepFileDecision:
    """``KeepDecision`` from a sorted keep file: a forward-only cursor, as records come in offset order."""

    def __init__(self, offsets: Iterator[int], reach: int) -> None:
        self._offsets = offsets
        self._reach = reach
        self._current = next(offsets, _NO_MORE)
        self._last_asked = -1

    @property
    def reach(self) -> int:
        return self._reach

    def superseded(self, record: Record) -> bool:
        offset = record.offset
        if offset <= self._last_asked:
            # The merge is only right in offset order; anything else is a bug, not a plan to follow.
            raise CompactionPlanError(f"plan merge asked about offset {offset} after {self._last_asked}")
        self._last_asked = offset
        while self._current < offset:
            self._current = next(self._offsets, _NO_MORE)
        return self._current != offset


def apply_compaction_plan(log: Log, keep_offsets_file: Path, now_ms: int, *,
                          throttler: Throttler | None = None,
                          producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> PlanReport:
    """Rewrite ``log`` below min(plan high watermark, first uncleanable offset), keeping the plan's offsets.

    Refuses (``CompactionPlanError``) a plan for another partition, or one whose
    high watermark is past the log's end (a log truncated or recreated since).
    """
    header = read_header(keep_offsets_file)
    tp = log.topic_partition
    if (header.topic, header.partition) != (tp.topic, tp.partition):
        raise CompactionPlanError(f"{keep_offsets_file} is a plan for {header.topic}-{header.partition}, not {tp}")
    check_keep_file(keep_offsets_file, header)
    stats = CleanerStats()
    with log.maintenance_lock:
        if header.high_watermark > log.log_end_offset:
            raise CompactionPlanError(
                f"{keep_offsets_file}: the plan covers offsets up to {header.high_watermark}, past the end of "
                f"{tp} ({log.log_end_offset}); was the log truncated or recreated since it was planned?")
        _, first_uncleanable, _ = cleanable_range(log, None, now_ms)
        end = min(header.high_watermark, first_uncleanable)
        before, bytes_before = len(log.segments), log.size
        decision = KeepFileDecision(iter_keep_offsets(keep_offsets_file), reach=end - 1)
        # The offset map is unused when a decision is given; the smallest one keeps the signature honest.
        cleaner = Cleaner(OffsetMap(1), throttler or Throttler(float("inf")), decision=decision,
                          producer_expiration_ms=producer_expiration_ms)
        segments = [s for s in log.segments if s.base_offset < end]
        if segments:
            cleaner.rewrite(log, segments, now_ms, first_uncleanable, stats)
        stats.elapsed_seconds = time.monotonic() - stats.started
        return PlanReport(tp, header, end, stats, before, len(log.segments), bytes_before, log.size)


def apply_to_partition(manager: LogManager, topic: str, partition: int, keep_offsets_file: Path) -> PlanReport:
    """Apply a plan to one partition of an open engine, then move its cleaner checkpoint past the pass.

    The checkpoint moves so that the regular cleaner counts what the plan
    cleaned as clean, never backwards.
    """
    log = manager.get_log(topic, partition)
    throttler = Throttler(manager.config.log_cleaner_io_max_bytes_per_second)
    report = apply_compaction_plan(log, keep_offsets_file, manager.clock(), throttler=throttler,
                                   producer_expiration_ms=manager.config.producer_id_expiration_ms)
    tp = TopicPartition(topic, partition)
    checkpoint = manager.checkpoints.cleaner_offset(tp)
    if checkpoint is None or checkpoint < report.end_offset:
        manager.checkpoints.set_cleaner_offset(tp, report.end_offset)
    return report
