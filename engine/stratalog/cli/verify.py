"""``stratalog verify``: check data directories for corruption without repairing anything.

Opening a directory through the engine runs recovery, which truncates torn
tails and rebuilds indexes - it would hide exactly what an operator asks
``verify`` about. So this command takes the directories' ``.lock`` itself (a
directory in use by another process is refused with the engine's lock error)
and reads every file directly: every batch's CRC and structure, offsets across
segments, every index entry against the log, checkpoint files, and leftovers of
interrupted operations. Nothing but the ``.lock`` file is ever written.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]  # no stubs in the dev deps

from stratalog.storage.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile
from stratalog.common.properties import parse_properties
from stratalog.storage.dir_lock import DirLock
from stratalog.common.errors import CheckpointError, LogDirError
from stratalog.storage.inspect.checks import check_segment
from stratalog.storage.inspect.findings import Finding
from stratalog.storage.producer_snapshot import CorruptSnapshotError, read_producer_snapshot
from stratalog.common.names import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    is_delete_dir,
    offset_prefix,
    parse_partition_dir,
    parse_segment_file,
)

Progress = Callable[[int], object]

_LEFTOVERS = {
    DELETED_SUFFIX: "scheduled for deletion; the next open deletes them",
    CLEANED_SUFFIX: "left by an interrupted cleaning; the next open deletes them",
    SWAP_SUFFIX: "left by an interrupted segment swap; the next open completes or discards the swap",
}
_OFFSET_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                       CLEANER_OFFSET_CHECKPOINT)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "verify",
        help="check data directories for corruption (CRCs, offsets, indexes, checkpoints) without repairing",
        description="Check every segment, index and checkpoint of the data directories and report each problem "
                    "with its file and byte position or index entry. Unlike the other commands this does not open "
                    "the directories through the engine, so no recovery runs and nothing is repaired; the "
                    "directories' locks are taken, so a directory in use by another process is refused. "
                    "Exit status: 0 clean (warnings allowed), 1 corruption found, 2 usage error.",
    )
    parser.add_argument("--data-dir", dest="data_dirs", action="append", required=True, metavar="DIR",
                        help="a data directory (repeat for several)")
    parser.add_argument("--json", action="store_true", help="print one JSON report instead of text")
    parser.set_defaults(run=run)


@dataclass
class PartitionReport:
    """One partition directory: totals over its segments and everything found wrong."""

    topic_partition: TopicPartition
    path: Path
    segments: int = 0
    batches: int = 0
    records: int = 0
    size: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"topic": self.topic_partition.topic, "partition": self.topic_partition.partition,
                "path": str(self.path), "segments": self.segments, "batches": self.batches, "records": self.records,
                "bytes": self.size, "firstOffset": self.first_offset, "lastOffset": self.last_offset,
                "errors": _count(self.findings, "error"), "warnings": _count(self.findings, "warning"),
                "findings": [f.to_json() for f in self.findings]}


@dataclass
class DirReport:
    path: Path
    partitions: list[PartitionReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def all_findings(self) -> Iterator[Finding]:
        yield from self.findings
        for partition in self.partitions:
            yield from partition.findings


def run(args: argparse.Namespace) -> int:
    directories = [Path(d) for d in args.data_dirs]
    for directory in directories:
        if not directory.is_dir():
            what = "does not exist" if not directory.exists() else "is not a directory"
            print(f"stratalog verify: error: data directory {directory} {what}", file=sys.stderr)
            return 2
    with _locked(directories):
        total = sum(p.stat().st_size for d in directories for p in d.glob(f"*/*{LOG_SUFFIX}"))
        with tqdm(total=total, unit="B", unit_scale=True, desc="verify", file=sys.stderr,
                  disable=not sys.stderr.isatty()) as bar:
            reports = [verify_dir(d, bar.update) for d in directories]
    findings = [f for r in reports for f in r.all_findings()]
    if args.json:
        print(json.dumps(_json_report(reports, findings), ensure_ascii=False))
    else:
        _print_text(reports, findings)
    return 1 if _count(findings, "error") else 0


@contextmanager
def _locked(directories: list[Path]) -> Iterator[None]:
    """Hold every directory's lock while reading it; LogDirLockedError if another process has one."""
    with ExitStack() as stack:
        for directory in directories:
            lock = DirLock(directory)
            try:
                lock.acquire()
            except OSError as error:  # e.g. a read-only directory: the .lock cannot be created
                raise LogDirError(f"cannot lock data directory {directory}: {error.strerror}") from None
            stack.callback(lock.release)
        yield


# -- checking -------------------------------------------------------------------------------

def verify_dir(directory: Path, progress: Progress) -> DirReport:
    report = DirReport(directory)
    for name in _OFFSET_CHECKPOINTS:
        path = directory / name
        if path.exists():
            _check_parses(report.findings, path, OffsetCheckpointFile(path).read)
    meta = directory / META_PROPERTIES_FILE
    if meta.exists():
        _check_parses(report.findings, meta, functools.partial(parse_properties, meta))
    for child in sorted(directory.iterdir()):
        if not child.is_dir():
            continue
        if is_delete_dir(child.name):
            report.findings.append(Finding("warning", str(child), "a deleted topic's partition; the next open "
                                                                  "removes it"))
            continue
        tp = parse_partition_dir(child.name)
        if tp is not None:
            report.partitions.append(verify_partition(child, tp, progress))
    return report


def verify_partition(directory: Path, tp: TopicPartition, progress: Progress) -> PartitionReport:
    """Every segment in offset order, plus the partition's files around them."""
    report = PartitionReport(tp, directory)
    findings = report.findings
    logs: list[tuple[int, Path]] = []
    indexes: list[tuple[int, Path]] = []
    leftovers: dict[tuple[int, str], list[str]] = {}
    for path in sorted(directory.iterdir()):
        parsed = parse_segment_file(path.name)
        if parsed is None:
            continue
        if parsed.state:
            leftovers.setdefault((parsed.base_offset, parsed.state), []).append(parsed.kind)
        elif parsed.kind == LOG_SUFFIX:
            logs.append((parsed.base_offset, path))
        elif parsed.kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            indexes.append((parsed.base_offset, path))
        elif parsed.kind == SNAPSHOT_SUFFIX:
            _check_snapshot(findings, path)
    # One warning per segment (its .log, .index, ... share a fate), not per file.
    for (base, state), kinds in leftovers.items():
        findings.append(Finding("warning", str(directory / f"{offset_prefix(base)}.*{state}"),
                                f"leftover {'/'.join(kinds)} {state} files: {_LEFTOVERS[state]}"))
    bases = {base for base, _ in logs}
    for base, path in indexes:
        if base not in bases:
            findings.append(Finding("warning", str(path), "an index without its .log; the next open deletes it"))
    epochs = directory / LEADER_EPOCH_CHECKPOINT
    if epochs.exists():
        _check_parses(findings, epochs, LeaderEpochCheckpointFile(epochs).read)

    previous_last: int | None = None
    for base, path in logs:
        if previous_last is not None and base <= previous_last:
            findings.append(Finding("error", str(path), f"segment base offset {base} is not above the previous "
                                                        f"segment's last offset {previous_last}"))
        segment = check_segment(path, base, previous_last_offset=previous_last)
        findings.extend(segment.findings)
        report.segments += 1
        report.batches += segment.batches
        report.records += segment.records
        report.size += segment.size
        if segment.first_offset is not None and report.first_offset is None:
            report.first_offset = segment.first_offset
        if segment.last_offset is not None:
            report.last_offset = segment.last_offset
            previous_last = segment.last_offset if previous_last is None else max(previous_last, segment.last_offset)
        progress(segment.size)
    return report


def _check_parses(findings: list[Finding], path: Path, read: Callable[[], object]) -> None:
    try:
        read()
    except (CheckpointError, ValueError, OSError) as error:  # UnicodeDecodeError is a ValueError
        findings.append(Finding("error", str(path), f"does not parse: {error}"))


def _check_snapshot(findings: list[Finding], path: Path) -> None:
    # The broker deletes an unreadable producer snapshot and rebuilds producer state from the log.
    try:
        read_producer_snapshot(path)
    except CorruptSnapshotError as error:
        findings.append(Finding("warning", str(path), f"{error}; the next open rebuilds producer state from the log"))


# -- output ---------------------------------------------------------------------------------

def _count(findings: list[Finding], severity: str) -> int:
    return sum(1 for f in findings if f.severity == severity)


def _verdict(findings: list[Finding]) -> str:
    errors, warnings = _count(findings, "error"), _count(findings, "warning")
    if not errors and not warnings:
        return "OK"
    return f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def format_finding(finding: Finding) -> str:
    """``ERROR <file>: byte <n>: <what>``, or ``entry <n> (byte <b>)`` for an index entry."""
    where = ""
    if finding.entry is not None:
        where = f"entry {finding.entry} (byte {finding.position}): "
    elif finding.position is not None:
        where = f"byte {finding.position}: "
    return f"{finding.severity.upper()} {finding.path}: {where}{finding.message}"


def _print_text(reports: list[DirReport], findings: list[Finding]) -> None:
    partitions = 0
    for report in reports:
        for partition in report.partitions:
            partitions += 1
            offsets = ("no records" if partition.first_offset is None
                       else f"offsets {partition.first_offset}..{partition.last_offset}")
            print(f"{partition.topic_partition} ({partition.path}): {_plural(partition.segments, 'segment')}, "
                  f"{_plural(partition.batches, 'batch', 'batches')}, "
                  f"{_plural(partition.records, 'record')}, {offsets}, {partition.size} bytes: "
                  f"{_verdict(partition.findings)}")
            for finding in partition.findings:
                print(f"  {format_finding(finding)}")
        for finding in report.findings:
            print(format_finding(finding))
    state = "clean" if not _count(findings, "error") else "CORRUPT"
    print(f"verified {_plural(partitions, 'partition')} in "
          f"{_plural(len(reports), 'data directory', 'data directories')}: {state} ({_verdict(findings)})")


def _json_report(reports: list[DirReport], findings: list[Finding]) -> dict[str, object]:
    return {
        "clean": not _count(findings, "error"),
        "errors": _count(findings, "error"),
        "warnings": _count(findings, "warning"),
        "dataDirs": [{"path": str(r.path), "findings": [f.to_json() for f in r.findings],
                      "partitions": [p.to_json() for p in r.partitions]} for r in reports],
    }
