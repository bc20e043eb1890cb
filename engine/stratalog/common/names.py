"""File and directory names of Kafka's on-disk layout, and the topic-name rule.

Every path the engine builds goes through here, so that the 20-digit segment
names, the suffix state machine (``.cleaned`` → ``.swap`` → final, ``.deleted``)
and the ``topic-partition`` directory names have one definition, and so that a
topic name can never make a path escape its data directory.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from stratalog.common.errors import InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"

OFFSETS_TOPIC = "__consumer_offsets"   # Kafka's internal topic of committed offsets

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Not a Kafka file: Kafka keeps topic configs in its metadata log; a standalone
# engine has no such log, so each partition directory carries its topic's overrides.
TOPIC_CONFIG_FILE = "stratalog-topic.properties"
# Kafka's KRaft metadata log belongs to the Raft layer: never created, loaded or deleted as a topic.
RESERVED_TOPICS = frozenset({"__cluster_metadata"})

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.[a-z]+)((?:\.[a-z]+)?)$")


def offset_prefix(offset: int) -> str:
    """The 20-digit, zero-padded base name Kafka gives a segment's files."""
    return f"{offset:020d}"


def segment_file(directory: Path, base_offset: int, suffix: str, extra: str = "") -> Path:
    return directory / f"{offset_prefix(base_offset)}{suffix}{extra}"


@dataclass(frozen=True, slots=True)
class SegmentFileName:
    """A parsed segment file name: ``00000000000000000042.index.swap``."""

    base_offset: int
    kind: str  # ".log", ".index", ".timeindex", ".txnindex", ".snapshot"
    state: str  # "", ".cleaned", ".swap" or ".deleted"


def parse_segment_file(name: str) -> SegmentFileName | None:
    match = _SEGMENT_FILE.match(name)
    if match is None:
        return None
    kind, state = match.group(2), match.group(3)
    if kind not in SEGMENT_FILE_SUFFIXES + (SNAPSHOT_SUFFIX,):
        return None
    if state not in ("", CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX):
        return None
    return SegmentFileName(int(match.group(1)), kind, state)


def validate_topic_name(topic: str) -> str:
    """Apply Kafka's rule: ``[a-zA-Z0-9._-]``, at most 249 characters, not ``.`` or ``..``.

    Because ``/`` and every other separator is excluded, a valid name cannot
    make a partition directory escape its data directory.
    """
    if not isinstance(topic, str) or topic == "":
        raise InvalidTopicError("topic name is empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name {topic!r} is illegal: it cannot be '.' or '..'")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name {topic[:40]!r}... is illegal: {len(topic)} characters, "
            f"the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if _LEGAL_TOPIC.fullmatch(topic) is None:
        bad = sorted({c for c in topic if _LEGAL_TOPIC.fullmatch(c) is None})
        raise InvalidTopicError(
            f"topic name {topic!r} is illegal: characters {''.join(bad)!r} are not allowed; "
            "use only ASCII letters, digits, '.', '_' and '-'"
        )
    return topic


class TopicPartition(NamedTuple):
    """A partition's name. A tuple, not a dataclass: it keys the dicts of every request's path (logs,
    partitions, signals, metrics), and a tuple's hash and equality are C, where a dataclass's are
    Python calls, about 0.3 µs a lookup."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``orders-3`` → (orders, 3); split on the last ``-`` as Kafka does. None if not a partition dir."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return TopicPartition(topic, int(partition))


def delete_dir_name(tp: TopicPartition) -> str:
    """``topic-partition.<uuid>-delete``, the topic truncated so the name fits 255 bytes as Kafka does."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: 255 - len(suffix)] + suffix


def is_delete_dir(name: str) -> bool:
    return name.endswith(DELETE_DIR_SUFFIX)
