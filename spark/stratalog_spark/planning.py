"""Offset ranges → Spark tasks: whole segments, big enough to pay for a task.

Every input partition of a Python data source is one Spark task, and a task
costs some 30 ms of fixed overhead on top of its work. So a partition's range
is cut at segment boundaries and consecutive segments are grouped until a
task holds ``bytesPerPartition`` (64 MiB by default) of log: a task reads
whole segment files sequentially and never repeats an index lookup.
Then Kafka's own knobs apply, in Kafka's way: ``maxRecordsPerPartition``
splits any task holding more offsets than that, and ``minPartitions``, when
there are fewer tasks, divides them by offset count in proportion to their
size (``KafkaOffsetRangeCalculator``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .store import Chunk, LogStore


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def group_chunks(topic: str, partition: int, chunks: list[Chunk], target_bytes: int) -> list[OffsetRange]:
    ranges = []
    start: int | None = None
    size = 0
    for chunk in chunks:
        if start is None:
            start, size = chunk.start, 0
        size += chunk.size
        if size >= target_bytes:
            ranges.append(OffsetRange(topic, partition, start, chunk.end))
            start = None
    if start is not None:
        ranges.append(OffsetRange(topic, partition, start, chunks[-1].end))
    return ranges


def split_records(ranges: list[OffsetRange], max_records: int) -> list[OffsetRange]:
    out = []
    for r in ranges:
        parts = max(1, math.ceil(r.size / max_records))
        out.extend(_divide(r, parts))
    return out


def split_min_partitions(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    """Kafka's ``KafkaOffsetRangeCalculator.getRanges``."""
    if len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out = []
    for r in ranges:
        parts = max(round(r.size / total * min_partitions), 1) if total else 1
        out.extend(_divide(r, parts))
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    remaining, start = r.size, r.start
    for part in range(parts):
        this = remaining // (parts - part)  # the last part takes the rounding
        remaining -= this
        end = min(start + this, r.end)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def plan(store: LogStore, ranges: list[OffsetRange], *, bytes_per_partition: int, min_partitions: int | None,
         max_records_per_partition: int | None) -> list[OffsetRange]:
    """The tasks reading ``ranges`` (empty ranges dropped)."""
    tasks = []
    for r in ranges:
        if r.size <= 0:
            continue
        chunks = store.chunks(r.topic, r.partition, r.start, r.end)
        tasks.extend(group_chunks(r.topic, r.partition, chunks, bytes_per_partition))
    if max_records_per_partition:
        tasks = split_records(tasks, max_records_per_partition)
    if min_partitions:
        tasks = split_min_partitions(tasks, min_partitions)
    return tasks
