"""The 61-byte header of a v2 record batch: parsing, CRC, and in-place edits.

Storage mostly needs only this header (offsets, timestamps, producer fields,
CRC) and never the records, so it is parsed on its own.  Layout and attribute
bits follow ``DefaultRecordBatch.java``; the broker rewrites baseOffset and
partitionLeaderEpoch in place because they sit outside the CRC, and rewrites
maxTimestamp/timestamp type with a CRC recomputation.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

from stratalog.common.errors import CorruptRecordError
from stratalog.records.compression import Compression
from stratalog.records.varint import Buffer
from stratalog.common.limits import INT32_MAX

LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32, common to every format
V2_HEADER_SIZE = 61  # RECORD_BATCH_OVERHEAD
MAGIC_OFFSET = 16
CRC_OFFSET = 17
RECORDS_COUNT_OFFSET = 57
ATTRIBUTES_OFFSET = 21  # the CRC covers [21, end)
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
MIN_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD  # 49

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


COMPRESSION_MASK = 0x07
_COMPRESSIONS = {codec.value: codec for codec in Compression}   # Compression(n) costs an append 1 µs
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40
# Kafka's computeAttributes only ever produces bits 0-6; rewriting the
# attributes (setMaxTimestamp) therefore clears the unused bits 7-15.
_KNOWN_BITS_EXCEPT_TIMESTAMP_TYPE = 0x77

# attributes read unsigned: only bits 0-6 mean anything, and a stray bit 15
# should not turn the word negative.
HEADER_STRUCT = struct.Struct(">qiibIHiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class TimestampType(IntEnum):
    """Meaning of a batch's timestamps (attribute bit 3; v0 has none)."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """Kafka's display name, as printed by DumpLogSegments."""
        return _TIMESTAMP_TYPE_NAMES[self]


_TIMESTAMP_TYPE_NAMES = {
    TimestampType.NO_TIMESTAMP: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~3x to build, and these are built per batch/record
class BatchHeader:
    """The fixed fields of a v2 batch, in on-disk order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        code = self.attributes & COMPRESSION_MASK
        # (Compression.NONE is falsy: no ``or``.) An unknown code raises as before.
        return _COMPRESSIONS[code] if code in _COMPRESSIONS else Compression(code)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: with bit 6 set, baseTimestamp holds the delete horizon."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past int32 max to 0 (``incrementSequence``)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap to 0 after int32 max."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def attributes_for(
    compression: Compression,
    timestamp_type: TimestampType,
    *,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    """Kafka's ``computeAttributes``: the attribute word for these properties."""
    if timestamp_type == TimestampType.NO_TIMESTAMP:
        raise ValueError("v2 batches need a timestamp type (CREATE_TIME or LOG_APPEND_TIME)")
    attrs = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attrs |= TRANSACTIONAL_BIT
    if is_control:
        attrs |= CONTROL_BIT
    if has_delete_horizon:
        attrs |= _DELETE_HORIZON_BIT
    return attrs


def parse_header(buf: Buffer, pos: int = 0, *, source: str | None = None) -> BatchHeader:
    """Parse the v2 header at ``pos`` without looking at the records or the CRC.

    Raises CorruptRecordError (naming the byte position) when fewer than 61
    bytes remain, the magic is not 2, batchLength is below 49 or the codec id
    is unknown.
    """
    available = len(buf) - pos
    if pos < 0 or available < V2_HEADER_SIZE:
        raise CorruptRecordError(
            pos, f"batch header needs {V2_HEADER_SIZE} bytes but only {max(available, 0)} remain", source=source
        )
    fields = HEADER_STRUCT.unpack_from(buf, pos)
    header = BatchHeader(*fields)
    if header.magic != 2:
        raise CorruptRecordError(pos + MAGIC_OFFSET, f"magic {header.magic} is not 2", source=source)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            pos + 8,
            f"Record batch is corrupt (the size {header.size} is smaller than the minimum "
            f"allowed overhead {V2_HEADER_SIZE})",
            source=source,
        )
    codec = header.attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise CorruptRecordError(pos + ATTRIBUTES_OFFSET, f"unknown compression codec id {codec}", source=source)
    return header


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of a batch's bytes [pos+21, pos+size), as stored at pos+17."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batch(buf: Buffer, pos: int = 0, *, source: str | None = None) -> BatchHeader:
    """Parse the header and check the whole batch is present and its CRC matches."""
    header = parse_header(buf, pos, source=source)
    require_complete(buf, pos, header, source=source)
    computed = compute_crc(buf, pos, header.size)
    if computed != header.crc:
        # Reported at the batch start: that is where a reader must stop trusting the log.
        raise CorruptRecordError(
            pos,
            f"Record is corrupt (stored crc = 0x{header.crc:08x}, computed crc = 0x{computed:08x}) "
            f"in batch at {pos}",
            source=source,
        )
    return header


def require_complete(buf: Buffer, pos: int, header: BatchHeader, *, source: str | None = None) -> None:
    """Raise CorruptRecordError unless all ``header.size`` bytes of the batch are in ``buf``."""
    available = len(buf) - pos
    if available < header.size:
        raise CorruptRecordError(
            pos, f"batch of {header.size} bytes is truncated: only {available} bytes present", source=source
        )


def set_offsets_in_place(
    buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int
) -> None:
    """Stamp baseOffset and partitionLeaderEpoch (bytes 0-8 and 12-16); both are outside the CRC."""
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_max_timestamp_in_place(
    buf: bytearray | memoryview, pos: int, timestamp_type: TimestampType, max_timestamp: int
) -> None:
    """Kafka's ``setMaxTimestamp``: set the timestamp type bit and maxTimestamp, then the CRC.

    Left untouched (no CRC work) when both already have the requested values.
    """
    if timestamp_type == TimestampType.NO_TIMESTAMP:
        raise ValueError("v2 batches need a timestamp type (CREATE_TIME or LOG_APPEND_TIME)")
    header = parse_header(buf, pos)
    require_complete(buf, pos, header)
    if header.timestamp_type == timestamp_type and header.max_timestamp == max_timestamp:
        return
    attrs = header.attributes & _KNOWN_BITS_EXCEPT_TIMESTAMP_TYPE
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_BIT
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.size))
