"""Writing v2 record batches, byte-compatible with Kafka's ``MemoryRecordsBuilder``.

stratalog only ever writes magic 2 (KIP-724: Kafka 4 never writes v0/v1).  The
builder takes records with absolute offsets so the cleaner can rebuild a batch
with offset gaps while keeping the original lastOffsetDelta, and it can stamp a
KIP-534 delete horizon into baseTimestamp.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from stratalog.common.limits import INT32_MAX
from stratalog.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    V2_HEADER_SIZE,
    TimestampType,
    attributes_for,
)
from stratalog.records.compression import Compression, compress
from stratalog.records.record import Header, Record
from stratalog.records.varint import encode_varint

_NULL = b"\x01"  # varint -1: null key, value or header value
_ATTRIBUTES = b"\x00"  # record attributes: unused by every Kafka version
_NO_HEADERS = b"\x00"  # header count 0


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch.

    * offset delta of each record = ``record.offset - base_offset`` (offsets must
      strictly increase, starting at or after ``base_offset``);
    * baseTimestamp = the first record's timestamp (as MemoryRecordsBuilder), or
      the delete horizon when ``delete_horizon_ms`` is given (attribute bit 6,
      timestamp deltas re-based on it);
    * lastOffsetDelta defaults to the last record's delta; a larger value keeps
      the original last offset of a compacted batch;
    * maxTimestamp defaults to the largest record timestamp (pass the append
      time for LOG_APPEND_TIME).

    An empty batch (compaction keeps those for producer state) needs explicit
    ``last_offset_delta`` and ``max_timestamp``; like Kafka's ``writeEmptyHeader``
    it has baseTimestamp -1 and is written uncompressed.  Invalid arguments
    raise ValueError.
    """
    if records:
        base_timestamp = records[0].timestamp
    else:
        if last_offset_delta is None or max_timestamp is None:
            raise ValueError("an empty batch needs explicit last_offset_delta and max_timestamp")
        base_timestamp = NO_TIMESTAMP
        compression = Compression.NONE
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms

    body, records_last_delta, records_max_ts = _encode_records(records, base_offset, base_timestamp)
    return assemble_batch(body, len(records), base_timestamp, records_last_delta, records_max_ts,
                          base_offset=base_offset, compression=compression, compression_level=compression_level,
                          timestamp_type=timestamp_type, partition_leader_epoch=partition_leader_epoch,
                          producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                          is_transactional=is_transactional, is_control=is_control,
                          has_delete_horizon=delete_horizon_ms is not None, last_offset_delta=last_offset_delta,
                          max_timestamp=max_timestamp)


def assemble_batch(
    body: bytes,
    count: int,
    base_timestamp: int,
    records_last_delta: int,
    records_max_ts: int,
    *,
    base_offset: int,
    compression: Compression,
    compression_level: int | None,
    timestamp_type: TimestampType,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
    last_offset_delta: int | None,
    max_timestamp: int | None,
) -> bytes:
    """A v2 batch around ``count`` records already encoded (``body``, relative to ``base_timestamp``
    and ``base_offset``, whose last offset delta and max timestamp are given): ``build_batch``'s
    second half, shared with the native kernel's rebuild of a cleaned batch."""
    if last_offset_delta is None:
        last_offset_delta = records_last_delta
    elif not max(records_last_delta, 0) <= last_offset_delta <= INT32_MAX:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} must be in [{max(records_last_delta, 0)}, {INT32_MAX}] "
            "for these records"
        )
    if max_timestamp is None:
        max_timestamp = records_max_ts

    payload = compress(compression, body, compression_level) if compression != Compression.NONE else body
    attributes = attributes_for(
        compression,
        timestamp_type,
        is_transactional=is_transactional,
        is_control=is_control,
        has_delete_horizon=has_delete_horizon,
    )
    out = bytearray(V2_HEADER_SIZE)
    try:
        HEADER_STRUCT.pack_into(
            out,
            0,
            base_offset,
            V2_HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            2,
            0,  # CRC, filled in once the covered bytes are final
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    except struct.error as e:  # a field outside its int width
        raise ValueError(f"batch header field out of range: {e}") from e
    out += payload
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(out)


def _encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> tuple[bytes, int, int]:
    """Encode the record section; return it with the last offset delta and max timestamp."""
    parts: list[bytes] = []
    add = parts.append
    enc = encode_varint
    previous = base_offset - 1
    max_ts = NO_TIMESTAMP
    for r in records:
        if r.offset <= previous:
            raise ValueError(f"record offset {r.offset} does not follow {previous} (base offset {base_offset})")
        previous = r.offset
        delta = r.offset - base_offset
        if delta > INT32_MAX:
            raise ValueError(f"record offset {r.offset} is more than int32 max past base offset {base_offset}")
        if r.timestamp > max_ts:
            max_ts = r.timestamp
        key = r.key
        value = r.value
        body = b"".join(
            (
                _ATTRIBUTES,
                enc(r.timestamp - base_timestamp),
                enc(delta),
                _NULL if key is None else enc(len(key)),
                b"" if key is None else key,
                _NULL if value is None else enc(len(value)),
                b"" if value is None else value,
                _encode_headers(r.headers) if r.headers else _NO_HEADERS,
            )
        )
        add(enc(len(body)))
        add(body)
    return b"".join(parts), previous - base_offset, max_ts


def _encode_headers(headers: tuple[Header, ...]) -> bytes:
    parts = [encode_varint(len(headers))]
    for h in headers:
        key = h.key.encode("utf-8")
        parts.append(encode_varint(len(key)))
        parts.append(key)
        if h.value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(h.value)))
            parts.append(h.value)
    return b"".join(parts)
