"""Checking a segment without repairing it: every batch against its neighbours, and each index
against the log. Returns findings; never prints or writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from stratalog.common.errors import CorruptRecordError
from stratalog.common.names import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from stratalog.records import NO_TIMESTAMP, Record
from stratalog.records.varint import Buffer
from stratalog.common.limits import INT32_MAX
from stratalog.storage.inspect.findings import Finding, Severity
from stratalog.storage.inspect.index_files import E, IndexContents, OffsetEntry, TimeEntry, read_offset_index, read_time_index
from stratalog.storage.inspect.txn_index import ABORTED_TXN_ENTRY, read_txn_index
from stratalog.storage.inspect.walk import BatchSpan, BatchView, SegmentMap, SegmentWalk, batch_records, mapped


@dataclass
class SegmentReport:
    """What checking one segment found; offsets are None for a segment without batches."""

    base_offset: int
    log_path: Path
    size: int
    batches: int = 0
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    findings: list[Finding] = field(default_factory=list)


def check_segment(log_path: Path, base_offset: int, *, previous_last_offset: int | None = None) -> SegmentReport:
    """Check one segment: every batch (CRC, structure, offsets) and its indexes against it.

    ``previous_last_offset`` is the last offset of the partition's earlier
    segments, so that offsets are checked to increase across segments too.
    Nothing is repaired; the log is read through a read-only mapping.
    """
    source = str(log_path)
    with mapped(log_path) as buf:
        report = SegmentReport(base_offset, log_path, len(buf))
        spans = _check_batches(buf, report, previous_last_offset)
    segment = SegmentMap(spans)
    findings = report.findings
    index_path = log_path.with_suffix(INDEX_SUFFIX)
    time_index_path = log_path.with_suffix(TIME_INDEX_SUFFIX)
    txn_index_path = log_path.with_suffix(TXN_INDEX_SUFFIX)
    if index_path.exists():
        findings.extend(check_offset_index(read_offset_index(index_path, base_offset), segment))
    elif report.size:
        findings.append(Finding("warning", str(index_path), "missing: the next open rebuilds it from " + source))
    if time_index_path.exists():
        findings.extend(check_time_index(read_time_index(time_index_path, base_offset), segment))
    if txn_index_path.exists():
        findings.extend(check_txn_index(txn_index_path, base_offset))
    return report


def _check_batches(buf: Buffer, report: SegmentReport, previous_last_offset: int | None) -> list[BatchSpan]:
    source = str(report.log_path)
    findings = report.findings
    base = report.base_offset
    last_seen = previous_last_offset
    spans = []
    walk = SegmentWalk(buf, source)
    for batch in walk:
        report.batches += 1
        records: list[Record] = []
        if batch.problem is not None:
            findings.append(Finding("error", source, f"{batch.describe()}: {batch.problem.reason}", batch.position))
        else:
            try:
                records = [view.record for view in batch_records(buf, batch, source, verify_crc=True)]
            except CorruptRecordError as error:
                findings.append(Finding("error", source, f"{batch.describe()}: {error.reason}", error.position))
        if records:
            report.records += len(records)
        elif batch.header is not None:
            report.records += batch.header.records_count  # undecodable: trust the header's count
        first = records[0].offset if records else batch.info.base_offset
        last = batch.info.last_offset
        spans.append(BatchSpan(batch.position, batch.size, first, last, batch.info.max_timestamp))
        for problem in _offset_problems(batch, records, first, base, last_seen):
            findings.append(Finding("error", source, f"{batch.describe()}: {problem}", batch.position))
        if report.first_offset is None:
            report.first_offset = first
        report.last_offset = last if report.last_offset is None else max(report.last_offset, last)
        last_seen = last if last_seen is None else max(last_seen, last)
    if walk.error is not None and _all_zero(buf, walk.end):
        # What preallocate=true leaves when the segment was never trimmed (a crash).
        findings.append(Finding(
            "error", source, f"{walk.trailing_bytes} zero bytes after the last batch: preallocated space never "
            "trimmed, or writes lost in a crash (recovery would truncate them)", walk.end))
    elif walk.error is not None:
        findings.append(Finding(
            "error", source,
            f"{walk.error.reason}; the {walk.trailing_bytes} bytes from the batch at {walk.end} on "
            "cannot be read as batches (recovery would truncate them)", walk.error.position))
    elif walk.trailing_bytes:
        findings.append(Finding(
            "error", source,
            f"torn tail: the last {walk.trailing_bytes} bytes are not a whole batch (recovery would truncate them)",
            walk.end))
    return spans


def _all_zero(buf: Buffer, start: int, chunk: int = 1 << 20) -> bool:
    """Whether every byte from ``start`` on is zero (chunked: a preallocated tail can be a gigabyte)."""
    view = memoryview(buf)
    for position in range(start, len(buf), chunk):
        piece = bytes(view[position : position + chunk])
        if piece.count(0) != len(piece):
            return False
    return True


def _offset_problems(batch: BatchView, records: list[Record], first: int, base: int,
                     previous_last: int | None) -> Iterator[str]:
    last = batch.info.last_offset
    if last < first:
        yield f"last offset {last} is below its first offset {first}"
    if previous_last is not None and first <= previous_last:
        yield f"offsets go backwards: it starts at {first}, not after the previous batch's last offset {previous_last}"
    if first < base:
        yield f"offset {first} is below the segment's base offset {base}"
    if last - base > INT32_MAX:
        yield f"offset {last} is more than int32 max past the segment's base offset {base}"
    previous = batch.info.base_offset - 1 if batch.header is not None else None
    for record in records:
        if (previous is not None and record.offset <= previous) or record.offset > last:
            yield (f"record offset {record.offset} is out of order or outside the batch's offsets "
                   f"{batch.info.base_offset}..{last}")
            break
        previous = record.offset
    header = batch.header
    if header is not None and header.is_control and header.records_count > 1:
        yield f"a control batch must hold one record, this one declares {header.records_count}"


def check_offset_index(index: IndexContents[OffsetEntry], segment: SegmentMap) -> list[Finding]:
    """Entries strictly increase and each points at the start of the batch whose last offset it names."""
    path = str(index.path)
    findings = _index_shape_findings(index)
    previous: int | None = None
    for entry in index.live_entries:
        def problem(message: str, entry: OffsetEntry = entry) -> None:
            findings.append(Finding("error", path, message, entry.number * index.entry_size, entry.number))

        if previous is not None and entry.offset <= previous:
            problem(f"offset {entry.offset} is not above the previous entry's offset {previous}")
        previous = entry.offset
        span = segment.at_position(entry.position)
        if span is None:
            inside = segment.containing_position(entry.position)
            if inside is not None:
                problem(f"offset {entry.offset} -> position {entry.position}, which is inside the batch at "
                        f"position {inside.position} (offsets {inside.first_offset}..{inside.last_offset}), "
                        "not at a batch start")
            else:
                problem(f"offset {entry.offset} -> position {entry.position}, past the last whole batch "
                        f"(the batches end at byte {segment.end})")
        elif span.last_offset != entry.offset:
            problem(f"offset {entry.offset} -> position {entry.position}, but the batch there ends at offset "
                    f"{span.last_offset}")
    return findings


def check_time_index(index: IndexContents[TimeEntry], segment: SegmentMap) -> list[Finding]:
    """Timestamps and offsets never decrease; each offset is a batch's last offset and each
    timestamp the largest batch timestamp of the segment up to that batch."""
    path = str(index.path)
    findings = _index_shape_findings(index)
    previous: TimeEntry | None = None
    for entry in index.live_entries:
        def problem(message: str, entry: TimeEntry = entry, severity: Severity = "error") -> None:
            findings.append(Finding(severity, path, message, entry.number * index.entry_size, entry.number))

        if previous is not None and entry.timestamp < previous.timestamp:
            problem(f"timestamp {entry.timestamp} is below the previous entry's {previous.timestamp}")
        if previous is not None and entry.offset < previous.offset:
            problem(f"offset {entry.offset} is below the previous entry's {previous.offset}")
        previous = entry
        if entry.timestamp == NO_TIMESTAMP:
            # Kafka never indexes "no timestamp"; such an entry misleads no lookup.
            problem(f"entry without a timestamp ({NO_TIMESTAMP}) for offset {entry.offset}; Kafka never writes one",
                    severity="warning")
            continue
        at = segment.index_ending_at(entry.offset)
        if at is None:
            inside = segment.containing_offset(entry.offset)
            where = (f"it is inside the batch at position {inside.position} (offsets "
                     f"{inside.first_offset}..{inside.last_offset})" if inside is not None
                     else "no batch of the log holds it")
            problem(f"offset {entry.offset} is not the last offset of a batch: {where}")
            continue
        expected = segment.running_max_timestamp(at)
        if entry.timestamp != expected:
            problem(f"timestamp {entry.timestamp} for offset {entry.offset}, but the largest batch timestamp up to "
                    f"that batch is {expected}")
    return findings


def _index_shape_findings(index: IndexContents[E]) -> list[Finding]:
    path = str(index.path)
    findings = []
    if index.partial_bytes:
        findings.append(Finding(
            "error", path,
            f"length {index.file_length} is not a multiple of the entry size {index.entry_size}",
            index.file_length - index.partial_bytes))
    if index.garbage_at is not None:
        findings.append(Finding(
            "error", path,
            f"non-zero bytes after the end of the entries (entry {index.stopped_at} has relative offset 0, "
            "which ends an index)", index.garbage_at * index.entry_size, index.garbage_at))
    return findings


def check_txn_index(path: Path, base_offset: int) -> list[Finding]:
    """Kafka's sanity rule (no last offset below the base) plus whole entries and increasing last offsets."""
    entries, partial = read_txn_index(path)
    findings = []
    if partial:
        findings.append(Finding("error", str(path), f"{partial} trailing bytes are not a whole entry of "
                                f"{ABORTED_TXN_ENTRY.size} bytes", len(entries) * ABORTED_TXN_ENTRY.size))
    previous: int | None = None
    for txn in entries:
        where = txn.number * ABORTED_TXN_ENTRY.size
        if txn.last_offset < base_offset:
            findings.append(Finding("error", str(path), f"last offset {txn.last_offset} is below the segment's base "
                                    f"offset {base_offset}", where, txn.number))
        if previous is not None and txn.last_offset <= previous:
            findings.append(Finding("error", str(path), f"last offset {txn.last_offset} is not above the previous "
                                    f"entry's {previous}", where, txn.number))
        previous = txn.last_offset
    return findings
