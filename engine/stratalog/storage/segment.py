"""One segment of a partition's log: a ``.log`` plus its ``.index`` and ``.timeindex``.

This is Kafka's ``LogSegment``. It appends batches whose offsets are already
assigned, keeps the sparse indexes (one entry per ``index.interval.bytes``),
translates offsets and timestamps to file positions, decides whether it must
roll, recovers itself from its ``.log`` after a crash, and truncates. It never
assigns offsets and holds no lock: the ``Log`` above it does both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from stratalog.common.crash_points import crash_point
from stratalog.common.errors import CorruptRecordError, StratalogError
from stratalog.storage.batch_scan import HEADER_READ_AHEAD, scan_batches
from stratalog.storage.file_records import FileRecords
from stratalog.storage.file_region import FileRegion
from stratalog.storage.index import OffsetIndex, TimeIndex
from stratalog.storage.leader_epoch import LeaderEpochCache
from stratalog.storage.validation import AsSentRules
from stratalog.common.names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file
from stratalog.records import (
    BatchInfo,
    Record,
    RecoveryScan,
    decode_any,
    native,
    parse_legacy_entry,
    peek_batch,
    scan_natively,
    validate_batch,
)
from stratalog.common.limits import INT32_MAX

NO_TIMESTAMP = -1
TRANSLATE_SCAN_CHUNK = 8 * 1024   # enough for the batches between an index entry and the next, as a rule

# Called by recovery for every valid batch: (batch header, batch bytes).
BatchVisitor = Callable[[BatchInfo, bytes], None]


class SegmentOffsetOverflowError(StratalogError):
    """An offset that does not fit the segment's int32 relative offsets."""


# A time bound that is never passed (Kafka's Long.MAX_VALUE: the native kernel takes Kafka longs),
# and one that every timestamp passes, Long.MIN_VALUE included (it never reaches the kernel).
NEVER = (1 << 63) - 1
ALWAYS = -(1 << 63) - 1

# How many places the active segment remembers of each kind (batches appended lately, where
# readers' one-batch reads ended): a partition's tail rarely has more followers and consumers at
# once. Past it a dict starts again empty rather than evict; its next read goes by the index.
RECENT_PLACES = 64

# A remembered batch, keyed by its base offset: (position, size, last offset, max timestamp, record count).
_Placed = tuple[int, int, int, int, int]


class RollParams(NamedTuple):
    """What an append needs the active segment to consider before it is written (a tuple: one is
    made for every append)."""

    max_segment_ms: int  # segment.ms
    max_segment_bytes: int
    max_timestamp_in_append: int
    last_offset_in_append: int
    append_size: int
    now_ms: int


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Bytes read from one segment, starting at a batch boundary."""

    base_offset: int  # the segment's
    position: int
    data: bytes
    first_entry_incomplete: bool = False
    region: FileRegion | None = None   # a zero-copy read's bytes, left in the file (``data`` is then empty)
    # The header of the batch the slice starts with (its file position): a reader cutting the slice
    # at a whole batch need not read it again when the slice holds no more than this batch.
    start_batch: BatchInfo | None = None


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        create: bool,
        suffix: str = "",
        preallocate_bytes: int = 0,
        roll_jitter_ms: int = 0,
        now_ms: int = 0,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        self.log = FileRecords(segment_file(directory, base_offset, LOG_SUFFIX, suffix),
                               create=create, preallocate_bytes=preallocate_bytes)
        self.offset_index = OffsetIndex(segment_file(directory, base_offset, INDEX_SUFFIX, suffix),
                                        base_offset, max_index_size, create=create)
        self.time_index = TimeIndex(segment_file(directory, base_offset, TIME_INDEX_SUFFIX, suffix),
                                    base_offset, max_index_size, create=create)
        self._bytes_since_last_index_entry = 0
        self._max_timestamp: int | None = None  # lazily from the time index (Kafka: maxTimestampAndOffsetSoFar)
        self._offset_of_max_timestamp = base_offset
        self._rolling_based_timestamp: int | None = None
        self._rolling_loaded = False
        self._next_offset: int | None = None
        # Where the batches this process appended last are: a read from the log's tail (a follower's
        # round, a consumer's long poll) starts at one of them, and then needs no index lookup and
        # no header reads. Forgotten whenever positions may change (truncation, recovery) and at a roll.
        self._placed: dict[int, _Placed] = {}
        # Where a consumer reading one batch at a time reads next: the offset and position past the
        # batch it just read (its next read starts there, and finds the header without the index).
        self._read_ends: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, path={self.log.path})"

    # -- state ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    def _load_max_timestamp(self) -> None:
        """Kafka's ``readLargestTimestamp``: the time index's last entry, then any later batch.

        After a clean close the last entry is the segment's maximum; after a truncation or
        a crash, batches past the last entry may hold a larger timestamp, so they are read.
        """
        if self._max_timestamp is None:
            timestamp, offset = self.time_index.last_entry()
            _, position = self.offset_index.lookup(offset)
            for info in self.log.batches(position, chunk=64 * 1024):
                if info.max_timestamp > timestamp:
                    timestamp, offset = info.max_timestamp, info.last_offset
            self._max_timestamp, self._offset_of_max_timestamp = timestamp, offset

    @property
    def max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        assert self._max_timestamp is not None
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_timestamp

    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when the segment has none (as Kafka)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.log.mtime_ms()

    def next_offset(self) -> int:
        """One past the last offset in this segment (``readNextOffset``); the base offset if empty."""
        if self._next_offset is None:
            _, position = self.offset_index.last_entry()
            next_offset = self.base_offset
            for info in self.log.batches(position):
                next_offset = info.last_offset + 1
            self._next_offset = next_offset
        return self._next_offset

    def first_batch(self) -> BatchInfo | None:
        return next(self.log.batches(0, chunk=4096), None)

    def _rolling_timestamp(self) -> int | None:
        if not self._rolling_loaded:
            first = self.first_batch()
            self._rolling_based_timestamp = first.max_timestamp if first is not None else None
            self._rolling_loaded = True
        return self._rolling_based_timestamp

    # -- append -----------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        position = self._write_position((largest_offset,), largest_timestamp)
        self.log.append(data)
        self._index_batch(largest_offset, largest_timestamp, offset_of_max_timestamp, position, len(data))
        self._next_offset = largest_offset + 1

    def append_leader_batch(self, base_offset: int, leader_epoch: int, last_offset: int, max_timestamp: int,
                            data: bytes | bytearray) -> None:
        """A leader's append of one v2 batch, written with ``base_offset`` and ``leader_epoch`` set
        (``data`` itself is left as it is)."""
        position = self._write_position((last_offset,), max_timestamp)
        self.log.append_batch(data, base_offset, leader_epoch)
        self._index_batch(last_offset, max_timestamp, last_offset, position, len(data))
        self._next_offset = last_offset + 1

    def try_append_as_sent(self, data: bytes, base_offset: int, leader_epoch: int, rules: AsSentRules,
                           now_ms: int, max_last_offset: int, producer_id: int) -> tuple[int, int, int] | None:
        """``append_leader_batch`` of a producer's batch that the native kernel accepts as sent
        (``FileRecords.append_as_sent``), when it needs no roll and its last offset is at most
        ``max_last_offset``: (last offset delta, max timestamp, record count), or None and nothing
        written. ``producer_id``: the batch's, its sequence checked by the caller (negative: none).
        The kernel checks the topic's ``rules`` and this segment's roll conditions as ``should_roll``
        states them, from the bounds computed here."""
        if self.offset_index.is_full() or self.time_index.is_full():
            return None
        log = self.log
        size = log.size
        roll_after = self._time_roll_bound(rules.segment_ms, now_ms) if size > 0 else NEVER
        if roll_after == ALWAYS:   # a time roll is due whatever the batch carries: no need to check it
            return None
        segment_last = self.base_offset + INT32_MAX
        accepted = log.append_as_sent(data, base_offset, leader_epoch, rules, now_ms, roll_after,
                                      max_last_offset if max_last_offset < segment_last else segment_last, producer_id)
        if accepted is None:
            return None
        length = len(data)
        last_offset, max_timestamp = base_offset + accepted[0], accepted[1]
        if size == 0 and not self._rolling_loaded:
            self._rolling_based_timestamp, self._rolling_loaded = max_timestamp, True
        self._index_batch(last_offset, max_timestamp, last_offset, size, length)
        self._next_offset = last_offset + 1
        placed = self._placed
        if len(placed) >= RECENT_PLACES:
            placed.clear()
        placed[base_offset] = (size, length, last_offset, max_timestamp, accepted[2])
        return accepted

    def _write_position(self, offsets: tuple[int, ...], first_timestamp: int) -> int:
        """Where a write goes, once ``offsets`` are known to fit this segment (int32 from its base)."""
        for offset in offsets:
            relative = offset - self.base_offset
            if not 0 <= relative <= INT32_MAX:
                raise SegmentOffsetOverflowError(
                    f"offset {offset} cannot go in segment {self.base_offset}: relative offset {relative} "
                    "is outside the int32 range"
                )
        position = self.log.size
        if position == 0 and not self._rolling_loaded:
            self._rolling_based_timestamp, self._rolling_loaded = first_timestamp, True
        return position

    def _index_batch(self, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, position: int,
                     size: int) -> None:
        """A written batch's part in the indexes: an entry once ``index.interval.bytes`` have passed."""
        so_far = self._max_timestamp if self._max_timestamp is not None else self.max_timestamp_so_far
        if max_timestamp > so_far:
            so_far = self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(so_far, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_batches(self, data: bytes, batches: list[tuple[int, int, int]]) -> None:
        """Whole batches in one write, each indexed as its own ``append`` would index it: ``batches``
        holds each one's (last offset, max timestamp, size), in order. (Kafka's ``LogSegment.append``
        of a ``MemoryRecords``, which the cleaner writes a read buffer's worth at a time.)"""
        if not batches:
            return
        # Every batch is checked before anything is written: offsets of damaged input need not rise.
        position = self._write_position(tuple(last_offset for last_offset, _, _ in batches), batches[0][1])
        self.log.append(data)
        for last_offset, max_timestamp, size in batches:
            self._index_batch(last_offset, max_timestamp, last_offset, position, size)
            position += size
        self._next_offset = batches[-1][0] + 1

    # -- roll -------------------------------------------------------------------------------
    def try_append_batches(self, data: bytes, batches: list[tuple[int, int, int]], params: RollParams) -> bool:
        """``append_batches``, when none of the batches would roll this segment as its own append
        would judge it: the whole does not (``should_roll`` of ``params``, which describe the whole:
        each bound only grows with what is appended), the indexes have room for an entry a batch,
        and a segment still empty takes one batch only (its time roll is bounded by the first batch
        it holds). False, nothing written, otherwise: the caller then appends batch by batch."""
        if (len(batches) > 1 and self.log.size == 0) or self.should_roll(params):
            return False
        if len(batches) > min(self.offset_index.room(), self.time_index.room()):
            return False
        self.append_batches(data, batches)
        return True

    def should_roll(self, params: RollParams) -> bool:
        size = self.log.size
        if size > params.max_segment_bytes - params.append_size:
            return True
        if size > 0 and params.max_timestamp_in_append > self._time_roll_bound(params.max_segment_ms, params.now_ms):
            return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        relative = params.last_offset_in_append - self.base_offset
        return not 0 <= relative <= INT32_MAX

    def _time_roll_bound(self, max_segment_ms: int, now_ms: int) -> int:
        """The largest max timestamp an append may carry before this (non-empty) segment rolls by time:
        ``segment.ms`` less the jitter past its first batch's timestamp. Without one (no batch with a
        timestamp), the time since the segment was made decides for any append: ``ALWAYS`` once it is
        past (every append rolls), ``NEVER`` before."""
        limit = max_segment_ms - self.roll_jitter_ms
        first_timestamp = self._rolling_based_timestamp if self._rolling_loaded else self._rolling_timestamp()
        if first_timestamp is not None and first_timestamp >= 0:
            bound = first_timestamp + limit
            return bound if bound < NEVER else NEVER   # segment.ms may be Long.MAX_VALUE
        return ALWAYS if now_ms - self.created_ms > limit else NEVER

    def on_become_inactive(self) -> None:
        """At roll: the final time-index entry, then trim every file to its content."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.log.trim()   # first: the blocks it held past its end are free for the index writes
        self.offset_index.trim()
        self.time_index.trim()
        # An inactive segment's indexes are read from memory; keeping their descriptors open
        # would cost three per segment where Kafka (whose indexes are mmapped) keeps one.
        self.offset_index.close()
        self.time_index.close()
        self.forget_positions()   # its tail reads are over: the active segment's readers move on

    def resize_indexes_to_max(self) -> None:
        self.offset_index.resize_to_max()
        self.time_index.resize_to_max()

    # -- read -------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchInfo | None:
        """The first batch whose last offset is ≥ ``offset``: a batch appended lately, or the one where an
        earlier read ended, found without the index; else an index lookup, then a header scan."""
        placed = self._placed.get(offset)
        if placed is not None and placed[0] >= starting_position:   # a tail read: known without a header
            return BatchInfo(placed[0], placed[1], 2, offset, placed[2], placed[3], placed[4])
        read_end = self._read_ends.get(offset)
        if read_end is not None and read_end >= starting_position:   # a reader going on: its header alone
            # Taken only if it names this offset: bytes inside a batch may look like a header.
            info = self._header_at(read_end)
            if info is not None and info.base_offset == offset:
                return info
        _, position = self.offset_index.lookup(offset)
        position = max(position, starting_position)
        # Most other reads find their batch one header past the index entry: an entry is keyed by its
        # batch's last offset, so a consumer asking from a batch's start lands on the batch before (a
        # batch past index.interval.bytes has an entry of its own). Two headers are read alone;
        # anything else, a bad or torn header included, is left to the scan.
        for _ in range(2):
            info = self._header_at(position)
            if info is None:
                break
            if info.last_offset >= offset:
                return info
            position += info.size
        # The index entry is at most about index.interval.bytes before the batch sought: a short scan.
        log = self.log
        for info, _ in scan_batches(log.read, position, log.size, TRANSLATE_SCAN_CHUNK, whole=False,
                                    source=str(log.path)):
            if info.last_offset >= offset:
                return info
        return None

    def _header_at(self, position: int) -> BatchInfo | None:
        """The header of a whole batch at ``position``; None for a bad, torn or cut-short one (the scan
        then decides, and names what is wrong)."""
        try:
            info = peek_batch(self.log.read(position, HEADER_READ_AHEAD), 0, at=position, header_only=True)
        except CorruptRecordError:
            return None
        if info is None or position + info.size > self.log.size:
            return None
        return info

    def read(self, start_offset: int, max_size: int, *, max_position: int | None = None,
             min_one_message: bool = False, zero_copy: bool = False, remember_end: bool = False
             ) -> SegmentSlice | None:
        """Batch-granular read: the slice may begin with offsets below ``start_offset``. ``zero_copy``:
        the slice is a region of the file, for a transport to send from there. ``remember_end``: a slice
        of one batch leaves where the next one begins, for the reader's next read (the active segment's
        readers: an older segment keeps nothing, so that memory does not grow with the segments)."""
        # Taken before the read: a truncation meanwhile replaces it, and the end noted below (of a
        # batch the truncation may have removed) then goes to the dict it dropped.
        read_ends = self._read_ends
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        limit = self.size if max_position is None else max_position
        adjusted = max(max_size, start.size) if min_one_message else max_size
        length = max(0, min(limit - start.position, adjusted))
        incomplete = adjusted < start.size
        if remember_end and length == start.size:   # the slice is this one batch: the next read starts past it
            if len(read_ends) >= RECENT_PLACES:
                read_ends.clear()
            read_ends[start.last_offset + 1] = start.position + start.size
        if zero_copy:
            return SegmentSlice(self.base_offset, start.position, b"", incomplete,
                                self.log.region(start.position, length) if length else None, start)
        return SegmentSlice(self.base_offset, start.position, self.log.read(start.position, length), incomplete,
                            start_batch=start)

    def batches(self, start_offset: int | None = None) -> Iterator[BatchInfo]:
        position = 0
        if start_offset is not None:
            _, position = self.offset_index.lookup(start_offset)
        return self.log.batches(position)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> Record | None:
        """The first record with timestamp ≥ ``timestamp`` and offset ≥ ``starting_offset``."""
        _, index_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(index_offset, starting_offset))
        for info in self.log.batches(position):
            if info.max_timestamp < timestamp or info.last_offset < starting_offset:
                continue
            _, records = decode_any(self.log.batch_bytes(info), 0, source=str(self.log.path))
            for record in records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record
        return None

    # -- recovery and truncation --------------------------------------------------------------
    def recover(self, on_batch: BatchVisitor | None = None, *, epoch_cache: LeaderEpochCache | None = None) -> int:
        """Rebuild both indexes from the ``.log``, truncating at the first invalid batch.

        Returns the number of bytes truncated. A batch is valid if its header
        parses, it is whole, its CRC matches and its offsets fit this segment.
        ``epoch_cache`` learns each batch that starts a newer leader epoch.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        scanned = None
        if on_batch is None and native.kernel is not None:   # mapped only for the native scan
            with self.log.mapped() as data, memoryview(data) as view:
                scanned = scan_natively(view, self.base_offset, self.index_interval_bytes,
                                        epoch_cache.latest_epoch() if epoch_cache is not None else None)
        if scanned is not None:
            valid_bytes, last_index_entry = self._apply_scan(scanned, epoch_cache)
        else:
            valid_bytes, last_index_entry = self._recover_in_python(on_batch, epoch_cache)
        self.forget_positions()
        truncated = self.log.size - valid_bytes
        if truncated:
            self.log.truncate_to(valid_bytes)
        self.offset_index.trim()
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.time_index.trim()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._next_offset = None
        self._rolling_loaded = False
        return truncated

    def _apply_scan(self, scanned: RecoveryScan, epoch_cache: LeaderEpochCache | None) -> tuple[int, int]:
        """What the native scan found, applied as the Python loop applies it batch by batch:
        (valid bytes, position of the last index entry), as ``_recover_in_python`` returns them."""
        for last_offset, position, max_timestamp, offset_of_max_timestamp in scanned.index_points:
            if not self.offset_index.is_full():
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full():
                self.time_index.maybe_append(max_timestamp, offset_of_max_timestamp)
        if epoch_cache is not None:
            for epoch, start_offset in scanned.new_epochs:
                epoch_cache.assign(epoch, start_offset)
        self._max_timestamp, self._offset_of_max_timestamp = scanned.max_timestamp, scanned.offset_of_max_timestamp
        return scanned.valid_bytes, scanned.index_points[-1][1] if scanned.index_points else 0

    def _recover_in_python(self, on_batch: BatchVisitor | None, epoch_cache: LeaderEpochCache | None
                           ) -> tuple[int, int]:
        """The reference scan: (valid bytes, position of the last index entry)."""
        visit = on_batch if epoch_cache is None else _assigning_epochs(epoch_cache, on_batch)
        valid_bytes = 0
        last_index_entry = 0
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        source = str(self.log.path)
        try:
            for info, data in self.log.batches_with_data(0):
                if info.magic >= 2:
                    validate_batch(data, 0, source=source)
                else:
                    parse_legacy_entry(data, 0, verify_crc=True, source=source)
                if not 0 <= info.last_offset - self.base_offset <= INT32_MAX:
                    raise CorruptRecordError(info.position, f"offset {info.last_offset} is outside segment "
                                             f"{self.base_offset}'s int32 range", source=source)
                if info.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max_timestamp = info.max_timestamp, info.last_offset
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    # A segment written across restarts may need more sparse entries than its
                    # index holds (each restart restarts the byte count); a full index just
                    # stays sparser, it is never a reason to refuse the segment.
                    if not self.offset_index.is_full():
                        self.offset_index.append(info.last_offset, valid_bytes)
                    if not self.time_index.is_full():
                        self.time_index.maybe_append(max_timestamp, offset_of_max_timestamp)
                    last_index_entry = valid_bytes
                if visit is not None:
                    visit(info, data)
                valid_bytes += info.size
        except CorruptRecordError:
            pass  # everything from here on is the torn or corrupt tail
        self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, offset_of_max_timestamp
        return valid_bytes, last_index_entry

    def truncate_to(self, offset: int) -> int:
        """Remove every batch containing an offset ≥ ``offset``; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.forget_positions()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self._max_timestamp = None
        if mapping is None:
            return 0
        removed = self.log.truncate_to(mapping.position)
        # Again once the bytes are gone: a read that began before the cut may have noted an end
        # meanwhile, in the dict made by the first forget.
        self.forget_positions()
        self._bytes_since_last_index_entry = 0
        self._next_offset = None
        if self.size == 0:
            self._rolling_loaded = False
        return removed

    def forget_positions(self) -> None:
        """Forget where the recent batches were, and where reads ended: their positions may no longer hold."""
        self._placed, self._read_ends = {}, {}

    # -- files ------------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        try:
            if self._max_timestamp is not None and self._max_timestamp >= 0:
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp,
                                             skip_full_check=True)
            self.log.trim()   # first: the blocks it held past its end are free for the index writes
            self.offset_index.trim()
            self.time_index.trim()
        finally:
            self.close_files()  # a failed trim must not keep descriptors (and the disk) busy

    def close_files(self) -> None:
        """Release file descriptors without trimming or writing index entries (the segment is being
        thrown away, or its directory is offline; ``close`` has trimmed before it calls this)."""
        self.log.close()
        self.offset_index.close(write_pending=False)
        self.time_index.close(write_pending=False)

    def files(self) -> list[Path]:
        return [self.log.path, self.offset_index.path, self.time_index.path]

    def change_suffix(self, old: str, new: str, *, crash_point_after_each: str | None = None) -> None:
        """Rename every file of the segment from suffix ``old`` to ``new`` (the crash-safety state machine).

        ``crash_point_after_each`` names the crash point a test may stop this process at after
        each single rename: the loader must cope with a segment whose files are half renamed.
        """
        for part in (self.log, self.offset_index, self.time_index):
            name = part.path.name
            stem = name[: len(name) - len(old)] if old else name
            part.rename(part.path.with_name(stem + new))
            if crash_point_after_each is not None:
                crash_point(crash_point_after_each)

    def delete_files(self) -> None:
        self.log.delete_file()
        self.offset_index.delete_file()
        self.time_index.delete_file()


def _assigning_epochs(epoch_cache: LeaderEpochCache, then: BatchVisitor | None) -> BatchVisitor:
    """A visitor that gives ``epoch_cache`` each batch starting a newer leader epoch, then calls ``then``."""
    def visit(info: BatchInfo, data: bytes) -> None:
        if info.magic >= 2:
            epoch = int.from_bytes(data[12:16], "big", signed=True)
            latest = epoch_cache.latest_epoch()
            if epoch >= 0 and (latest is None or epoch > latest):
                epoch_cache.assign(epoch, info.base_offset)
        if then is not None:
            then(info, data)
    return visit
