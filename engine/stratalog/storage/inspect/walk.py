"""A segment's ``.log`` as it is on disk: batches and records walked read-only, where each batch is.

``dump-log`` and ``verify`` must see a segment as it is - never through the loader, whose
recovery would truncate a torn tail, which is exactly what they are meant to report - and they
must agree on what they see. The file is read through a read-only mmap (the engine's
``FileRecords`` opens files for writing) and walked with the engine's own decoders.
"""

from __future__ import annotations

import bisect
import mmap
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.errors import CorruptRecordError
from stratalog.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
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
