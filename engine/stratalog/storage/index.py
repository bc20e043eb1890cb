"""The sparse offset index (``.index``) and time index (``.timeindex``) of a segment.

Both are derived data: they can always be rebuilt from the ``.log``. Kafka keeps
them mmapped; here the entries live in two in-memory arrays and each new entry
is written with ``pwrite`` at its slot, which keeps the file byte-identical to
Kafka's (big-endian entries, preallocated to ``segment.index.bytes`` while the
segment is active and trimmed to the entry count when it is not).

Entries are loaded lazily, on the first lookup, so that opening a log with
thousands of segments reads no index file (Kafka's ``LazyIndex``). On load the
entry count is the file length divided by the entry size, as in Kafka, but a
run of entries that stops increasing (the zero tail of an untrimmed file) ends
the index: such entries could only come from preallocation.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from stratalog.common.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _round_down(value: int, multiple: int) -> int:
    return value - value % multiple


class _Index:
    """Common mechanics: lazy load, append at slot, truncate, preallocate, trim."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, create: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.max_entries = max_index_size // self.entry.size
        self._keys: array[int] = array("q")  # offsets (OffsetIndex) or timestamps (TimeIndex)
        self._values: array[int] = array("q")  # positions (OffsetIndex) or offsets (TimeIndex)
        self._loaded = create
        self._fd: int | None = None
        # Entries from this slot on are only in memory: they are written in one block at
        # flush, trim or close. After a crash the active segment's indexes are rebuilt by
        # recovery anyway, so writing each entry as it comes would buy nothing.
        self._unwritten_from = 0
        if create:
            # A new index starts preallocated like Kafka's (sparse file of max size).
            self._open_fd()
            self._resize_file(self.max_entries * self.entry.size)

    # -- sizing ---------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._keys)

    def is_full(self) -> bool:
        if not self._loaded:
            self._ensure_loaded()
        return len(self._keys) >= self.max_entries

    def room(self) -> int:
        """How many entries it takes before ``is_full``."""
        return max(0, self.max_entries - self.entries)

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry.size

    # -- file handling --------------------------------------------------------------------
    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _resize_file(self, length: int) -> None:
        os.ftruncate(self._open_fd(), length)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        size = self.entry.size
        usable = _round_down(len(data), size)
        previous_key: int | None = None
        for key, value in self.entry.iter_unpack(data[:usable]):
            key, value = self._decode(key, value)
            if previous_key is not None and key <= previous_key:
                break
            self._keys.append(key)
            self._values.append(value)
            previous_key = key
        self._unwritten_from = len(self._keys)

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        raise NotImplementedError

    def _write_pending(self) -> None:
        start = self._unwritten_from
        count = len(self._keys)
        if start >= count:
            return
        raw = b"".join(self._encode(self._keys[i], self._values[i]) for i in range(start, count))
        os.pwrite(self._open_fd(), raw, start * self.entry.size)
        self._unwritten_from = count

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def resize_to_max(self) -> None:
        """Expand the file for a segment that is (again) active."""
        self._ensure_loaded()
        self._write_pending()
        self._resize_file(max(self.max_entries, len(self._keys)) * self.entry.size)

    def trim(self) -> None:
        """Cut the file to its entries: Kafka derives the entry count from the length."""
        self._ensure_loaded()
        if self._fd is None and not self.path.exists():
            self._open_fd()
        self._write_pending()
        self._resize_file(len(self._keys) * self.entry.size)

    def flush(self) -> None:
        self._write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self, *, write_pending: bool = True) -> None:
        """Release the descriptor, after writing the entries not yet in the file unless told not to
        (a segment thrown away, or in a directory gone offline, where a write can only fail)."""
        try:
            if self._loaded and write_pending:
                self._write_pending()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from the log)."""
        self._keys = array("q")
        self._values = array("q")
        self._loaded = True
        self._unwritten_from = 0
        self._resize_file(0)  # zero every old slot, then preallocate again
        self._resize_file(self.max_entries * self.entry.size)

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        self.close(write_pending=False)   # entries of a file about to go: writing them can only fail
        self.path.unlink(missing_ok=True)

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        self._unwritten_from = min(self._unwritten_from, count)
        # Zero the dropped slots so a later load cannot resurrect them.
        self._resize_file(count * self.entry.size)
        self._resize_file(self.max_entries * self.entry.size)

    def _read_slot(self, slot: int) -> tuple[int, int]:
        # A bare descriptor and pread: a start checks one slot of each of thousands of indexes.
        fd = os.open(self.path, os.O_RDONLY)
        try:
            raw = os.pread(fd, self.entry.size, slot * self.entry.size)
        finally:
            os.close(fd)
        key, value = self.entry.unpack(raw)
        return self._decode(key, value)

    def _cheap_entries(self) -> int:
        """Entry count by Kafka's rule (file length / entry size), checking the length first."""
        length = self.file_length()
        if length % self.entry.size:
            raise CorruptIndexError(
                f"{self.path}: corrupt index, length {length} is not a multiple of the entry size {self.entry.size}"
            )
        return length // self.entry.size

    def file_length(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


class OffsetIndex(_Index):
    """``.index``: relative offset (int32) → byte position of the batch start (int32)."""

    entry = _OFFSET_ENTRY

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        return key + self.base_offset, value

    def _encode(self, key: int, value: int) -> bytes:
        return _OFFSET_ENTRY.pack(key - self.base_offset, value)

    def append(self, offset: int, position: int) -> None:
        """Index the batch whose *last* offset is ``offset`` and which starts at ``position``."""
        if not self._loaded:   # (checked here first: every append of a batch past the interval comes here)
            self._ensure_loaded()
        keys = self._keys
        if keys and offset <= keys[-1]:
            raise CorruptIndexError(
                f"{self.path}: offset {offset} is not larger than the last indexed offset {keys[-1]}"
            )
        if len(keys) >= self.max_entries:   # ``is_full``, without the call
            raise CorruptIndexError(f"{self.path}: index is full ({self.max_entries} entries)")
        keys.append(offset)
        self._values.append(position)

    def lookup(self, target: int) -> tuple[int, int]:
        """Greatest entry with offset ≤ target; (base_offset, 0) if none."""
        self._ensure_loaded()
        slot = bisect.bisect_right(self._keys, target) - 1
        if slot < 0:
            return self.base_offset, 0
        return self._keys[slot], self._values[slot]

    def last_entry(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._keys:
            return self.base_offset, 0
        return self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset ≥ ``offset``."""
        self._ensure_loaded()
        self._truncate_entries(bisect.bisect_left(self._keys, offset))

    def entries_list(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._keys, self._values))

    def sanity_check_cheaply(self, log_size: int) -> None:
        """Kafka's load-time check, without reading the whole file: length, and the last entry."""
        entries = self._cheap_entries()
        if entries:
            last_offset, last_position = self._read_slot(entries - 1)
            if last_offset < self.base_offset:
                raise CorruptIndexError(f"{self.path}: corrupt index, last offset {last_offset} is below "
                                        f"the base offset {self.base_offset}")
            if last_position >= max(log_size, 1):
                raise CorruptIndexError(f"{self.path}: corrupt index, last position {last_position} is past "
                                        f"the end of the log ({log_size} bytes)")


class TimeIndex(_Index):
    """``.timeindex``: running max timestamp (int64) → relative offset (int32) of its batch's last offset."""

    entry = _TIME_ENTRY

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        return key, value + self.base_offset

    def _encode(self, key: int, value: int) -> bytes:
        return _TIME_ENTRY.pack(key, value - self.base_offset)

    def is_full(self) -> bool:
        # Kafka reserves the last slot for the entry written when the segment becomes inactive.
        if not self._loaded:
            self._ensure_loaded()
        return len(self._keys) >= self.max_entries - 1

    def room(self) -> int:
        return max(0, self.max_entries - 1 - self.entries)

    def last_entry(self) -> tuple[int, int]:
        """(-1, base_offset) when empty, as Kafka's ``lastEntry``."""
        self._ensure_loaded()
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self._values[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append only when ``timestamp`` exceeds the last entry's (the index is monotonic)."""
        if not self._loaded:
            self._ensure_loaded()
        keys, values = self._keys, self._values
        count = len(keys)
        if count >= self.max_entries - 1 and not skip_full_check:   # ``is_full``, without the call
            raise CorruptIndexError(f"{self.path}: time index is full ({self.max_entries} entries)")
        if count >= self.max_entries:
            return
        if keys and offset < values[-1]:
            raise CorruptIndexError(
                f"{self.path}: offset {offset} is below the last indexed offset {values[-1]}"
            )
        # Only a timestamp above the last entry's goes in; an empty index's "last" is -1, so a
        # segment without timestamps (v0 data, or no data) gets no entry at all, as in Kafka.
        if timestamp <= (keys[-1] if keys else -1):
            return
        keys.append(timestamp)
        values.append(offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Greatest entry with timestamp ≤ target; (-1, base_offset) if none."""
        self._ensure_loaded()
        slot = bisect.bisect_right(self._keys, target_timestamp) - 1
        if slot < 0:
            return -1, self.base_offset
        return self._keys[slot], self._values[slot]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ ``offset``."""
        self._ensure_loaded()
        self._truncate_entries(bisect.bisect_left(self._values, offset))

    def entries_list(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._keys, self._values))

    def sanity_check_cheaply(self, log_size: int) -> None:
        entries = self._cheap_entries()
        if entries:
            first_ts, _ = self._read_slot(0)
            last_ts, last_offset = self._read_slot(entries - 1)
            if last_ts < first_ts:
                raise CorruptIndexError(f"{self.path}: corrupt time index, last timestamp {last_ts} is below "
                                        f"the first {first_ts}")
            if last_offset < self.base_offset:
                raise CorruptIndexError(f"{self.path}: corrupt time index, last offset {last_offset} is below "
                                        f"the base offset {self.base_offset}")
