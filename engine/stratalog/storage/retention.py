"""Which old segments a retention pass deletes, and why (Kafka's ``deleteOldSegments``).

The plan is pure: facts about the segments in, decisions out, so seed 003's
``retention.bytes`` arithmetic and seed 000's log-start-offset rule can be
tested without files. ``apply_retention`` then carries a plan out on a log
under its lock. The three breaches run in Kafka's order, each on what the
previous one left:

1. log start offset: a segment goes when the *next* segment's base offset is
   ≤ the log start offset (it holds nothing readable any more);
2. size (only with ``delete`` in ``cleanup.policy``): ``diff = size −
   retention.bytes`` over the whole log, active segment included; from the
   oldest segment, delete while ``diff − segment.size ≥ 0``;
3. time (likewise): ``now − largest record timestamp > retention.ms``, the
   file's mtime standing in only when the segment has no timestamps.

Only a prefix of segments can go, never anything at or above the high
watermark, and never the last segment while it is empty. When every segment
would go, the log rolls first so that one (empty) segment remains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from stratalog.common.config import LogConfig
from stratalog.common.errors import OffsetOutOfRangeError
from stratalog.storage.log import Log

LOG_START_OFFSET_BREACH = "log start offset breach"
RETENTION_SIZE_BREACH = "retention size breach"
RETENTION_TIME_BREACH = "retention time breach"


class SegmentView(Protocol):
    """What planning needs of a segment. A ``LogSegment`` is one; so is ``SegmentFacts``.

    ``largest_timestamp`` is a method so that it is read (from the time index) only
    for the segments the time rule actually reaches: the oldest few, not all of them.
    """

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    def largest_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    """Plain facts about a segment, for planning without files (tests, what-if reports)."""

    base_offset: int
    size: int
    max_timestamp: int  # max record timestamp, or the file's mtime when it has none

    def largest_timestamp(self) -> int:
        return self.max_timestamp


@dataclass(frozen=True, slots=True)
class Deletion:
    base_offset: int
    size: int
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    deletions: tuple[Deletion, ...]
    roll_first: bool  # every segment goes: roll a new active segment before deleting

    @property
    def deleted_bases(self) -> list[int]:
        return [d.base_offset for d in self.deletions]


Predicate = Callable[[SegmentView, "SegmentView | None"], "str | None"]


def _deletable_prefix(segments: Sequence[SegmentView], log_end_offset: int, high_watermark: int,
                      predicate: Predicate, reason: str) -> list[Deletion]:
    """Kafka's ``deletableSegments``: walk from the oldest, stop at the first segment that stays."""
    deletions = []
    for index, segment in enumerate(segments):
        following = segments[index + 1] if index + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        if following is None and segment.size == 0:
            break
        if high_watermark < upper_bound:
            break
        detail = predicate(segment, following)
        if detail is None:
            break
        deletions.append(Deletion(segment.base_offset, segment.size, reason, detail))
    return deletions


def plan_retention(segments: Sequence[SegmentView], config: LogConfig, *, log_start_offset: int,
                   log_end_offset: int, high_watermark: int, now_ms: int) -> RetentionPlan:
    remaining = list(segments)
    deletions: list[Deletion] = []

    def run(predicate: Predicate, reason: str) -> None:
        nonlocal remaining
        found = _deletable_prefix(remaining, log_end_offset, high_watermark, predicate, reason)
        deletions.extend(found)
        remaining = remaining[len(found):]

    def start_breach(segment: SegmentView, following: SegmentView | None) -> str | None:
        if following is not None and following.base_offset <= log_start_offset:
            return f"next segment starts at {following.base_offset} ≤ log start offset {log_start_offset}"
        return None

    run(start_breach, LOG_START_OFFSET_BREACH)

    if config.delete and config.retention_bytes >= 0:
        size = sum(s.size for s in remaining)
        if size >= config.retention_bytes:
            diff = size - config.retention_bytes

            def size_breach(segment: SegmentView, _following: SegmentView | None) -> str | None:
                nonlocal diff
                if diff - segment.size >= 0:
                    detail = f"diff {diff} − size {segment.size} ≥ 0 (retention.bytes {config.retention_bytes})"
                    diff -= segment.size
                    return detail
                return None

            run(size_breach, RETENTION_SIZE_BREACH)

    if config.delete and config.retention_ms >= 0:
        def time_breach(segment: SegmentView, _following: SegmentView | None) -> str | None:
            largest = segment.largest_timestamp()
            age = now_ms - largest
            if age > config.retention_ms:
                return (f"largest timestamp {largest} is {age} ms old "
                        f"(retention.ms {config.retention_ms})")
            return None

        run(time_breach, RETENTION_TIME_BREACH)

    return RetentionPlan(tuple(deletions), roll_first=bool(deletions) and len(deletions) == len(segments))


def delete_old_segments(log: Log, now_ms: int | None = None) -> list[Deletion]:
    """Run one retention pass on ``log``: plan under its lock, then roll / rename ``.deleted`` / move the start."""
    now = log.clock() if now_ms is None else now_ms
    with log.maintenance_lock, log.lock:
        plan = plan_retention(log.segments, log.config, log_start_offset=log.log_start_offset,
                              log_end_offset=log.log_end_offset, high_watermark=log.high_watermark, now_ms=now)
        if not plan.deletions:
            return []
        if plan.roll_first:
            log.roll()
        by_base = {s.base_offset: s for s in log.segments}
        log.remove_segments([by_base[d.base_offset] for d in plan.deletions])
        log.advance_log_start_offset(log.segments[0].base_offset)
        return list(plan.deletions)


def delete_records(log: Log, before_offset: int) -> int:
    """Kafka's DeleteRecords: move the log start offset, then let whole segments below it go.

    Returns the new log start offset. Refuses an offset past the high watermark
    (``OffsetOutOfRangeError``) and changes nothing then.
    """
    if before_offset == -1:
        before_offset = log.high_watermark  # Kafka's DeleteRecords: -1 means "up to the high watermark"
    elif before_offset < 0:
        raise OffsetOutOfRangeError(
            f"{log.topic_partition}: cannot delete records before offset {before_offset}; use an offset ≥ 0, "
            "or -1 for the high watermark"
        )
    log.maybe_increment_log_start_offset(before_offset)
    with log.maintenance_lock, log.lock:
        plan = plan_retention(log.segments, _START_ONLY, log_start_offset=log.log_start_offset,
                              log_end_offset=log.log_end_offset, high_watermark=log.high_watermark,
                              now_ms=log.clock())
        if plan.deletions:
            by_base = {s.base_offset: s for s in log.segments}
            log.remove_segments([by_base[d.base_offset] for d in plan.deletions])
    return log.log_start_offset


# Only the log-start-offset rule applies to DeleteRecords, whatever the topic's policy.
_START_ONLY = LogConfig.from_overrides({"cleanup.policy": "compact"})
