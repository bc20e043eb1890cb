"""A partition directory seen read-only, while the engine keeps writing, cleaning and deleting in it.

The engine holds the directory's ``.lock`` and nothing here takes it. What a
reader can rely on without it, and how this module uses it:

* A file, once opened, keeps its bytes: retention and the cleaner rename old
  segments to ``.deleted`` and unlink them only after ``file.delete.delay.ms``,
  and an open descriptor survives both. So a segment is opened once and read
  to its size at open.
* The segment list changes by renames. Between the first ``.swap`` rename of a
  cleaner swap and its last, the final-name files do not cover the log (a
  group's old segments are half renamed), and ``listdir`` itself is not atomic
  against renames. A listing is therefore taken only when no ``.swap`` file is
  present and two listings in a row agree; otherwise it is retried.
* Readers walk by offset, never by file: after each segment they list again
  and open the segment holding the next offset. A group swapped in meanwhile
  has the same base as its first old segment and covers the rest, so the walk
  continues in the cleaned segment, without a gap or a repeat.
* The active segment grows under the reader; its tail may be preallocated
  zeros (``preallocate=true``) or a batch whose bytes are still being written.
  Both read as "the end" there, never as corruption.

Index files are read through the engine's ``OffsetIndex``/``TimeIndex`` opened
without ``create``, which only ever reads them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.errors import CorruptRecordError
from stratalog.storage.file_records import FileRecords
from stratalog.storage.index import OffsetIndex, TimeIndex
from stratalog.common.names import INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, parse_segment_file
from stratalog.records import BatchInfo, parse_legacy_entry, validate_batch

LIST_ATTEMPTS = 200
OPEN_ATTEMPTS = 50
RETRY_SLEEP_S = 0.01
TAIL_ATTEMPTS = 40  # x TAIL_SLEEP_S: how long a batch being written may take to become whole
TAIL_SLEEP_S = 0.025
_ANY_INDEX_SIZE = 1 << 30  # read-only indexes never grow; the limit only matters for appends


class SegmentsUnavailableError(OSError):
    """The directory never settled into a consistent listing (a swap that does not finish)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    base_offset: int
    path: Path  # the .log
    size: int   # bytes at listing time (the active segment grows); -1 when not asked for


def _list_once(directory: Path) -> tuple[tuple[int, ...], bool]:
    bases = []
    swapping = False
    for name in os.listdir(directory):
        parsed = parse_segment_file(name)
        if parsed is None:
            continue
        if parsed.state == SWAP_SUFFIX:
            swapping = True
        elif parsed.state == "" and parsed.kind == LOG_SUFFIX:
            bases.append(parsed.base_offset)
    return tuple(sorted(bases)), swapping


def list_segments(directory: Path, *, sizes: bool = False) -> list[SegmentFile]:
    """The segments in base-offset order, from a listing taken outside any swap (see the module doc).

    ``sizes`` also stats each ``.log`` (planning needs sizes; walking does not).
    """
    previous: tuple[int, ...] | None = None
    for _ in range(LIST_ATTEMPTS):
        bases, swapping = _list_once(directory)
        if swapping:
            previous = None
            time.sleep(RETRY_SLEEP_S)
            continue
        if bases == previous:
            segments = _files(directory, bases, sizes)
            if segments is not None:
                return segments
            previous = None  # renamed since the listing: start over
            continue
        previous = bases
    raise SegmentsUnavailableError(f"{directory}: the segment files kept changing (a swap that never completes?)")


def _files(directory: Path, bases: tuple[int, ...], sizes: bool) -> list[SegmentFile] | None:
    segments = []
    for base in bases:
        path = directory / f"{base:020d}{LOG_SUFFIX}"
        try:
            segments.append(SegmentFile(base, path, path.stat().st_size if sizes else -1))
        except FileNotFoundError:
            return None
    return segments


def floor_segment(segments: list[SegmentFile], offset: int) -> SegmentFile | None:
    """The segment holding ``offset``: the last one whose base is ≤ it."""
    found = None
    for segment in segments:
        if segment.base_offset > offset:
            break
        found = segment
    return found


class OpenSegment:
    """One segment opened read-only: its batches from an offset, to its size at open."""

    def __init__(self, segment: SegmentFile, *, active: bool) -> None:
        self.base_offset = segment.base_offset
        self.path = segment.path
        self.active = active
        self.records = FileRecords(segment.path, read_only=True)  # FileNotFoundError: renamed meanwhile

    def close(self) -> None:
        self.records.close()

    def __enter__(self) -> OpenSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def position_of(self, offset: int) -> int:
        """Where to start scanning for ``offset``: the offset index's floor entry, or 0."""
        if offset <= self.base_offset:
            return 0
        index = OffsetIndex(self.path.with_suffix(INDEX_SUFFIX), self.base_offset, _ANY_INDEX_SIZE, create=False)
        _, position = index.lookup(offset)
        return position if 0 <= position < self.records.size else 0

    def batches(self, offset: int) -> Iterator[tuple[BatchInfo, bytes]]:
        """Whole batches holding offsets ≥ ``offset``, in file order.

        A header that cannot be a batch ends the walk in the active segment
        (preallocated zeros, a write in flight) and is an error elsewhere.
        """
        try:
            for info, data in self.records.batches_with_data(self.position_of(offset)):
                if info.last_offset >= offset:
                    yield info, data
        except CorruptRecordError:
            if not self.active:
                raise

    def checked_batches(self, offset: int) -> Iterator[tuple[BatchInfo, bytes]]:
        """Like ``batches``, each batch's CRC checked; in the active segment a failing batch is re-read.

        A batch whose bytes are still being written can fail its CRC; a moment
        later, through a fresh open (the size at open may be stale too), it is whole.
        """
        source = str(self.path)
        attempts = 0
        while True:
            for info, data in self.batches(offset):
                try:
                    if info.magic >= 2:
                        validate_batch(data, 0, source=source)
                    else:
                        parse_legacy_entry(data, 0, verify_crc=True, source=source)
                except CorruptRecordError:
                    if not self.active or attempts >= TAIL_ATTEMPTS:
                        raise
                    break
                yield info, data
                offset = info.last_offset + 1
            else:
                return
            attempts += 1
            time.sleep(TAIL_SLEEP_S)
            self.records.close()
            self.records = FileRecords(self.path, read_only=True)

    def next_offset(self) -> int:
        """One past the last offset (the log end offset for the active segment), as ``LogSegment.next_offset``."""
        index = OffsetIndex(self.path.with_suffix(INDEX_SUFFIX), self.base_offset, _ANY_INDEX_SIZE, create=False)
        _, position = index.last_entry()
        position = position if 0 <= position < self.records.size else 0
        next_offset = self.base_offset
        try:
            for info in self.records.batches(position):
                next_offset = info.last_offset + 1
        except CorruptRecordError:
            if not self.active:
                raise
        return next_offset

    def max_timestamp(self) -> int:
        """The largest timestamp, from the time index's last entry (-1 for none or an index still being written)."""
        index = TimeIndex(self.path.with_suffix(TIME_INDEX_SUFFIX), self.base_offset, _ANY_INDEX_SIZE, create=False)
        timestamp, _ = index.last_entry()
        return timestamp


def open_segment(directory: Path, offset: int) -> tuple[OpenSegment, SegmentFile | None] | None:
    """Open the segment holding ``offset`` (retrying across renames) and return it with the next one.

    None when ``offset`` is below every segment (retention removed it).
    """
    for _ in range(OPEN_ATTEMPTS):
        segments = list_segments(directory)
        holder = floor_segment(segments, offset)
        if holder is None:
            return None
        index = segments.index(holder)
        following = segments[index + 1] if index + 1 < len(segments) else None
        try:
            return OpenSegment(holder, active=following is None), following
        except FileNotFoundError:
            time.sleep(RETRY_SLEEP_S)  # renamed .deleted between the listing and the open
    raise SegmentsUnavailableError(f"{directory}: the segment holding offset {offset} kept disappearing")
