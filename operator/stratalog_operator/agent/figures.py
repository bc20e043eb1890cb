"""Per-partition figures for Topic status: coarse, and written only when they matter (no I/O).

Status is for people and for ``kubectl get``; Prometheus has the fine figures. So the
agent rounds sizes, and writes a Topic's entry when something a reader cares about moved
(partitions appeared or went, segments were deleted or cleaned, the dirty ratio moved by
a tenth, offsets or size by 10%), at most every ``min_interval``; smaller drift is
written at most every ``max_interval``; and nothing at all is written while nothing
changes, so a quiet cluster costs no API writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PartitionFigures", "topic_entry", "significant", "WritePolicy", "iso_ms"]

Json = dict[str, Any]


@dataclass(frozen=True)
class PartitionFigures:
    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int
    segments: int
    dirty_ratio: float | None = None        # compacted partitions only
    last_retention_ms: int | None = None    # last time retention deleted a segment of this partition
    last_clean_ms: int | None = None


def iso_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).replace(microsecond=0) \
        .strftime("%Y-%m-%dT%H:%M:%SZ")


def _coarse_bytes(n: int) -> int:
    """Two significant figures: status says "about 1.3 MB", /metrics says exactly."""
    if n < 100:
        return n
    digits = len(str(n)) - 2
    return round(n, -digits)


def topic_entry(figures: list[PartitionFigures]) -> Json:
    """The value under ``status.logDirs.<logdir>`` for one Topic."""
    partitions: Json = {}
    for f in sorted(figures, key=lambda f: f.partition):
        entry: Json = {"logStartOffset": f.log_start_offset, "logEndOffset": f.log_end_offset,
                       "sizeBytes": _coarse_bytes(f.size_bytes), "segments": f.segments}
        if f.dirty_ratio is not None:
            entry["dirtyRatio"] = round(f.dirty_ratio, 2)
        if f.last_retention_ms is not None:
            entry["lastRetentionTime"] = iso_ms(f.last_retention_ms)
        if f.last_clean_ms is not None:
            entry["lastCleanTime"] = iso_ms(f.last_clean_ms)
        partitions[str(f.partition)] = entry
    return {"partitions": partitions}


def _moved(a: float, b: float, share: float) -> bool:
    return abs(a - b) > share * max(abs(a), abs(b), 1)


def significant(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a reader would want to see ``new`` instead of ``old`` now."""
    if old is None:
        return True
    old_p, new_p = old.get("partitions") or {}, new.get("partitions") or {}
    if set(old_p) != set(new_p):
        return True
    for key, n in new_p.items():
        o = old_p[key]
        for field_ in ("segments", "lastRetentionTime", "lastCleanTime", "logStartOffset"):
            if o.get(field_) != n.get(field_):
                return True
        if abs(float(o.get("dirtyRatio") or 0) - float(n.get("dirtyRatio") or 0)) >= 0.1:
            return True
        if _moved(o.get("logEndOffset", 0), n.get("logEndOffset", 0), 0.1) or \
                _moved(o.get("sizeBytes", 0), n.get("sizeBytes", 0), 0.1):
            return True
    return False


@dataclass
class WritePolicy:
    min_interval: float = 10.0     # seconds between writes of one Topic's entry, when significant
    max_interval: float = 300.0    # seconds after which any change at all is written

    def should_write(self, old: Mapping[str, Any] | None, new: Mapping[str, Any], last_write: float | None,
                     now: float) -> bool:
        if old == new:
            return False
        if last_write is None:
            return True
        elapsed = now - last_write
        if significant(old, new):
            return elapsed >= self.min_interval
        return elapsed >= self.max_interval
