"""A partition's segments on disk: their list, rolls, flushes, truncation, swaps and deletion
(Kafka's ``LocalLog``).

This is the half of a partition's log that knows files and nothing of records' meaning: where
the log ends, which segment holds an offset, how far it is fsynced (the recovery point), and the
crash-safe ways segments come and go (``.cleaned`` → ``.swap`` → final name; ``.deleted`` files
removed after ``file.delete.delay.ms``). Offsets' meaning -- the log start offset, the high
watermark, leader epochs, producers and transactions -- is ``log.Log``'s, which owns one of these
and calls it under its own lock, as Kafka's ``UnifiedLog`` calls its ``LocalLog``.

Every method but the queries expects the caller to hold ``lock`` and to guard its I/O with the log
directory's failure channel; those that remove segments return the base offsets they removed, so
that the caller can drop what it keeps per segment (producer snapshots).
"""

from __future__ import annotations

import bisect
import os
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from stratalog.common.config import LogConfig
from stratalog.common.crash_points import crash_point
from stratalog.common.errors import UnknownTopicOrPartitionError
from stratalog.common.files import fsync_dir
from stratalog.common.names import CLEANED_SUFFIX, DELETED_SUFFIX, SEGMENT_FILE_SUFFIXES, SWAP_SUFFIX, TopicPartition
from stratalog.storage.log_dir_failure import LogDirFailureChannel
from stratalog.storage.segment import LogSegment, SegmentSlice

Clock = Callable[[], int]


class LocalLog:
    def __init__(self, directory: Path, topic_partition: TopicPartition, config: LogConfig,
                 segments: list[LogSegment], *, recovery_point: int, clock: Clock,
                 failures: LogDirFailureChannel, lock: threading.RLock) -> None:
        if not segments:
            raise ValueError(f"{topic_partition}: a log needs at least one segment")
        self.dir = directory
        # The log directory this partition lives in: an I/O error here takes all of it offline.
        self.log_dir = directory.parent
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.failures = failures
        self.lock = lock   # the owning log's: segments change only under it
        self._name = str(topic_partition)   # said by every check while the directory is healthy
        self._segments: dict[int, LogSegment] = {s.base_offset: s for s in segments}
        self._bases: list[int] = sorted(self._segments)
        self.recovery_point = recovery_point
        self.last_flush_ms = clock()
        self._unflushed_new_segment = False
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.closed = False

    # -- queries ------------------------------------------------------------------------------
    @property
    def segments(self) -> list[LogSegment]:
        with self.lock:
            return [self._segments[b] for b in self._bases]

    @property
    def segment_count(self) -> int:
        return len(self._bases)

    @property
    def first_base_offset(self) -> int:
        return self._bases[0]

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[self._bases[-1]]

    def floor_segment(self, offset: int) -> LogSegment | None:
        index = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[self._bases[index]] if index >= 0 else None

    def segments_from(self, offset: int) -> Iterator[LogSegment]:
        with self.lock:
            bases = list(self._bases)
        start = max(0, bisect.bisect_right(bases, offset) - 1)
        for base in bases[start:]:
            segment = self._segments.get(base)
            if segment is not None:
                yield segment

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset()

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def check_open(self) -> None:
        if self.closed:
            raise UnknownTopicOrPartitionError(f"{self.topic_partition}: the log is closed")
        self.failures.check(self.log_dir, self._name)

    @property
    def offline(self) -> bool:
        return self.failures.is_offline(self.log_dir)

    # -- read ---------------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int, max_offset: int, active: LogSegment, active_size: int, *,
             min_one_message: bool, zero_copy: bool) -> SegmentSlice | None:
        """Batches from the segment holding ``start_offset`` on, below ``max_offset``, within ``max_bytes``;
        ``active`` and its size as the caller saw them under the lock (appends may go on meanwhile)."""
        # A read within the active segment (a consumer at the tail) needs no walk of the segment list:
        # what lies past it was appended after the caller's look and is above ``max_offset``.
        segments = (active,) if start_offset >= active.base_offset else self.segments_from(start_offset)
        for segment in segments:
            max_position = active_size if segment is active else None
            if max_offset < segment.next_offset():
                bound = segment.translate_offset(max_offset)
                max_position = bound.position if bound is not None else max_position
            piece = segment.read(start_offset, max_bytes, max_position=max_position,
                                 min_one_message=min_one_message, zero_copy=zero_copy, remember_end=segment is active)
            if piece is not None and (piece.data or piece.region is not None):
                return piece
        return None

    # -- segments come ------------------------------------------------------------------------
    def new_segment(self, base_offset: int) -> LogSegment:
        """A new, empty segment file set at ``base_offset`` (not yet in the list)."""
        config = self.config
        jitter = 0
        if config.segment_jitter_ms > 0:
            jitter = random.randrange(min(config.segment_jitter_ms, config.segment_ms))
        # Leftovers of an earlier incarnation of this base offset; exact names, because
        # listing a directory of thousands of segments on every roll is quadratic.
        # (.snapshot files are Kafka's producer state: left alone, as Kafka's roll does.)
        for kind in SEGMENT_FILE_SUFFIXES:
            for state in ("", CLEANED_SUFFIX, SWAP_SUFFIX):
                (self.dir / f"{base_offset:020d}{kind}{state}").unlink(missing_ok=True)
        return LogSegment(
            self.dir, base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            create=True,
            preallocate_bytes=config.segment_bytes if config.preallocate else 0,
            roll_jitter_ms=jitter,
            now_ms=self.clock(),
        )

    def roll(self, new_offset: int) -> LogSegment | None:
        """Close the active segment to appends and start one at ``new_offset``, flushed up to it; None
        when the active segment is empty and already starts there."""
        active = self.active_segment
        if active.base_offset == new_offset and active.size == 0:
            return None
        active.on_become_inactive()
        segment = self.new_segment(new_offset)
        self._segments[new_offset] = segment
        self._bases.append(new_offset)
        self._unflushed_new_segment = True
        # Kafka flushes the rolled segments asynchronously; synchronously here keeps the
        # recovery point honest without a background thread.
        self.flush(new_offset)
        return segment

    # -- flush --------------------------------------------------------------------------------
    def flush(self, target: int) -> None:
        """fsync every segment holding offsets in [recovery point, ``target``), then move the recovery point."""
        if target <= self.recovery_point:
            return
        for segment in self.segments_from(self.recovery_point):
            if segment.base_offset >= target:
                break
            segment.flush()
        if self._unflushed_new_segment:
            fsync_dir(self.dir)
            self._unflushed_new_segment = False
        self.recovery_point = target
        self.last_flush_ms = self.clock()

    def flush_for_shutdown(self) -> None:
        """fsync the ``.log`` files past the recovery point (indexes are left to recovery)."""
        for segment in self.segments_from(self.recovery_point):
            segment.log.flush()

    # -- segments go --------------------------------------------------------------------------
    def truncate_to(self, target: int) -> set[int]:
        """Remove everything at and above ``target``, which lies in a segment of this log; the batch
        holding it goes whole. The recovery point is clamped to the new end."""
        doomed = [self._segments[b] for b in self._bases if b > target]
        removed = self.remove_segments(doomed)
        active = self.active_segment
        active.truncate_to(target)
        active.resize_indexes_to_max()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        return removed

    def start_at(self, offset: int) -> set[int]:
        """Remove every segment and start again, empty, at ``offset`` (Kafka's truncateFullyAndStartAt)."""
        removed = self.remove_segments(self.segments)
        self._segments[offset] = self.new_segment(offset)
        self._bases = [offset]
        self.recovery_point = offset
        return removed

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> set[int]:
        """Swap a ``.cleaned`` segment in for the segments it replaces, crash-safely (Kafka's ``replaceSegments``).

        1. ``.cleaned`` → ``.swap`` for every file of the new segment: from here a
           crash completes the swap on load; before the last rename it aborts it.
        2. The old segments leave the map and are renamed ``.deleted``.
        3. ``.swap`` → final name, then the directory is fsynced.

        Returns the base offsets replaced, the new segment's excepted.
        """
        crash_point("swap.begin")
        new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX, crash_point_after_each="swap.renamed_to_swap")
        due = self.clock() + self.config.file_delete_delay_ms
        replaced = set()
        for segment in sorted(old, key=lambda s: s.base_offset):
            if self._segments.get(segment.base_offset) is not segment:
                continue  # already gone (retention or truncation since the pass began)
            replaced.add(segment.base_offset)
            del self._segments[segment.base_offset]
            self._bases.remove(segment.base_offset)
            self._pending_deletes.append((due, segment))  # before the rename: closed even if it fails
            segment.change_suffix("", DELETED_SUFFIX)
            crash_point("swap.old_deleted")
        new.change_suffix(SWAP_SUFFIX, "")
        crash_point("swap.renamed_to_final")
        replaced.discard(new.base_offset)
        self._segments[new.base_offset] = new
        bisect.insort(self._bases, new.base_offset)
        fsync_dir(self.dir)
        return replaced

    def remove_segments(self, segments: list[LogSegment]) -> set[int]:
        """Take segments out of the list and rename their files ``.deleted``; returns their base offsets."""
        # Files are renamed at once but stay open until physically deleted, so a reader
        # that picked the segment up a moment ago still reads the bytes it expects.
        due = self.clock() + self.config.file_delete_delay_ms
        removed = set()
        for segment in segments:
            if self._segments.pop(segment.base_offset, None) is None:
                continue
            self._bases.remove(segment.base_offset)
            self._pending_deletes.append((due, segment))  # before the rename: closed even if it fails
            segment.change_suffix("", DELETED_SUFFIX)
            removed.add(segment.base_offset)
        return removed

    def expired_deletions(self, now: int) -> list[LogSegment]:
        """The ``.deleted`` segments whose delay has passed, no longer pending (the caller deletes their files)."""
        due = [segment for when, segment in self._pending_deletes if when <= now]
        self._pending_deletes = [(w, s) for w, s in self._pending_deletes if w > now]
        return due

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self, *, offline: bool, failed: Exception | None = None) -> None:
        """Close every segment; in an offline directory only release the descriptors (no trims).
        Every descriptor is released whatever a segment's close raises (a failed trim, an index found
        corrupt); the first error (``failed`` first) is raised after."""
        for segment in self.segments:
            try:
                segment.close_files() if offline else segment.close()
            except Exception as error:  # noqa: BLE001 - raised below, once the other segments are closed
                failed = failed or error
        for _, segment in self._pending_deletes:
            try:
                segment.close_files()
            except Exception as error:  # noqa: BLE001 - as above
                failed = failed or error
        self.closed = True
        if failed is not None:
            raise failed

    def rename_dir(self, new_dir: Path) -> None:
        os.replace(self.dir, new_dir)
        self.dir = new_dir
