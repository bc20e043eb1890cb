"""``stratalog dump-log``: Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) on segment files.

Operators compare this output with Kafka's, line for line, when they debug a
segment, so every line follows Kafka 4.x's Java ``DumpLogSegments``: its exact
wording, spacing and order, including its quirks (``-1 is followed by <base>``
for a segment not starting at offset 0, index mismatches listed by descending
offset). The files are only read (see ``stratalog.storage.inspect``); nothing is
recovered or rebuilt (Kafka's tool itself cuts an index file of odd length).

Where Kafka's tool dies with an exception this one reports and goes on: a file
that cannot be read past some point gets ``error: CORRUPT_MESSAGE: ...`` on
stderr (Kafka's message where it has one) and exit status 1, and the other
files are still dumped; an index entry at a position where no batch can be
read is listed as a mismatch with log offset -1. Control records other than
COMMIT/ABORT print as ``controlType: NAME(id)`` (Kafka renders the KRaft ones
as JSON).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]  # no stubs in the dev deps

from stratalog.common.errors import CorruptRecordError
from stratalog.storage.inspect.index_files import IndexContents, TimeEntry, read_offset_index, read_time_index
from stratalog.storage.producer_snapshot import CorruptSnapshotError, read_producer_snapshot
from stratalog.storage.inspect.txn_index import read_txn_index
from stratalog.storage.inspect.walk import BatchSpan, BatchView, RecordView, SegmentMap, SegmentWalk, batch_records, mapped
from stratalog.common.names import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from stratalog.records import NO_TIMESTAMP, peek_batch
from stratalog.records.varint import Buffer
from stratalog.common.limits import INT32_MAX
from stratalog.cli.common import ArgumentError, check_readable_file

MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default: how far an index dump reads
_KINDS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
RECORD_INDENT = "|"

Progress = Callable[[int], object]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "dump-log",
        help="print segment files (.log, .index, .timeindex, .txnindex, .snapshot) as Kafka's kafka-dump-log.sh",
        description="Parse log and index files and print their contents exactly as Kafka's kafka-dump-log.sh "
                    "(DumpLogSegments) does. Files are only read: nothing is recovered or rebuilt.",
    )
    parser.add_argument("--files", required=True, metavar="FILE1,FILE2,...",
                        help="REQUIRED: the comma separated list of data and index log files to be dumped")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print the records' keys and payloads (as UTF-8); implies --deep-iteration")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record, not only every batch")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="with --print-data-log, print only keys and payloads of records")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run the check Kafka runs on an index at startup (whether to rebuild it)")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check index entries against the log without printing them")
    parser.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="N",
                        help="read at most N bytes of each .log file (default: all)")
    parser.set_defaults(run=run)


@dataclass
class _Reports:
    """What Kafka prints on stderr after all files, per file (maps keyed by offset, as Kafka's TreeMaps)."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)
    failed: bool = False

    def error(self, message: str) -> None:
        """A file that cannot be dumped (where Kafka's tool dies with an exception): report, go on, exit 1."""
        self.failed = True
        print(f"error: CORRUPT_MESSAGE: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    files = [f for f in args.files.split(",") if f]
    _check_files(files)
    reports = _Reports()
    deep = args.deep_iteration or args.print_data_log
    out = sys.stdout
    with _progress(sum(os.path.getsize(f) for f in files)) as advance:
        for name in files:
            out.write(f"Dumping {name}\n")
            kind = _kind(Path(name))
            try:
                if kind == ".log":
                    _dump_log(name, out, reports, advance, deep=deep, print_data=args.print_data_log,
                              skip_metadata=args.skip_record_metadata, max_bytes=args.max_bytes)
                elif kind == ".index":
                    _dump_index(name, out, reports, sanity_only=args.index_sanity_check,
                                verify_only=args.verify_index_only)
                elif kind == ".timeindex":
                    _dump_time_index(name, out, reports, sanity_only=args.index_sanity_check,
                                     verify_only=args.verify_index_only)
                elif kind == ".txnindex":
                    _dump_txn_index(name, out)
                else:
                    _dump_snapshot(name, out)
            except CorruptRecordError as error:
                reports.error(str(error))
            if kind != ".log":  # a .log advances batch by batch
                advance(os.path.getsize(name))
    out.flush()
    _print_reports(reports, sys.stderr)
    return 1 if reports.failed else 0


# -- arguments ------------------------------------------------------------------------------

def _kind(path: Path) -> str:
    """The file's type: its last suffix, looking through a .deleted/.cleaned/.swap state suffix."""
    name = path.name
    for state in (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX):
        if name.endswith(state):
            name = name[: -len(state)]
    return os.path.splitext(name)[1]


def _base_offset(path: Path) -> int:
    """Kafka takes a segment's base offset from the name up to the first dot."""
    return int(path.name.split(".")[0])


def _check_files(files: list[str]) -> None:
    """Every file before the first is dumped: ``ArgumentError`` (``error: INVALID_REQUEST: --files NAME:
    why``, exit 1) for one that cannot be read, has no dumpable type, or whose log is missing."""
    if not files:
        raise ArgumentError("--files names no file")
    for name in files:
        path = check_readable_file("--files", name, regular=True)
        if _kind(path) not in _KINDS:
            raise ArgumentError(f"--files {name}: unknown file type {_kind(path) or '(no suffix)'!r}; expected one "
                                f"of {', '.join(_KINDS)}")
        if _kind(path) != ".snapshot" and not path.name.split(".")[0].isdigit():
            raise ArgumentError(f"--files {name}: the name must start with the segment's base offset "
                                "(e.g. 00000000000000000000.log)")
        if _kind(path) in (".index", ".timeindex"):
            check_readable_file(f"--files {name}: its log", _log_of(path), regular=True)


def _log_of(index: Path) -> Path:
    return index.with_name(index.name.split(".")[0] + ".log")


@contextmanager
def _progress(total: int) -> Iterator[Progress]:
    """A bar on stderr for long dumps - only when stderr is a terminal and stdout is not,
    since a bar redrawn between dump lines on the same terminal would garble them."""
    if not (sys.stderr.isatty() and not sys.stdout.isatty()):
        yield lambda _n: None
        return
    with tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, delay=1.0, desc="dump-log") as bar:
        yield bar.update


# -- .log -----------------------------------------------------------------------------------

def _dump_log(name: str, out: TextIO, reports: _Reports, advance: Progress, *, deep: bool, print_data: bool,
              skip_metadata: bool, max_bytes: int) -> None:
    path = Path(name)
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    source = str(path)
    # Kafka starts from -1, so a segment whose first offset is not 0 reports "-1 is followed by <first>".
    last_offset = -1
    gaps: dict[int, int] = {}
    with mapped(path, max_bytes) as buf:
        walk = SegmentWalk(buf, source)
        for batch in walk:
            if batch.problem is not None:
                raise batch.problem
            out.write(batch_line(batch) + "\n")
            if deep:
                for view in batch_records(buf, batch, source):
                    offset = view.record.offset
                    if offset != last_offset + 1:
                        gaps[last_offset] = offset
                    last_offset = offset
                    out.write(record_line(batch, view, print_data=print_data, skip_metadata=skip_metadata) + "\n")
            advance(batch.size)
        if gaps:
            reports.non_consecutive[os.path.abspath(path)] = gaps
        if walk.error is not None:
            raise walk.error
        # Kafka only counts invalid bytes when it read the whole file.
        if walk.trailing_bytes > 0 and max_bytes == INT32_MAX:
            out.write(f"Found {walk.trailing_bytes} invalid bytes at the end of {path.name}\n")
        advance(walk.trailing_bytes)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: BatchView) -> str:
    """Kafka's ``printBatchLevel``: every v2 header field, or ``offset:`` for a legacy entry."""
    header = batch.header
    if header is not None:
        horizon = header.delete_horizon_ms
        head = (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
                f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
                f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
                f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'}")
        crc, codec = header.crc, header.compression
    else:
        assert batch.legacy is not None
        head = f"offset: {batch.info.last_offset}"
        crc, codec = batch.legacy.crc, batch.legacy.compression
    return (f"{head} position: {batch.position} {batch.timestamp_type.kafka_name}: {batch.info.max_timestamp} "
            f"size: {batch.size} magic: {batch.info.magic} compresscodec: {codec.kafka_name} crc: {crc} "
            f"isvalid: {_bool(batch.crc_valid)}")


def record_line(batch: BatchView, view: RecordView, *, print_data: bool, skip_metadata: bool) -> str:
    """One deep-iteration line: ``| offset: ...`` then v2 sequence/headers, legacy CRC, control
    marker, and with --print-data-log the key and payload (as Kafka's StringDecoder: UTF-8)."""
    record = view.record
    parts = []
    if not skip_metadata:
        parts.append(f"{RECORD_INDENT} offset: {record.offset} {batch.timestamp_type.kafka_name}: {record.timestamp} "
                     f"keySize: {_size(record.key)} valueSize: {_size(record.value)}")
        if batch.header is not None:
            parts.append(f" sequence: {view.sequence} headerKeys: [{','.join(h.key for h in record.headers)}]")
        if view.legacy_crc is not None:
            parts.append(f" isValid: {_bool(bool(view.legacy_valid))} crc: {view.legacy_crc}")
        if view.control is not None:
            control = view.control
            if control.coordinator_epoch is not None:
                parts.append(f" endTxnMarker: {control.type.name} coordinatorEpoch: {control.coordinator_epoch}")
            else:
                parts.append(f" controlType: {control.type.name}({control.type_id})")
    if print_data and not batch.is_control:
        prefix = f"{RECORD_INDENT} " if skip_metadata else " "
        if record.key is not None:
            parts.append(f"{prefix}key: {record.key.decode('utf-8', 'replace')}")
            prefix = " "
        if record.value is not None:
            parts.append(f"{prefix}payload: {record.value.decode('utf-8', 'replace')}")
    return "".join(parts)


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


# -- .index and .timeindex --------------------------------------------------------------------

def _dump_index(name: str, out: TextIO, reports: _Reports, *, sanity_only: bool, verify_only: bool) -> None:
    path = Path(name)
    index = read_offset_index(path, _base_offset(path))
    if index.slots == 0:
        out.write(f"{name} is empty.\n")
        return
    if sanity_only:
        # Kafka's OffsetIndex.sanityCheck: the file's last slot (zero tail or not) and its length.
        absolute, base, last = os.path.abspath(path), index.base_offset, index.last_slot
        if last is not None and last.offset < base:
            reports.error(f"Corrupt index found, index file {absolute} has non-zero size but the last offset "
                          f"is {last.offset} which is less than the base offset {base}")
        elif index.partial_bytes:
            reports.error(f"Index file {absolute} is corrupt, found {index.file_length} bytes which is neither "
                          f"positive nor a multiple of {index.entry_size}")
        else:
            out.write(f"{name} passed sanity check.\n")
        return
    mismatches: dict[int, int] = {}
    with mapped(_log_of(path)) as log:
        for entry in index.entries:
            found = _last_offset_at(log, entry.position)
            if found != entry.offset:
                mismatches[entry.offset] = found
            if not verify_only:
                out.write(f"offset: {entry.offset} position: {entry.position}\n")
    if mismatches:
        reports.index_mismatches[os.path.abspath(path)] = mismatches


def _last_offset_at(log: Buffer, position: int) -> int:
    """Last offset of the batch read at ``position`` as Kafka reads it (whatever bytes are there,
    at most --max-message-size of them); -1 where Kafka's tool would fail to read any batch."""
    try:
        info = peek_batch(log[: position + MAX_MESSAGE_SIZE], position)
    except CorruptRecordError:
        return -1
    return -1 if info is None else info.last_offset


def _dump_time_index(name: str, out: TextIO, reports: _Reports, *, sanity_only: bool, verify_only: bool) -> None:
    path = Path(name)
    index = read_time_index(path, _base_offset(path))
    absolute = os.path.abspath(path)
    if sanity_only:
        _time_index_sanity(name, index, out, reports)
        return
    log_path = _log_of(path)
    source = str(log_path)
    with mapped(log_path) as log:
        # Kafka starts its scan at the .index lookup for the entry's offset; scanning the
        # whole log finds the same batch and does not depend on the .index being sound.
        views = {v.position: v for v in SegmentWalk(log, source)}
        segment = SegmentMap([BatchSpan(v.position, v.size, v.info.base_offset, v.info.last_offset,
                                        v.info.max_timestamp) for v in views.values()])
        previous = NO_TIMESTAMP
        for entry in index.entries:
            span = segment.first_ending_at_or_after(entry.offset)
            if span is None:
                reports.time_not_found.setdefault(absolute, []).append((entry.offset, -1))
            elif span.last_offset != entry.offset:
                reports.time_not_found.setdefault(absolute, []).append((entry.offset, span.last_offset))
            else:
                # Kafka compares with the largest *record* timestamp of that batch.
                records = batch_records(log, views[span.position], source)
                largest = max((v.record.timestamp for v in records), default=NO_TIMESTAMP)
                if largest != entry.timestamp:
                    reports.time_mismatches.setdefault(absolute, []).append((entry.timestamp, largest))
                if previous >= entry.timestamp:
                    reports.time_out_of_order.setdefault(absolute, []).append((entry.timestamp, previous))
            if not verify_only:
                out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
            previous = entry.timestamp


def _time_index_sanity(name: str, index: IndexContents[TimeEntry], out: TextIO, reports: _Reports) -> None:
    """Kafka's ``TimeIndex.sanityCheck``: the file's first and last slots, and its length."""
    absolute, first, last = os.path.abspath(name), index.first_slot, index.last_slot
    if first is not None and last is not None and last.timestamp < first.timestamp:
        reports.error(f"Corrupt time index found, time index file ({absolute}) has non-zero size but the last "
                      f"timestamp is {last.timestamp} which is less than the first timestamp {first.timestamp}")
    elif last is not None and last.offset < index.base_offset:
        reports.error(f"Corrupt time index found, time index file ({absolute}) has non-zero size but the last "
                      f"offset is {last.offset} which is less than the first offset {index.base_offset}")
    elif index.partial_bytes:
        reports.error(f"Time index file {absolute} is corrupt, found {index.file_length} bytes which is neither "
                      f"positive nor a multiple of {index.entry_size}")
    else:
        out.write(f"{name} passed sanity check.\n")


# -- .txnindex and .snapshot --------------------------------------------------------------------

def _dump_txn_index(name: str, out: TextIO) -> None:
    entries, _partial = read_txn_index(Path(name))  # Kafka's iterator ignores a partial last entry too
    for txn in entries:
        out.write(f"version: {txn.version_byte} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                  f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}\n")


def _dump_snapshot(name: str, out: TextIO) -> None:
    try:
        entries = read_producer_snapshot(Path(name))
    except CorruptSnapshotError as error:
        # Kafka prints the message and carries on with the next file.
        print(str(error), file=sys.stderr)
        return
    for e in entries:
        txn = "OptionalLong.empty" if e.current_txn_first_offset < 0 else f"OptionalLong[{e.current_txn_first_offset}]"
        line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: "
                f"{e.coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp}")
        if e.last_offset >= 0:  # Kafka keeps batch metadata only for entries with a last offset
            line += (f" firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} "
                     f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
        out.write(line + "\n")


# -- the summaries Kafka prints on stderr at the end -------------------------------------------

def _print_reports(reports: _Reports, err: TextIO) -> None:
    for name, by_offset in reports.index_mismatches.items():
        err.write(f"Mismatches in :{name}\n")
        for index_offset, log_offset in sorted(by_offset.items(), reverse=True):
            err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
    for name, pairs in reports.time_mismatches.items():
        err.write(f"Found timestamp mismatch in :{name}\n")
        for index_ts, log_ts in pairs:
            err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
    for name, pairs in reports.time_out_of_order.items():
        err.write(f"Found out of order timestamp in :{name}\n")
        for index_ts, previous in pairs:
            err.write(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}\n")
    for name, pairs in reports.time_not_found.items():
        err.write(f"The following indexed offsets are not found in :{name}\n")
        for indexed, found in pairs:
            err.write(f"Indexed offset: {indexed}, found log offset: {found}\n")
    for name, gaps in reports.non_consecutive.items():
        err.write(f"Non-consecutive offsets in {name}\n")
        for first, second in sorted(gaps.items()):
            err.write(f"  {first} is followed by {second}\n")
