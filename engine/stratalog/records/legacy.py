"""Reading the legacy message formats v0 and v1 (never written: KIP-724).

Logs created before Kafka 0.11 hold v0/v1 "messages": each log entry is
``offset int64, size int32`` then a message with a CRC-32 (IEEE, not
Castagnoli) over magic..end.  A compressed message is a *wrapper* whose value
is a compressed set of inner messages; its offset is that of the last inner
message.  Rules follow ``LegacyRecord.java`` and ``AbstractLegacyRecordBatch``'s
deep iterator.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from stratalog.common.errors import CorruptRecordError
from stratalog.records.batch_header import LOG_OVERHEAD, TimestampType
from stratalog.records.compression import Compression, decompress
from stratalog.records.record import Record
from stratalog.records.varint import Buffer

RECORD_OVERHEAD_V0 = 14  # crc + magic + attributes + key length + value length
RECORD_OVERHEAD_V1 = 22  # v0 + int64 timestamp

_ENTRY_HEAD = struct.Struct(">qiIbB")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_CRC_START = LOG_OVERHEAD + 4  # the CRC covers magic..end
_TIMESTAMP_TYPE_BIT = 0x08
_COMPRESSION_MASK = 0x07


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """One v0/v1 log entry; ``size`` counts all its bytes (12-byte log overhead included)."""

    position: int
    size: int
    offset: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME


def parse_legacy_entry(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True, source: str | None = None
) -> LegacyEntry:
    """Parse the v0/v1 entry at ``pos``; any damage raises CorruptRecordError with its position."""
    available = len(buf) - pos
    if pos < 0 or available < LOG_OVERHEAD:
        raise CorruptRecordError(
            pos, f"legacy entry header needs {LOG_OVERHEAD} bytes, {max(available, 0)} remain", source=source
        )
    offset, size = struct.unpack_from(">qi", buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            pos + 8,
            f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
            source=source,
        )
    total = LOG_OVERHEAD + size
    if total > available:
        raise CorruptRecordError(
            pos, f"entry of {total} bytes is truncated: only {available} bytes present", source=source
        )
    _, _, crc, magic, attributes = _ENTRY_HEAD.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(pos + 16, f"magic {magic} is not a legacy format (0 or 1)", source=source)
    end = pos + total
    if verify_crc:
        computed = zlib.crc32(memoryview(buf)[pos + _CRC_START : end])
        if computed != crc:
            raise CorruptRecordError(
                pos,
                f"Record is corrupt (stored crc = 0x{crc:08x}, computed crc = 0x{computed:08x}) in entry at {pos}",
                source=source,
            )
    codec = attributes & _COMPRESSION_MASK
    if codec > Compression.LZ4:  # zstd needs magic 2
        raise CorruptRecordError(
            pos + 17, f"compression codec id {codec} is not valid for magic {magic}", source=source
        )
    p = pos + 18
    if magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(
                pos + 8,
                f"Found record size {size} smaller than minimum v1 record overhead ({RECORD_OVERHEAD_V1})",
                source=source,
            )
        (timestamp,) = _INT64.unpack_from(buf, p)
        p += 8
    else:
        timestamp = -1
    key, p = _sized_bytes(buf, p, end, "key", source)
    value, p = _sized_bytes(buf, p, end, "value", source)
    # Bytes left after the value are ignored, as LegacyRecord does.
    return LegacyEntry(pos, total, offset, crc, magic, attributes, timestamp, key, value)


def legacy_records(entry: LegacyEntry, *, verify_crc: bool = True, source: str | None = None) -> list[Record]:
    """The records of an entry: itself if uncompressed, else its inner messages (deep iteration).

    v0 inner offsets are absolute; v1 inner offsets are relative (0..n-1) and
    become ``wrapper offset - last inner offset + inner offset`` (a wrapper
    offset of 0, sent by some librdkafka versions, means "already absolute").
    Inner v1 timestamps are the wrapper's when it is LogAppendTime.
    """
    if entry.compression == Compression.NONE:
        return [Record(entry.offset, entry.timestamp, entry.key, entry.value)]
    where = entry.position
    if entry.value is None:
        raise CorruptRecordError(
            where, f"Found invalid compressed record set with null value (magic = {entry.magic})", source=source
        )
    data = decompress(entry.compression, entry.value, position=where, magic=entry.magic, source=source)
    inner: list[LegacyEntry] = []
    p = 0
    # Kafka's DataLogInputStream stops quietly when fewer than 12 bytes remain.
    while len(data) - p >= LOG_OVERHEAD:
        try:
            e = parse_legacy_entry(data, p, verify_crc=verify_crc)
        except CorruptRecordError as err:
            raise CorruptRecordError(
                where,
                f"{err.reason} (at offset {err.position} in decompressed messages of entry at {where})",
                source=source,
            ) from None
        if e.compression != Compression.NONE:
            raise CorruptRecordError(
                where,
                f"Inner messages must not be compressed (inner offset {e.offset} of entry at {where})",
                source=source,
            )
        inner.append(e)
        p += e.size
    if not inner:
        raise CorruptRecordError(where, "Found invalid compressed record set with no inner records", source=source)

    if entry.magic == 1:
        if entry.offset == 0:
            base = 0
        else:
            last_inner = inner[-1].offset
            if entry.offset < last_inner:
                raise CorruptRecordError(
                    where,
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{entry.offset}' "
                    f"is less than the last inner message offset '{last_inner}' and it is not zero.",
                    source=source,
                )
            base = entry.offset - last_inner
    else:
        base = 0
    append_time = entry.timestamp if entry.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    return [
        Record(
            base + e.offset,
            append_time if append_time is not None and e.magic == 1 else e.timestamp,
            e.key,
            e.value,
        )
        for e in inner
    ]


def _sized_bytes(buf: Buffer, p: int, end: int, what: str, source: str | None) -> tuple[bytes | None, int]:
    """An int32-length-prefixed field; a negative length means null (``Utils.sizeDelimited``)."""
    if p + 4 > end:
        raise CorruptRecordError(p, f"{what} length runs past the end of its entry", source=source)
    (size,) = _INT32.unpack_from(buf, p)
    p += 4
    if size < 0:
        return None, p
    if p + size > end:
        raise CorruptRecordError(
            p - 4, f"{what} of {size} bytes overruns its entry by {p + size - end} bytes", source=source
        )
    return bytes(buf[p : p + size]), p + size
