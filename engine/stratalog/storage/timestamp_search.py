"""ListOffsets on a log's segments: the first offset at or after a time, and Kafka's special times.

Kafka's ``UnifiedLog.fetchOffsetByTimestamp``, over a snapshot of the segments and of the log's
start and end that ``Log.offset_for_timestamp`` takes under its lock; the search itself reads the
time indexes and the segments' batches without it.

One deliberate difference from Kafka: Kafka searches only the first segment whose largest
timestamp reaches the target, and answers "none" when every match there lies below the log start
offset (a segment retention has not yet removed). Here the search goes on to the next segments and
returns the real first match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stratalog.common.errors import OffsetOutOfRangeError
from stratalog.common.names import TopicPartition
from stratalog.storage.segment import LogSegment

# ListOffsets' special times (Kafka's ``ListOffsetsRequest``).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


def offset_for_timestamp(topic_partition: TopicPartition, segments: Sequence[LogSegment], log_start_offset: int,
                         log_end_offset: int, timestamp: int) -> OffsetAndTimestamp | None:
    """The first offset whose timestamp is ≥ ``timestamp``, or a special time's answer (-1, -2, -3,
    -4, -5); None when no record is that late (or, for the max timestamp, none has a time)."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return OffsetAndTimestamp(log_start_offset, -1)
    if timestamp == LATEST_TIMESTAMP:
        return OffsetAndTimestamp(log_end_offset, -1)
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp_offset(segments, log_start_offset)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return OffsetAndTimestamp(-1, -1)
    if timestamp < 0:
        raise OffsetOutOfRangeError(f"{topic_partition}: timestamp {timestamp} is not a valid query")
    for segment in segments:
        if segment.max_timestamp_so_far < timestamp:
            continue
        found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
        if found is not None:
            return OffsetAndTimestamp(found.offset, found.timestamp)
    return None


def _max_timestamp_offset(segments: Sequence[LogSegment], log_start_offset: int) -> OffsetAndTimestamp | None:
    best = max(segments, key=lambda s: s.max_timestamp_so_far)
    if best.max_timestamp_so_far < 0:
        return None
    record = best.find_offset_by_timestamp(best.max_timestamp_so_far, log_start_offset)
    return OffsetAndTimestamp(record.offset, record.timestamp) if record else None
