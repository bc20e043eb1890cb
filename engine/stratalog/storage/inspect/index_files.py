"""``.index`` and ``.timeindex`` entries read raw, every slot, for the tools that inspect them.

Not through ``stratalog.storage.index``, which stops at the first non-increasing entry: a tool
must show and judge exactly what is in the file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from stratalog.storage.index import OffsetIndex, TimeIndex


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    number: int
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimeEntry:
    number: int
    timestamp: int
    offset: int


E = TypeVar("E", OffsetEntry, TimeEntry)


@dataclass(frozen=True, slots=True)
class IndexContents(Generic[E]):
    """An index file's entries as Kafka's tools read them.

    Kafka takes the entry count from the file length; an index that was never
    trimmed (a crash) has a zero tail, so - as DumpLogSegments does - reading
    stops at the first entry after entry 0 whose offset is the base offset.
    ``stopped_at`` is that entry's number; ``garbage_at`` the first slot from
    there on holding a non-zero byte (a real zero tail has none). ``first_slot``
    and ``last_slot`` are the file's first and last whole entries, zero tail or
    not: what Kafka's load-time sanity check looks at.
    """

    path: Path
    base_offset: int
    file_length: int
    entry_size: int
    entries: tuple[E, ...]
    stopped_at: int | None
    garbage_at: int | None
    first_slot: E | None
    last_slot: E | None
    zero_head: bool

    @property
    def live_entries(self) -> tuple[E, ...]:
        """The entries the engine wrote: none in a file of nothing but zeros (preallocated, never
        written, never trimmed - a crash), whose all-zero entry 0 Kafka's tools still read."""
        if self.zero_head and self.stopped_at == 1 and self.garbage_at is None:
            return ()
        return self.entries

    @property
    def slots(self) -> int:
        """Kafka's entry count: whole entries in the file."""
        return self.file_length // self.entry_size

    @property
    def partial_bytes(self) -> int:
        return self.file_length % self.entry_size


def read_offset_index(path: Path, base_offset: int) -> IndexContents[OffsetEntry]:
    def entry(number: int, relative: int, position: int) -> OffsetEntry:
        return OffsetEntry(number, base_offset + relative, position)

    return _read_index(path, base_offset, OffsetIndex.entry, 0, entry)


def read_time_index(path: Path, base_offset: int) -> IndexContents[TimeEntry]:
    def entry(number: int, timestamp: int, relative: int) -> TimeEntry:
        return TimeEntry(number, timestamp, base_offset + relative)

    return _read_index(path, base_offset, TimeIndex.entry, 1, entry)


def _read_index(path: Path, base_offset: int, layout: struct.Struct, relative_field: int,
                make: Callable[[int, int, int], E]) -> IndexContents[E]:
    data = path.read_bytes()
    size = layout.size
    slots = len(data) // size
    entries = []
    stopped_at = None
    for number, fields in enumerate(layout.iter_unpack(data[: slots * size])):
        if fields[relative_field] == 0 and number > 0:
            stopped_at = number
            break
        entries.append(make(number, *fields))
    first = make(0, *layout.unpack_from(data, 0)) if slots else None
    last = make(slots - 1, *layout.unpack_from(data, (slots - 1) * size)) if slots else None
    return IndexContents(path, base_offset, len(data), size, tuple(entries), stopped_at,
                         _first_non_zero_slot(data, stopped_at, size), first, last,
                         slots > 1 and not any(data[:size]))


def _first_non_zero_slot(data: bytes, stopped_at: int | None, size: int) -> int | None:
    if stopped_at is None:
        return None
    start = stopped_at * size
    end = len(data) - len(data) % size
    tail = data[start:end].rstrip(b"\0")
    if not tail:
        return None
    first = len(tail) - len(tail.lstrip(b"\0"))
    return stopped_at + first // size
