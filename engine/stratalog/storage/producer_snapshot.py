"""Kafka's producer-state ``.snapshot`` files: the format, and which of a partition's snapshots are stale.

A snapshot named ``<offset>.snapshot`` holds, for every producer, its epoch and its last batch as of
the log below ``offset`` (kafka-storage.md §2.8). Kafka takes one at every roll (named by the new
segment) and at shutdown (named by the log end); on load it starts from the latest and replays only
the batches after it. Without one, a clean-shutdown Kafka broker assumes *no* producers, so writing
them is what lets Kafka, opening a stratalog directory, keep every idempotent producer's sequence.

Every snapshot describes a prefix of the log, so any of them is correct as long as that prefix is
unchanged: a truncation below it or a deleted segment starting at it makes it stale. Deleting one
never makes Kafka wrong, only less informed: it falls back to an older one, or, with none left
after a clean shutdown, to no producers at all (what it does for a directory never snapshotted).

The engine itself rebuilds producer state from the batches (``stratalog.storage.log``), because its
transactions need the full scan anyway (no ``.txnindex`` yet); the snapshots are written for Kafka.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from stratalog.common.files import atomic_write
from stratalog.common.limits import INT32_MAX
from stratalog.common.names import SNAPSHOT_SUFFIX, offset_prefix

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
    last_sequence: int        # -1: no data batch (only a transaction marker)
    last_offset: int          # of the last data batch; -1: none
    offset_delta: int         # last offset - first offset of that batch
    timestamp: int            # the max timestamp of the producer's last batch or marker
    coordinator_epoch: int    # of the last transaction marker; -1: none
    current_txn_first_offset: int  # -1: no open transaction

    @property
    def first_sequence(self) -> int:
        """Kafka's ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """A snapshot's bytes, entries by producer id (Kafka writes its map's order; readers take any)."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(_SNAPSHOT_HEAD.size + len(ordered) * _SNAPSHOT_ENTRY.size)
    for number, e in enumerate(ordered):
        _SNAPSHOT_ENTRY.pack_into(body, _SNAPSHOT_HEAD.size + number * _SNAPSHOT_ENTRY.size,
                                  e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
                                  e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
    struct.pack_into(">i", body, _SNAPSHOT_CRC_START, len(ordered))
    crc = crc32c(memoryview(body)[_SNAPSHOT_CRC_START:])
    struct.pack_into(">hI", body, 0, PRODUCER_SNAPSHOT_VERSION, crc)
    return bytes(body)


def decode_producer_snapshot(data: bytes) -> list[ProducerSnapshotEntry]:
    """Parse a snapshot's bytes; checks, in Kafka's order, the layout, the version, then the CRC."""
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


def read_producer_snapshot(path: Path) -> list[ProducerSnapshotEntry]:
    return decode_producer_snapshot(path.read_bytes())


# -- a partition directory's snapshots ------------------------------------------------------------

def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset_prefix(offset)}{SNAPSHOT_SUFFIX}"


def stale_snapshots(offsets: Iterable[int], segment_bases: Collection[int], log_end: int) -> list[int]:
    """The snapshots a freshly loaded log must not keep: past its end (recovery cut the log below
    them), and, as Kafka's ``removeStraySnapshots``, every one not at a segment's base except the
    latest, kept only when it lies past the last segment's base (a shutdown's snapshot at the end)."""
    stale: list[int] = []
    strays: list[int] = []
    for offset in sorted(offsets):
        if offset > log_end:
            stale.append(offset)
        elif offset not in segment_bases:
            strays.append(offset)
    if strays:
        latest = strays.pop()
        if segment_bases and latest < max(segment_bases):
            strays.append(latest)
    return sorted(stale + strays)


def write_producer_snapshot(directory: Path, offset: int, entries: Iterable[ProducerSnapshotEntry]) -> None:
    """Written beside its name and renamed: a crash leaves the old state of the directory, never half a
    snapshot (Kafka writes in place and drops a torn one on load by its CRC)."""
    atomic_write(snapshot_path(directory, offset), encode_producer_snapshot(entries))


def delete_producer_snapshots(directory: Path, offsets: Iterable[int]) -> None:
    for offset in offsets:
        try:
            os.unlink(snapshot_path(directory, offset))
        except FileNotFoundError:
            pass
