"""Segment files exactly as they are on disk, for the tools that inspect them.

``dump-log`` and ``verify`` must see a segment as it is - never through the
loader, whose recovery would truncate a torn tail or rebuild an index, which is
exactly what they are meant to report - and they must agree on what they see.
So this module reads files read-only (a ``.log`` through a read-only mmap; the
engine's ``FileRecords`` opens files for writing), walks batches with the
engine's own decoders (``stratalog.records``), reads index entries raw instead of
through ``stratalog.storage.index`` (which silently drops everything after the first
non-increasing entry), and checks indexes against the log. It returns data and
findings and never prints or writes.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Literal, TypeVar

from crc32c import crc32c

from stratalog.common.errors import CorruptRecordError
from stratalog.storage.index import OffsetIndex, TimeIndex
from stratalog.common.names import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from stratalog.records import (
    LOG_OVERHEAD,
    BatchHeader,
    BatchInfo,
    Compression,
    ControlRecordType,
    LegacyEntry,
    Record,
    TimestampType,
    compute_crc,
    decode_any,
    decompress,
    parse_control_key,
    parse_end_txn_marker,
    parse_header,
    parse_legacy_entry,
    peek_batch,
)
from stratalog.records.batch import increment_sequence
from stratalog.records.varint import Buffer
from stratalog.common.limits import INT32_MAX

NO_TIMESTAMP = -1

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: which file, where in it (byte position and/or index entry), what is wrong."""

    severity: Severity
    path: str
    message: str
    position: int | None = None
    entry: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"severity": self.severity, "file": self.path, "position": self.position, "entry": self.entry,
                "message": self.message}


@contextmanager
def mapped(path: Path, limit: int | None = None) -> Iterator[Buffer]:
    """The file's bytes (at most ``limit``), mapped read-only so huge segments cost no copy."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if limit is not None:
            size = min(size, max(limit, 0))
        if size == 0:
            yield b""  # mmap cannot map an empty file
            return
        region = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(region)[:size]
        try:
            yield view
        finally:
            # Views taken by a caller that is still alive (an exception's
            # traceback) would make close() fail; the mapping then goes with them.
            try:
                view.release()
                region.close()
            except BufferError:
                pass


# -- the .log -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BatchView:
    """A batch found by the walk, with the header fields and CRC verdict the tools print.

    ``header`` is set for v2 batches, ``legacy`` for v0/v1 entries; when the
    header or entry cannot be parsed although its size is known, both are None
    and ``problem`` says why.
    """

    info: BatchInfo
    header: BatchHeader | None
    legacy: LegacyEntry | None
    crc_valid: bool
    problem: CorruptRecordError | None = None

    @property
    def position(self) -> int:
        return self.info.position

    @property
    def size(self) -> int:
        return self.info.size

    @property
    def end(self) -> int:
        return self.info.position + self.info.size

    @property
    def is_control(self) -> bool:
        return self.header is not None and self.header.is_control

    @property
    def timestamp_type(self) -> TimestampType:
        if self.header is not None:
            return self.header.timestamp_type
        if self.legacy is not None:
            return self.legacy.timestamp_type
        return TimestampType.NO_TIMESTAMP

    def describe(self) -> str:
        """``batch of offsets 5..9`` - how findings name a batch."""
        if self.info.base_offset == self.info.last_offset:
            return f"batch of offset {self.info.last_offset}"
        return f"batch of offsets {self.info.base_offset}..{self.info.last_offset}"


class SegmentWalk:
    """The batches of a ``.log`` buffer in file order, as Kafka's ``FileLogInputStream`` finds them.

    Iterating yields every batch whose size field is sane and whose bytes are
    all present, whatever its CRC. Afterwards ``end`` is where the last whole
    batch ends; ``error`` is set when the walk stopped at bytes that cannot be a
    batch header (size below 14, unknown magic). Bytes from ``end`` on that are
    neither are a partial batch: a torn tail, or a ``--max-bytes`` cut.
    """

    def __init__(self, buf: Buffer, source: str) -> None:
        self.buf = buf
        self.source = source
        self.end = 0
        self.error: CorruptRecordError | None = None

    @property
    def trailing_bytes(self) -> int:
        return len(self.buf) - self.end

    def __iter__(self) -> Iterator[BatchView]:
        position = self.end
        while True:
            try:
                info = peek_batch(self.buf, position, source=self.source)
            except CorruptRecordError as error:
                self.error = error
                return
            if info is None:
                return
            yield _view(self.buf, info, self.source)
            position += info.size
            self.end = position


def _view(buf: Buffer, info: BatchInfo, source: str) -> BatchView:
    if info.magic >= 2:
        try:
            header = parse_header(buf, info.position, source=source)
        except CorruptRecordError as error:
            return BatchView(info, None, None, False, error)
        return BatchView(info, header, None, compute_crc(buf, info.position, info.size) == header.crc)
    try:
        entry = parse_legacy_entry(buf, info.position, verify_crc=False, source=source)
    except CorruptRecordError as error:
        return BatchView(info, None, None, False, error)
    return BatchView(info, None, entry, _legacy_crc_valid(buf, entry))


def _legacy_crc_valid(buf: Buffer, entry: LegacyEntry) -> bool:
    try:
        parse_legacy_entry(buf, entry.position, verify_crc=True)
    except CorruptRecordError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class RecordView:
    """A decoded record with what DumpLogSegments prints beside it.

    ``sequence`` is set for v2 records; ``legacy_crc``/``legacy_valid`` for
    v0/v1 messages (each inner message of a compressed wrapper has its own
    CRC); ``control`` for the record of a control batch.
    """

    record: Record
    sequence: int | None = None
    legacy_crc: int | None = None
    legacy_valid: bool | None = None
    control: ControlInfo | None = None


@dataclass(frozen=True, slots=True)
class ControlInfo:
    """The key (and for COMMIT/ABORT the value) of a control record."""

    type: ControlRecordType
    type_id: int
    coordinator_epoch: int | None


def batch_records(buf: Buffer, batch: BatchView, source: str, *, verify_crc: bool = False) -> list[RecordView]:
    """Decode the batch's records; raises CorruptRecordError naming the byte position.

    Without ``verify_crc`` records are decoded even when the CRC is wrong, as
    Kafka's record iterator does, so that a dump still shows them.
    """
    if batch.problem is not None:
        raise batch.problem
    _, records = decode_any(buf, batch.position, verify_crc=verify_crc, source=source)
    header = batch.header
    if header is not None:
        views = []
        for record in records:
            sequence = header.base_sequence
            if sequence >= 0:
                sequence = increment_sequence(sequence, record.offset - header.base_offset)
            control = _control_info(record, batch.position, source) if header.is_control else None
            views.append(RecordView(record, sequence=sequence, control=control))
        return views
    assert batch.legacy is not None
    if batch.legacy.compression == Compression.NONE:
        return [RecordView(records[0], legacy_crc=batch.legacy.crc, legacy_valid=batch.crc_valid)]
    crcs = _inner_message_crcs(batch.legacy, source)
    return [RecordView(record, legacy_crc=crc, legacy_valid=valid) for record, (crc, valid) in zip(records, crcs)]


def _control_info(record: Record, position: int, source: str) -> ControlInfo:
    control_type = parse_control_key(record.key, position=position, source=source)
    assert record.key is not None  # parse_control_key rejects a null key
    type_id = int.from_bytes(record.key[2:4], "big", signed=True)
    epoch = None
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        epoch = parse_end_txn_marker(record.value, position=position, source=source)
    return ControlInfo(control_type, type_id, epoch)


def _inner_message_crcs(wrapper: LegacyEntry, source: str) -> list[tuple[int, bool]]:
    """(stored CRC, CRC valid) of each inner message of a compressed v0/v1 wrapper.

    ``legacy_records`` decodes the inner messages but keeps only their records;
    the dump also prints each one's own CRC, so the decompressed set is walked
    again with the engine's entry parser (it stops where ``legacy_records`` does).
    """
    assert wrapper.value is not None  # legacy_records rejected a null wrapper value
    data = decompress(wrapper.compression, wrapper.value, position=wrapper.position, magic=wrapper.magic,
                      source=source)
    result = []
    position = 0
    while len(data) - position >= LOG_OVERHEAD:
        inner = parse_legacy_entry(data, position, verify_crc=False)
        result.append((inner.crc, _legacy_crc_valid(data, inner)))
        position += inner.size
    return result


# -- where batches are, for checking indexes against the log ------------------------------

@dataclass(frozen=True, slots=True)
class BatchSpan:
    """A batch's place in its segment: byte range, offsets and max timestamp."""

    position: int
    size: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @property
    def end(self) -> int:
        return self.position + self.size


class SegmentMap:
    """Lookups of the batches of one segment by position and by offset."""

    def __init__(self, spans: Sequence[BatchSpan]) -> None:
        self.spans = list(spans)
        self._positions = [s.position for s in self.spans]
        self._last_offsets = [s.last_offset for s in self.spans]
        self._running_max: list[int] = []
        highest = NO_TIMESTAMP
        for span in self.spans:
            highest = max(highest, span.max_timestamp)
            self._running_max.append(highest)
        # Offsets may go backwards in a damaged log: bisect on them only when they do not.
        self._offsets_sorted = all(a < b for a, b in zip(self._last_offsets, self._last_offsets[1:]))

    @property
    def end(self) -> int:
        return self.spans[-1].end if self.spans else 0

    def at_position(self, position: int) -> BatchSpan | None:
        """The batch starting exactly at ``position``."""
        i = bisect.bisect_left(self._positions, position)
        if i < len(self.spans) and self._positions[i] == position:
            return self.spans[i]
        return None

    def containing_position(self, position: int) -> BatchSpan | None:
        i = bisect.bisect_right(self._positions, position) - 1
        if i >= 0 and position < self.spans[i].end:
            return self.spans[i]
        return None

    def index_ending_at(self, offset: int) -> int | None:
        """Index of the batch whose last offset is ``offset``."""
        if self._offsets_sorted:
            i = bisect.bisect_left(self._last_offsets, offset)
            return i if i < len(self.spans) and self._last_offsets[i] == offset else None
        return next((i for i, last in enumerate(self._last_offsets) if last == offset), None)

    def first_ending_at_or_after(self, offset: int) -> BatchSpan | None:
        """Kafka's ``batches.find(_.lastOffset >= offset)``."""
        if self._offsets_sorted:
            i = bisect.bisect_left(self._last_offsets, offset)
            return self.spans[i] if i < len(self.spans) else None
        return next((s for s in self.spans if s.last_offset >= offset), None)

    def containing_offset(self, offset: int) -> BatchSpan | None:
        span = self.first_ending_at_or_after(offset)
        return span if span is not None and span.first_offset <= offset else None

    def running_max_timestamp(self, index: int) -> int:
        """The largest batch max timestamp among batches 0..index."""
        return self._running_max[index]


# -- index files ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OffsetEntry:
    number: int
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimeEntry:
    number: int
    timestamp: int
    offset: int


E = TypeVar("E", OffsetEntry, TimeEntry)


@dataclass(frozen=True, slots=True)
class IndexContents(Generic[E]):
    """An index file's entries as Kafka's tools read them.

    Kafka takes the entry count from the file length; an index that was never
    trimmed (a crash) has a zero tail, so - as DumpLogSegments does - reading
    stops at the first entry after entry 0 whose offset is the base offset.
    ``stopped_at`` is that entry's number; ``garbage_at`` the first slot from
    there on holding a non-zero byte (a real zero tail has none). ``first_slot``
    and ``last_slot`` are the file's first and last whole entries, zero tail or
    not: what Kafka's load-time sanity check looks at.
    """

    path: Path
    base_offset: int
    file_length: int
    entry_size: int
    entries: tuple[E, ...]
    stopped_at: int | None
    garbage_at: int | None
    first_slot: E | None
    last_slot: E | None
    zero_head: bool

    @property
    def live_entries(self) -> tuple[E, ...]:
        """The entries the engine wrote: none in a file of nothing but zeros (preallocated, never
        written, never trimmed - a crash), whose all-zero entry 0 Kafka's tools still read."""
        if self.zero_head and self.stopped_at == 1 and self.garbage_at is None:
            return ()
        return self.entries

    @property
    def slots(self) -> int:
        """Kafka's entry count: whole entries in the file."""
        return self.file_length // self.entry_size

    @property
    def partial_bytes(self) -> int:
        return self.file_length % self.entry_size


def read_offset_index(path: Path, base_offset: int) -> IndexContents[OffsetEntry]:
    def entry(number: int, relative: int, position: int) -> OffsetEntry:
        return OffsetEntry(number, base_offset + relative, position)

    return _read_index(path, base_offset, OffsetIndex.entry, 0, entry)


def read_time_index(path: Path, base_offset: int) -> IndexContents[TimeEntry]:
    def entry(number: int, timestamp: int, relative: int) -> TimeEntry:
        return TimeEntry(number, timestamp, base_offset + relative)

    return _read_index(path, base_offset, TimeIndex.entry, 1, entry)


def _read_index(path: Path, base_offset: int, layout: struct.Struct, relative_field: int,
                make: Callable[[int, int, int], E]) -> IndexContents[E]:
    data = path.read_bytes()
    size = layout.size
    slots = len(data) // size
    entries = []
    stopped_at = None
    for number, fields in enumerate(layout.iter_unpack(data[: slots * size])):
        if fields[relative_field] == 0 and number > 0:
            stopped_at = number
            break
        entries.append(make(number, *fields))
    first = make(0, *layout.unpack_from(data, 0)) if slots else None
    last = make(slots - 1, *layout.unpack_from(data, (slots - 1) * size)) if slots else None
    return IndexContents(path, base_offset, len(data), size, tuple(entries), stopped_at,
                         _first_non_zero_slot(data, stopped_at, size), first, last,
                         slots > 1 and not any(data[:size]))


def _first_non_zero_slot(data: bytes, stopped_at: int | None, size: int) -> int | None:
    if stopped_at is None:
        return None
    start = stopped_at * size
    end = len(data) - len(data) % size
    tail = data[start:end].rstrip(b"\0")
    if not tail:
        return None
    first = len(tail) - len(tail.lstrip(b"\0"))
    return stopped_at + first // size


_ABORTED_TXN = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """A ``.txnindex`` entry; ``version_byte`` is the entry's first byte, which is what Kafka's
    ``AbortedTxn.version()`` returns (it reads one byte of the int16 version field)."""

    number: int
    version_byte: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_txn_index(path: Path) -> tuple[list[AbortedTxn], int]:
    """The entries and the count of trailing bytes too few for an entry (Kafka ignores them)."""
    data = path.read_bytes()
    whole = len(data) - len(data) % _ABORTED_TXN.size
    entries = [
        AbortedTxn(number, int.from_bytes(data[number * _ABORTED_TXN.size : number * _ABORTED_TXN.size + 1],
                                          "big", signed=True), pid, first, last, lso)
        for number, (_, pid, first, last, lso) in enumerate(_ABORTED_TXN.iter_unpack(data[:whole]))
    ]
    return entries, len(data) - whole


# -- producer snapshots ---------------------------------------------------------------------

_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc (covers bytes 6..end), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_CRC_START = 6
PRODUCER_SNAPSHOT_VERSION = 1


class CorruptSnapshotError(Exception):
    """A producer snapshot that does not parse; the message is Kafka's ``CorruptSnapshotException``'s."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: none

    @property
    def first_sequence(self) -> int:
        """Kafka's ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta


def read_producer_snapshot(path: Path) -> list[ProducerSnapshotEntry]:
    """Parse a ``.snapshot`` (§2.8); checks, in Kafka's order, the layout, the version, then the CRC."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {len(data)} bytes cannot hold the version, crc and entry count")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    available = (len(data) - _SNAPSHOT_HEAD.size) // _SNAPSHOT_ENTRY.size
    if count < 0 or count > available:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: Error reading field 'producer_entries': "
            f"{count} entries declared, room for {available}")
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[_SNAPSHOT_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}")
    return [ProducerSnapshotEntry(*_SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size))
            for i in range(count)]


# -- checking a segment ---------------------------------------------------------------------

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
                                f"{_ABORTED_TXN.size} bytes", len(entries) * _ABORTED_TXN.size))
    previous: int | None = None
    for txn in entries:
        where = txn.number * _ABORTED_TXN.size
        if txn.last_offset < base_offset:
            findings.append(Finding("error", str(path), f"last offset {txn.last_offset} is below the segment's base "
                                    f"offset {base_offset}", where, txn.number))
        if previous is not None and txn.last_offset <= previous:
            findings.append(Finding("error", str(path), f"last offset {txn.last_offset} is not above the previous "
                                    f"entry's {previous}", where, txn.number))
        previous = txn.last_offset
    return findings
