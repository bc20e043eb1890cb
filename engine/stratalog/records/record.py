"""The decoded form of a record, shared by the v2 and legacy (v0/v1) readers.

Every format decodes to the same immutable ``Record`` with absolute offset and
timestamp, so callers (reads, compaction, dumps) never care which on-disk
format a record came from.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~3x to build, and these are built per batch/record
class Header:
    """A v2 record header: a UTF-8 key (never null) and a nullable value."""

    key: str
    value: bytes | None


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~3x to build, and these are built per batch/record
class Record:
    """One record with its absolute offset and timestamp (-1 = none)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
