"""Kafka's checkpoint and metadata files, in Kafka's exact text formats, written atomically.

Checkpoints are small text files that the engine rewrites often. A crash in the
middle of a write must leave either the old or the new content, so every write
follows Kafka's protocol: write ``<file>.tmp``, fsync it, rename it over the
file, fsync the directory. The readers accept exactly what Kafka writes and
reject anything else with a message naming the file and the line.
"""

from __future__ import annotations

import json
import secrets
import base64
from collections.abc import Iterable, Mapping
from pathlib import Path

from stratalog.common.errors import CheckpointError
from stratalog.common.files import atomic_write, fsync_dir
from stratalog.common.names import TopicPartition
from stratalog.common.properties import format_properties, parse_properties

CHECKPOINT_VERSION = 0


def _parse_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """The generic CheckpointFile format: version line, count line, one entry per line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    if text == "":
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version line and a count line, found {len(lines)} line(s)")
    try:
        version = int(lines[0].strip())
    except ValueError:
        raise CheckpointError(f"{path}, line 1: version {lines[0]!r} is not a number") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}, line 1: unsupported version {version}, expected {CHECKPOINT_VERSION}")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{path}, line 2: entry count {lines[1]!r} is not a number") from None
    entries = lines[2:]
    if count != len(entries):
        raise CheckpointError(f"{path}: line 2 declares {count} entries but {len(entries)} follow")
    parsed = []
    for number, line in enumerate(entries, start=3):
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"{path}, line {number}: expected {fields} fields, found {line!r}")
        parsed.append(parts)
    return parsed


def _format_checkpoint(entries: list[str]) -> bytes:
    return (f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(e + "\n" for e in entries)).encode("utf-8")


class OffsetCheckpointFile:
    """``recovery-point-offset-checkpoint`` and friends: ``topic partition offset`` per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for number, (topic, partition, offset) in enumerate(_parse_checkpoint(self.path, 3), start=3):
            try:
                result[TopicPartition(topic, int(partition))] = int(offset)
            except ValueError:
                raise CheckpointError(
                    f"{self.path}, line {number}: partition {partition!r} or offset {offset!r} is not a number"
                ) from None
        return result

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
        atomic_write(self.path, _format_checkpoint(lines))


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint`` inside a partition directory: ``epoch startOffset`` per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[tuple[int, int]]:
        result = []
        for number, (epoch, offset) in enumerate(_parse_checkpoint(self.path, 2), start=3):
            try:
                result.append((int(epoch), int(offset)))
            except ValueError:
                raise CheckpointError(f"{self.path}, line {number}: {epoch!r} {offset!r} are not numbers") from None
        return result

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        atomic_write(self.path, _format_checkpoint([f"{epoch} {offset}" for epoch, offset in entries]))


# -- meta.properties ---------------------------------------------------------------------

def _uuid_base64() -> str:
    """Kafka's Uuid.toString: URL-safe base64 of 16 random bytes, no padding."""
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).decode("ascii").rstrip("=")


def ensure_meta_properties(directory: Path, *, node_id: int = 1, cluster_id: str | None = None) -> dict[str, str]:
    """Read ``meta.properties`` or write a v1 one (KRaft style) for a new directory."""
    path = directory / "meta.properties"
    if path.exists():
        props = parse_properties(path)
        if props.get("version") not in ("0", "1"):
            raise CheckpointError(f"{path}: unsupported version {props.get('version')!r}, expected 0 or 1")
        return props
    props = {
        "node.id": str(node_id),
        "directory.id": _uuid_base64(),
        "version": "1",
        "cluster.id": cluster_id or _uuid_base64(),
    }
    atomic_write(path, format_properties(props))
    return props


# -- .kafka_cleanshutdown ----------------------------------------------------------------

def write_clean_shutdown(directory: Path, broker_epoch: int = 0) -> None:
    atomic_write(directory / ".kafka_cleanshutdown", json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                                                               separators=(",", ":")).encode())


def consume_clean_shutdown(directory: Path) -> tuple[bool, int]:
    """(whether the marker was there, the broker epoch it names). The marker is deleted *before*
    loading, so a crash while loading counts as unclean. A broker reports the epoch when it
    registers, so it is kept and written back at the next clean shutdown; garbage reads as 0."""
    path = directory / ".kafka_cleanshutdown"
    if not path.exists():
        return False, 0
    try:
        epoch = int(json.loads(path.read_text(encoding="utf-8")).get("brokerEpoch", 0))
    except (ValueError, AttributeError, TypeError):
        epoch = 0  # older brokers wrote an empty file; the read side tolerates anything
    path.unlink()
    fsync_dir(directory)
    return True, epoch
