"""The on-disk form of a compaction plan: which offsets of one partition to keep.

A plan is computed where the key space fits (Spark's ``compaction-plan`` job:
``groupBy(key).max(offset)`` over a whole topic) and applied by the engine in
one pass over the log. For the engine to apply it with O(1) memory, whatever
the number of keys, the plan is a stream it can merge with the batches, which
are in offset order too:

* ``<topic>-<p>.keep`` - the offsets to keep, strictly increasing, each an
  8-byte big-endian int64 (nothing else: the file can be written by any tool
  that sorts, and its size says how many offsets it holds);
* ``<topic>-<p>.keep.json`` - the sidecar: format, topic, partition, the
  plan's ``highWatermark`` (it covers the offsets below it; later ones are
  not its business and stay untouched), the offset count, and the log start
  offset the plan was computed from.

The sidecar is written last, atomically, so a plan whose writer died half way
has no sidecar and is refused rather than applied half-written.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratalog.common.files import atomic_write, fsync_dir
from stratalog.common.errors import StratalogError

FORMAT = "stratalog-keep-v1"
KEEP_SUFFIX = ".keep"
SIDECAR_SUFFIX = ".json"
_ENTRY = 8
_CHUNK_ENTRIES = 8192  # 64 KiB per read: the whole memory cost of streaming a plan


class CompactionPlanError(StratalogError):
    """A plan that is malformed or does not belong to the log it is applied to."""

    code = "INVALID_REQUEST"


@dataclass(frozen=True)
class PlanHeader:
    topic: str
    partition: int
    high_watermark: int  # the plan covers offsets < high_watermark
    count: int
    log_start_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "topic": self.topic, "partition": self.partition,
                "highWatermark": self.high_watermark, "count": self.count, "logStartOffset": self.log_start_offset}


def keep_file_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}{KEEP_SUFFIX}"


def sidecar_path(keep_file: Path) -> Path:
    return keep_file.with_name(keep_file.name + SIDECAR_SUFFIX)


def read_header(keep_file: Path) -> PlanHeader:
    """The sidecar, checked against the keep file's size; ``CompactionPlanError`` names what is wrong."""
    sidecar = sidecar_path(keep_file)
    try:
        raw = json.loads(sidecar.read_text("utf-8"))
    except FileNotFoundError:
        raise CompactionPlanError(f"{sidecar} is missing: the plan was never completed") from None
    except (OSError, ValueError) as error:
        raise CompactionPlanError(f"{sidecar}: not a readable JSON plan header ({error})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CompactionPlanError(f"{sidecar}: not a {FORMAT} plan header")
    try:
        header = PlanHeader(str(raw["topic"]), int(raw["partition"]), int(raw["highWatermark"]), int(raw["count"]),
                            int(raw["logStartOffset"]))
    except (KeyError, TypeError, ValueError) as error:
        raise CompactionPlanError(f"{sidecar}: field {error} is missing or not a number") from None
    try:
        size = keep_file.stat().st_size
    except FileNotFoundError:
        raise CompactionPlanError(f"{keep_file} is missing") from None
    if size != header.count * _ENTRY:
        raise CompactionPlanError(f"{keep_file} holds {size} bytes, but its header announces {header.count} "
                                  f"offsets ({header.count * _ENTRY} bytes)")
    return header


def iter_keep_offsets(keep_file: Path) -> Iterator[int]:
    """The offsets in file order, read 64 KiB at a time; raises if they do not strictly increase."""
    previous = -1
    with open(keep_file, "rb") as file:
        while chunk := file.read(_CHUNK_ENTRIES * _ENTRY):
            if len(chunk) % _ENTRY:
                raise CompactionPlanError(f"{keep_file}: {len(chunk) % _ENTRY} trailing bytes are not an offset")
            values = array("q")
            values.frombytes(chunk)
            if sys.byteorder == "little":
                values.byteswap()
            for offset in values:
                if offset <= previous:
                    raise CompactionPlanError(f"{keep_file}: offset {offset} follows {previous}; a plan's offsets "
                                              "must strictly increase")
                previous = offset
                yield offset


def check_keep_file(keep_file: Path, header: PlanHeader) -> None:
    """One streaming pass before anything is rewritten: strictly increasing and all below the high watermark.

    The merge itself would notice a step back only where it reaches it, after
    earlier groups were already swapped in; a plan is all good or not applied.
    """
    last = -1
    for last in iter_keep_offsets(keep_file):
        pass
    if last >= header.high_watermark:
        raise CompactionPlanError(f"{keep_file}: offset {last} is not below the plan's high watermark "
                                  f"{header.high_watermark}")


class KeepFileWriter:
    """Writes offsets, in increasing order, to a file that ``publish_keep_file`` later makes a plan.

    Writing and publishing are apart so that a Spark task can write its
    partitions' files and the driver publish them only once the job succeeded.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "wb")
        self._pending = array("q")
        self.count = 0
        self.last = -1

    def write(self, offsets: Iterable[int]) -> None:
        for offset in offsets:
            if offset <= self.last:
                raise CompactionPlanError(f"{self.path}: offset {offset} after {self.last}; write them sorted")
            self.last = offset
            self._pending.append(offset)
            if len(self._pending) >= _CHUNK_ENTRIES:
                self._flush()  # replaces self._pending

    def _flush(self) -> None:
        if sys.byteorder == "little":
            self._pending.byteswap()
        self._file.write(self._pending.tobytes())
        self.count += len(self._pending)
        self._pending = array("q")

    def close(self) -> int:
        """Flush and fsync; returns how many offsets the file holds."""
        self._flush()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return self.count

    def abort(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


def publish_keep_file(written: Path, directory: Path, header: PlanHeader) -> Path:
    """Make ``written`` the plan of ``header``'s partition in ``directory``; returns the ``.keep`` path.

    The old sidecar goes first and the new one comes last, so at no moment does
    a sidecar describe offsets it was not written for.
    """
    size = written.stat().st_size
    if size != header.count * _ENTRY:
        raise CompactionPlanError(f"{written} holds {size} bytes, not the {header.count} offsets announced")
    keep = directory / keep_file_name(header.topic, header.partition)
    sidecar = sidecar_path(keep)
    sidecar.unlink(missing_ok=True)
    fsync_dir(directory)
    os.replace(written, keep)
    atomic_write(sidecar, json.dumps(header.to_json()).encode("utf-8"))
    return keep


def write_keep_file(directory: Path, topic: str, partition: int, offsets: Iterable[int], *, high_watermark: int,
                    log_start_offset: int) -> Path:
    """A whole plan for one partition in one call (tests, small plans computed anywhere)."""
    tmp = directory / (keep_file_name(topic, partition) + ".tmp")
    writer = KeepFileWriter(tmp)
    try:
        writer.write(offsets)
        count = writer.close()
    except BaseException:
        writer.abort()
        raise
    if writer.last >= high_watermark:
        tmp.unlink()
        raise CompactionPlanError(f"offset {writer.last} is not below the plan's high watermark {high_watermark}")
    return publish_keep_file(tmp, directory, PlanHeader(topic, partition, high_watermark, count, log_start_offset))
