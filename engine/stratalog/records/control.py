"""Control records: transaction markers and KRaft control batches.

A control batch (attribute bit 5) holds exactly one record whose key says what
it is (int16 version + int16 type).  Storage must recognise COMMIT/ABORT
markers for the transaction index, producer state and the cleaner, and write
them when a transaction ends (``EndTransactionMarker.java``).
"""

from __future__ import annotations

import struct
from enum import IntEnum

from stratalog.common.errors import CorruptRecordError
from stratalog.records.batch_header import NO_PARTITION_LEADER_EPOCH
from stratalog.records.builder import build_batch
from stratalog.records.record import Record


class ControlRecordType(IntEnum):
    """Type ids of control record keys; UNKNOWN stands for ids this version does not know."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_KEY_VERSION = 0
_END_TXN_VERSION = 0
_KNOWN_TYPES = frozenset(t.value for t in ControlRecordType if t != ControlRecordType.UNKNOWN)


def parse_control_key(key: bytes | None, *, position: int = 0, source: str | None = None) -> ControlRecordType:
    """Type of a control record from its key (``ControlRecordType.parse``).

    A newer key version or an unknown type is tolerated (UNKNOWN), as in Kafka;
    a short key or a negative version is corrupt.
    """
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            position,
            f"Invalid value size found for end control record key. Must have at least {_KEY.size} bytes, "
            f"but found only {0 if key is None else len(key)}",
            source=source,
        )
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(position, f"Invalid version found for control record: {version}", source=source)
    return ControlRecordType(type_id) if type_id in _KNOWN_TYPES else ControlRecordType.UNKNOWN


def parse_end_txn_marker(value: bytes | None, *, position: int = 0, source: str | None = None) -> int:
    """Coordinator epoch of a COMMIT/ABORT marker value (int16 version + int32 epoch)."""
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError(
            position,
            f"Invalid value size found for end transaction marker. Must have at least {_END_TXN_VALUE.size} "
            f"bytes, but found only {0 if value is None else len(value)}",
            source=source,
        )
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(
            position, f"Invalid version found for end transaction marker: {version}", source=source
        )
    return int(coordinator_epoch)


def build_end_txn_marker_batch(
    marker: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A one-record COMMIT/ABORT batch (isControl + isTransactional), as ``MemoryRecords.withEndTransactionMarker``."""
    if marker not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"end transaction markers are ABORT or COMMIT, not {marker!r}")
    record = Record(
        offset=base_offset,
        timestamp=timestamp,
        key=_KEY.pack(_KEY_VERSION, marker),
        value=_END_TXN_VALUE.pack(_END_TXN_VERSION, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
