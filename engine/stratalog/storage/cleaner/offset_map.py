"""The cleaner's bounded key → latest-offset map, where a hash collision costs time, never data.

Kafka's ``SkimpyOffsetMap`` stores only MD5(key) and an offset, 24 bytes a slot.
Two keys with one digest share a slot, and the older key's latest record is then
judged superseded by the other key's offset and silently dropped (seed 000
notes it). MD5 collisions can be manufactured, so a producer could make the
cleaner delete another key's only value.

Here the map compares whole keys: it is a hash table whose equality is the key
bytes, so keys that share a hash only share a probe sequence (a little time).
The memory bound is kept by accounting each entry's real cost, key bytes
included, against ``log.cleaner.dedupe.buffer.size`` × the load factor; when
the next new key would not fit, the map is full and the pass cleans up to where
it got, exactly as Kafka does. Long keys therefore mean fewer keys per pass
(more passes: time), never a wrong answer.

``hash_function`` exists for tests that force collisions: with it, keys are
wrapped so that the table uses the given (tiny) hash while still comparing keys.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol, cast

from stratalog.records import native

# CPython's cost of one entry: the dict slot (hash, key and value pointers plus index
# share at 2/3 load) ~ 40 bytes, the bytes object header 33, the int 32.
ENTRY_OVERHEAD = 40 + sys.getsizeof(b"") + sys.getsizeof(2**40)


class _CollidingKey:
    """A key whose hash is chosen by the caller; equality is still the key bytes."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: bytes, hash_value: int) -> None:
        self.key = key
        self._hash = hash_value

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CollidingKey) and other.key == self.key


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = 0.9,
                 hash_function: Callable[[bytes], int] | None = None) -> None:
        if memory_bytes <= 0:
            raise ValueError("the offset map needs a positive memory budget")
        self.memory_bytes = memory_bytes
        self.budget = int(memory_bytes * load_factor)
        self._hash_function = hash_function
        self._entries: dict[Any, int] = {}
        self.used_bytes = 0
        self.latest_offset = -1
        self.lookups = 0

    def _wrap(self, key: bytes) -> Any:
        if self._hash_function is None:
            return key
        return _CollidingKey(key, self._hash_function(key))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def utilization(self) -> float:
        return self.used_bytes / self.memory_bytes

    def clear(self) -> None:
        self._entries.clear()
        self.used_bytes = 0
        self.latest_offset = -1

    def try_put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest for ``key``; False (nothing changed) if a new key would not fit."""
        wrapped = self._wrap(key)
        entries = self._entries
        if wrapped in entries:
            entries[wrapped] = offset
            return True
        cost = ENTRY_OVERHEAD + len(key)
        if self.used_bytes + cost > self.budget:
            return False
        entries[wrapped] = offset
        self.used_bytes += cost
        return True

    def get(self, key: bytes) -> int:
        """The latest offset seen for ``key``, or -1."""
        self.lookups += 1
        return self._entries.get(self._wrap(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset


class KeyOffsetMap(Protocol):
    """What the cleaner asks of a map: this module's ``OffsetMap`` and the native kernel's both."""

    @property
    def latest_offset(self) -> int: ...
    @property
    def lookups(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def used_bytes(self) -> int: ...
    @property
    def utilization(self) -> float: ...
    def clear(self) -> None: ...
    def try_put(self, key: bytes, offset: int) -> bool: ...
    def get(self, key: bytes) -> int: ...
    def update_latest_offset(self, offset: int) -> None: ...


class NativeOffsetMap(KeyOffsetMap, Protocol):
    """The native kernel's map (``stratalog_native.OffsetMap``): it also walks whole batches."""

    def map_records(self, data: bytes, start: int, end: int, count: int, base_offset: int,
                    from_offset: int) -> tuple[int, bool]: ...
    def map_batches(self, data: bytes, position: int, from_offset: int, end_offset: int) -> tuple[int, int, int]: ...
    def filter_records(self, data: bytes, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                       append_time: int | None, reach: int, delete_horizon: int | None, now_ms: int,
                       delete_retention_ms: int, last_offset_delta: int
                       ) -> tuple[int, int, tuple[bytes, int, int | None, int, int] | None] | None: ...
    def filter_batches(self, data: bytes, position: int, reach: int, now_ms: int, delete_retention_ms: int,
                       round_upper_bound: int, keep_empty: set[int] | None
                       ) -> tuple[int, bytes, list[tuple[int, int, int]], int, int, int, int]: ...


def native_map_of(offset_map: KeyOffsetMap) -> NativeOffsetMap | None:
    """``offset_map`` if it is the native kernel's, else None."""
    kernel = native.kernel
    if kernel is not None and isinstance(offset_map, kernel.OffsetMap):
        return cast(NativeOffsetMap, offset_map)
    return None


def new_offset_map(memory_bytes: int, load_factor: float = 0.9,
                   hash_function: Callable[[bytes], int] | None = None) -> KeyOffsetMap:
    """The native kernel's map where it runs (the same contract, keys in an arena: about 32 bytes a
    short key instead of this one's ~120), else this one. A forced hash function is this one's."""
    kernel = native.kernel
    if kernel is not None and hash_function is None:
        native_map: KeyOffsetMap = kernel.OffsetMap(memory_bytes, load_factor)
        return native_map
    return OffsetMap(memory_bytes, load_factor, hash_function)
