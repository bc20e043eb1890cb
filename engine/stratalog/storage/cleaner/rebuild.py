"""A cleaned batch's new bytes (Kafka's ``MemoryRecords.filterTo`` rebuild), in Python or natively.

A batch that loses records, or gains a delete horizon, is rebuilt with its codec, producer fields,
base and last offset. ``rebuild_batch`` encodes decoded ``Record``s again; ``filter_natively`` has
the native kernel choose the kept records of an uncompressed data batch and copy their bytes (only
the framing is encoded anew), to the same bytes. ``empty_batch`` is what stays of a batch whose
records are all gone but whose last offset or producer sequence must survive.
"""

from __future__ import annotations

from stratalog.records import (
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    assemble_batch,
    build_batch,
    native_walk,
)
from stratalog.storage.cleaner.offset_map import NativeOffsetMap


def rebuild_batch(header: BatchHeader, kept: list[Record], horizon: int | None) -> bytes:
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        kept,
        base_offset=header.base_offset,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        delete_horizon_ms=horizon,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp if log_append else None,
    )


def empty_batch(header: BatchHeader) -> bytes:
    return build_batch(
        [], base_offset=header.base_offset, timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        is_transactional=header.is_transactional, is_control=header.is_control,
        last_offset_delta=header.last_offset_delta, max_timestamp=header.max_timestamp,
    )


def filter_natively(native_map: NativeOffsetMap, data: bytes, header: BatchHeader, reach: int, now_ms: int,
                    delete_retention_ms: int) -> tuple[int, int, bytes | None] | None:
    """The cleaner's keep rule over an uncompressed data batch in the native kernel, and the batch
    ``rebuild_batch`` would make of it: (records kept, keyless records dropped, the rebuilt batch or
    None when the batch stays as it is). None where the kernel leaves the batch to ``build_batch``
    (records it would refuse)."""
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    answer = native_walk(data, 0, lambda records, begin, end, h: native_map.filter_records(
        records, begin, end, h.records_count, h.base_offset, h.base_timestamp,
        h.max_timestamp if log_append else None, reach, h.delete_horizon_ms, now_ms, delete_retention_ms,
        h.last_offset_delta))
    if answer is None:
        return None
    kept, invalid, rebuilt = answer
    if rebuilt is None:
        return kept, invalid, None
    body, base_timestamp, horizon, last_delta, max_timestamp = rebuilt
    return kept, invalid, assemble_batch(
        body, kept, base_timestamp, last_delta, max_timestamp, base_offset=header.base_offset,
        compression=Compression.NONE, compression_level=None, timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        is_transactional=header.is_transactional, is_control=False, has_delete_horizon=horizon is not None,
        last_offset_delta=header.last_offset_delta, max_timestamp=header.max_timestamp if log_append else None)
