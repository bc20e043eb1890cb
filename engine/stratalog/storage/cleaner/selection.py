"""Which log to clean next and which range of it (Kafka's ``LogCleanerManager``).

For a compacted log:

* first dirty offset = the cleaner checkpoint, reset to the log start offset
  when it is missing, below the start or past the end;
* first uncleanable offset = the least of the last stable offset (the high
  watermark, or an open transaction's start: its records may yet abort, and
  must not hide older values of their keys meanwhile), the active segment's
  base, and the base of the first dirty segment whose largest timestamp is
  newer than ``min.compaction.lag.ms``, rounded down to the base of the
  segment holding it;
* dirty ratio = cleanable bytes / (clean bytes + cleanable bytes);
* a log is due when its ratio exceeds ``min.cleanable.dirty.ratio``, or when a
  dirty segment's first batch is older than ``max.compaction.lag.ms`` and
  there is something to clean; the filthiest due log goes first.

Nothing here writes: it reads segment sizes and timestamps and returns numbers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from stratalog.common.errors import StratalogError
from stratalog.storage.log import Log
from stratalog.common.names import TopicPartition
from stratalog.storage.segment import LogSegment


@dataclass(frozen=True, slots=True)
class LogToClean:
    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    checkpoint_was_reset: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _base_of_segment_holding(segments: list[LogSegment], offset: int) -> int:
    bases = [s.base_offset for s in segments]
    index = bisect.bisect_right(bases, offset) - 1
    return bases[max(index, 0)]


def cleanable_range(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint had to be reset)."""
    segments = log.segments
    start, end = log.log_start_offset, log.log_end_offset
    reset = checkpoint is None or checkpoint < start or checkpoint > end
    first_dirty = start if reset or checkpoint is None else checkpoint
    try:
        stable = log.last_stable_offset()
    except (StratalogError, OSError):
        stable = start   # unknown (the log closing, its files going): clean nothing of it this round
    candidates = [stable, segments[-1].base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in segments[:-1]:
            if segment.next_offset() <= first_dirty:
                continue
            if segment.largest_timestamp() > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    first_uncleanable = _base_of_segment_holding(segments, min(candidates))
    return first_dirty, max(first_uncleanable, first_dirty), reset and checkpoint is not None


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    first_dirty, first_uncleanable, reset = cleanable_range(log, checkpoint, now_ms)
    segments = log.segments
    # As Kafka's logSegments(from, to): a segment counts when it overlaps the range, so one
    # holding the first dirty offset in its middle counts as clean and as cleanable.
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    dirty_from = _base_of_segment_holding(segments, first_dirty)
    dirty = [s for s in segments if dirty_from <= s.base_offset < max(first_uncleanable, first_dirty)]
    cleanable_bytes = sum(s.size for s in dirty)
    earliest_dirty_timestamp: int | None = None
    for segment in dirty:
        first = segment.first_batch()
        if first is not None and first.max_timestamp > 0:
            ts = first.max_timestamp
            earliest_dirty_timestamp = ts if earliest_dirty_timestamp is None else min(ts, earliest_dirty_timestamp)
    max_lag = max(log.config.max_compaction_lag_ms, 0)
    need_now = (
        max_lag < 2**63 - 1
        and earliest_dirty_timestamp is not None
        and earliest_dirty_timestamp < now_ms - max_lag
    )
    return LogToClean(log.topic_partition, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes,
                      need_now, reset)


def is_due(candidate: LogToClean, min_cleanable_ratio: float, *, force: bool = False) -> bool:
    if candidate.cleanable_bytes <= 0:
        return False
    if force or candidate.need_compaction_now:
        return True
    return candidate.dirty_ratio > min_cleanable_ratio


def pick_filthiest(candidates: list[tuple[LogToClean, float]], *, force: bool = False) -> LogToClean | None:
    """The due log with the highest dirty ratio; ``candidates`` pairs each with its ``min.cleanable.dirty.ratio``."""
    due = [c for c, ratio in candidates if is_due(c, ratio, force=force)]
    return max(due, key=lambda c: c.dirty_ratio) if due else None
