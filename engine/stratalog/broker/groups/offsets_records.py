"""Committed offsets as Kafka keeps them in ``__consumer_offsets``: keys, values, the partition.

A commit is a record keyed by (group, topic, partition) in the offsets topic's partition of its
group, compacted like any other compacted topic; a null value (a tombstone) deletes it. The key
is Kafka's ``OffsetCommitKey`` (version 1), the value ``OffsetCommitValue`` version 3 (offset,
leader epoch, metadata, commit time), the version Kafka writes when there is no expiry time, so
Kafka's own tools decode these records. Group metadata records (key version 2) are Kafka's and
are skipped when read: groups' members are not kept here across restarts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from stratalog.common.errors import CorruptRecordError
from stratalog.common.names import OFFSETS_TOPIC as OFFSETS_TOPIC   # re-exported: the groups' name for it
from stratalog.common.names import TopicPartition

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})   # clients may read them, never write or delete them
OFFSET_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int   # -1 when the client did not say
    metadata: str
    commit_timestamp: int


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions``, with Java's String.hashCode."""
    h = 0
    data = group_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def offset_key(group_id: str, tp: TopicPartition) -> bytes:
    return struct.pack(">h", OFFSET_KEY_VERSION) + _string(group_id) + _string(tp.topic) + struct.pack(">i", tp.partition)


def offset_value(committed: CommittedOffset) -> bytes:
    return (struct.pack(">hqi", OFFSET_VALUE_VERSION, committed.offset, committed.leader_epoch)
            + _string(committed.metadata) + struct.pack(">q", committed.commit_timestamp))


def parse_key(key: bytes) -> tuple[str, TopicPartition] | None:
    """(group, partition) of an offset commit key; None for Kafka's other keys (group metadata)."""
    try:
        (version,) = struct.unpack_from(">h", key)
        if version not in (0, OFFSET_KEY_VERSION):
            return None
        group, at = _read_string(key, 2)
        topic, at = _read_string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
    except (struct.error, UnicodeDecodeError) as error:
        raise CorruptRecordError(0, f"{OFFSETS_TOPIC} record key does not decode: {error}") from None
    return group, TopicPartition(topic, partition)


def parse_value(value: bytes) -> CommittedOffset:
    """Versions 1 (with an expiry time, skipped) and 3 of ``OffsetCommitValue``; 0 has no commit time."""
    try:
        (version,) = struct.unpack_from(">h", value)
        at = 2
        (offset,) = struct.unpack_from(">q", value, at)
        at += 8
        epoch = -1
        if version >= 3:
            (epoch,) = struct.unpack_from(">i", value, at)
            at += 4
        metadata, at = _read_string(value, at)
        timestamp = -1
        if version >= 1:
            (timestamp,) = struct.unpack_from(">q", value, at)
    except (struct.error, UnicodeDecodeError) as error:
        raise CorruptRecordError(0, f"{OFFSETS_TOPIC} record value does not decode: {error}") from None
    return CommittedOffset(offset, epoch, metadata, timestamp)


def _read_string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    at += 2
    if length < 0 or at + length > len(data):
        raise struct.error(f"a string of {length} bytes at byte {at - 2} runs past the {len(data)} bytes")
    return data[at:at + length].decode(), at + length
