"""Kafka's producer-state ``.snapshot`` files, read and checked (CRC, version) for dump-log and verify."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from stratalog.common.limits import INT32_MAX


_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc (covers bytes 6..end), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_CRC_START = 6
PRODUCER_SNAPSHOT_VERSION = 1


class CorruptSnapshotError(Exception):
    """A producer snapshot that does not parse; the message is Kafka's ``CorruptSnapshotException``'s."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: none

    @property
    def first_sequence(self) -> int:
        """Kafka's ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta


def read_producer_snapshot(path: Path) -> list[ProducerSnapshotEntry]:
    """Parse a ``.snapshot`` (§2.8); checks, in Kafka's order, the layout, the version, then the CRC."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {len(data)} bytes cannot hold the version, crc and entry count")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    available = (len(data) - _SNAPSHOT_HEAD.size) // _SNAPSHOT_ENTRY.size
    if count < 0 or count > available:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: Error reading field 'producer_entries': "
            f"{count} entries declared, room for {available}")
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[_SNAPSHOT_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}")
    return [ProducerSnapshotEntry(*_SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size))
            for i in range(count)]
