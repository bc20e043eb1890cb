"""Format-agnostic batch boundaries: what storage needs without decoding records.

Segments, indexes, recovery and retention walk a log file batch by batch and
need only each batch's position, size, offsets and max timestamp, whatever its
magic.  This mirrors ``FileLogInputStream.nextBatch``: read the 17 bytes up to
the magic, reject a size below the v0 minimum, and treat an entry running past
the end of the buffer as a partial tail ("no more batches"), not an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from stratalog.common.errors import CorruptRecordError
from stratalog.records import native
from stratalog.records.batch_header import LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH, NO_TIMESTAMP, RECORDS_COUNT_OFFSET
from stratalog.records.legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, legacy_records, parse_legacy_entry
from stratalog.records.reader import decode_records
from stratalog.records.record import Record
from stratalog.records.varint import Buffer

HEADER_SIZE_UP_TO_MAGIC = LOG_OVERHEAD + 5  # offset, size, v2 leader epoch / v0-v1 crc, magic

_OFFSET_SIZE_TO_MAGIC = struct.Struct(">qi4xb")
# The bytes peek_batch reads of each format: v2 up to its record count, v1 up to its timestamp.
_HEADER_SIZES = {2: RECORDS_COUNT_OFFSET + 4, 1: 26, 0: HEADER_SIZE_UP_TO_MAGIC + 1}
_V2_TAIL = struct.Struct(">6xi8xq")  # from byte 17: crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~3x to build, and these are built per batch/record
class BatchInfo:
    """Where a batch is and what it covers.

    For v0/v1 entries base_offset = last_offset = the entry's offset field (a
    compressed wrapper carries its last inner offset), max_timestamp is the v1
    timestamp (-1 for v0) and records_count is None, as Kafka's ``countOrNull``.
    """

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    records_count: int | None

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def peek_batch(buf: Buffer, pos: int, *, source: str | None = None, at: int | None = None,
               header_only: bool = False) -> BatchInfo | None:
    """Read the batch at ``pos`` from its header only.

    Returns None for a partial tail: at most 17 bytes left (Kafka's
    ``position >= end - HEADER_SIZE_UP_TO_MAGIC``) or fewer bytes than the entry
    declares - the caller may read more; with ``header_only``, fewer than its header's (61 bytes
    for v2): the caller then checks the declared size against its end.  ``at`` is the position to report (a
    file reader's buffer starts mid-file); default ``pos``.  Raises CorruptRecordError for a size
    field below 14, a magic other than 0/1/2, a v1 entry too short for its
    timestamp or a v2 batchLength below 49.
    """
    if len(buf) - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    offset, size, magic = _OFFSET_SIZE_TO_MAGIC.unpack_from(buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            pos + 8,
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            source=source,
        )
    total = LOG_OVERHEAD + size
    if total > len(buf) - pos and not (header_only and len(buf) - pos >= _HEADER_SIZES.get(magic, 0)):
        return None
    if magic == 2:
        if size < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                pos + 8,
                f"Record batch is corrupt (the size {total} is smaller than the minimum allowed overhead "
                f"{LOG_OVERHEAD + MIN_BATCH_LENGTH})",
                source=source,
            )
        last_delta, max_ts = _V2_TAIL.unpack_from(buf, pos + MAGIC_OFFSET + 1)
        (count,) = _INT32.unpack_from(buf, pos + RECORDS_COUNT_OFFSET)
        return BatchInfo(pos if at is None else at, total, 2, offset, offset + last_delta, max_ts, count)
    if magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(
                pos + 8,
                f"Found record size {size} smaller than minimum v1 record overhead ({RECORD_OVERHEAD_V1})",
                source=source,
            )
        (timestamp,) = _INT64.unpack_from(buf, pos + 18)
        return BatchInfo(pos if at is None else at, total, 1, offset, offset, timestamp, None)
    if magic == 0:
        return BatchInfo(pos if at is None else at, total, 0, offset, offset, NO_TIMESTAMP, None)
    raise CorruptRecordError(pos + MAGIC_OFFSET, f"unknown magic {magic}", source=source)


def iter_batch_infos(buf: Buffer, *, start: int = 0, source: str | None = None) -> Iterator[BatchInfo]:
    """Every batch from ``start`` on; stops silently at a partial tail."""
    pos = start
    while (info := peek_batch(buf, pos, source=source)) is not None:
        yield info
        pos += info.size


def split_batches(data: bytes) -> Iterator[tuple[BatchInfo, bytes]]:
    """The whole batches of an in-memory buffer (a fetch's answer, a batch file), each with its bytes."""
    for info in iter_batch_infos(data):
        yield info, data[info.position : info.position + info.size]


class WholeBatches(NamedTuple):
    """The whole batches at the start of a read, as a consumer keeps them of a fetch (``whole_batches``)."""

    size: int               # the bytes they span, from the start
    batches: int
    records: int | None     # None when a v0/v1 entry is among them (their count is not in the header)
    last_offset: int        # -1 for none


def whole_batches(buf: Buffer) -> WholeBatches:
    """The whole batches at the start of ``buf``: a fetch may end inside a batch, and a consumer
    keeps what comes before it. Only headers are read (``iter_batch_infos``); the native kernel
    walks v2 batches without a Python object per batch. Raises CorruptRecordError as ``peek_batch``."""
    kernel = native.kernel
    if kernel is not None:
        walked = kernel.whole_batches(buf)
        if walked is not None:
            return WholeBatches(*walked)
    size = batches = 0
    records: int | None = 0
    last_offset = -1
    for info in iter_batch_infos(buf):
        size, last_offset = info.position + info.size, info.last_offset
        batches += 1
        records = None if records is None or info.records_count is None else records + info.records_count
    return WholeBatches(size, batches, records, last_offset)


def decode_any(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True, source: str | None = None
) -> tuple[BatchInfo, list[Record]]:
    """The batch at ``pos`` and its records, whatever its magic (v0/v1 deep-iterated)."""
    info = peek_batch(buf, pos, source=source)
    if info is None:
        raise CorruptRecordError(pos, f"incomplete batch: only {max(len(buf) - pos, 0)} bytes left", source=source)
    if info.magic == 2:
        return info, decode_records(buf, pos, verify_crc=verify_crc, source=source)
    entry = parse_legacy_entry(buf, pos, verify_crc=verify_crc, source=source)
    return info, legacy_records(entry, verify_crc=verify_crc, source=source)


@dataclass(slots=True)
class RecoveryScan:
    """A segment file scanned as recovery scans it: the valid prefix and what indexes it."""

    valid_bytes: int
    max_timestamp: int
    offset_of_max_timestamp: int
    index_points: list[tuple[int, int, int, int]]   # (last offset, position, max timestamp, its offset)
    new_epochs: list[tuple[int, int]]                # (leader epoch, start offset), in order


def scan_natively(buf: Buffer, base_offset: int, index_interval_bytes: int,
                  latest_epoch: int | None) -> RecoveryScan | None:
    """Recovery's walk over a whole segment buffer in the native kernel (see ``native/src/scan.rs``):
    None without the kernel, or for a file with v0/v1 entries (the Python walk handles those)."""
    kernel = native.kernel
    if kernel is None:
        return None
    scanned = kernel.scan_log(buf, base_offset, index_interval_bytes, latest_epoch)
    return None if scanned is None else RecoveryScan(*scanned)


# (base offset, last offset, max timestamp, size, leader epoch, producer id, attributes)
FollowerBatch = tuple[int, int, int, int, int, int, int]


def follower_batches_natively(buf: Buffer) -> list[FollowerBatch] | None:
    """A follower's fetched batches checked in the native kernel (``follower_batches`` in
    ``native/src/lib.rs``): each one's facts when ``buf`` is exactly whole v2 batches whose CRCs
    match; None without the kernel or for anything else (``iter_batch_infos`` and ``validate_batch``
    then walk it, and name what is wrong)."""
    kernel = native.kernel
    if kernel is None:
        return None
    found: list[FollowerBatch] | None = kernel.follower_batches(buf)
    return found


ProducerBatches = tuple[list[int], int, int, int]   # (positions, bytes consumed, batches walked, why it stopped)


def producer_batches_natively(buf: Buffer, position: int, limit: int, start: int, end: int | None
                              ) -> ProducerBatches | None:
    """The batches of ``buf`` from ``position`` that a producer wrote, in the native kernel (see
    ``native/src/producers.rs``); None without the kernel (walk ``FileRecords.batch_headers``)."""
    kernel = native.kernel
    if kernel is None:
        return None
    found: ProducerBatches = kernel.producer_batches(buf, position, limit, start, end)
    return found
