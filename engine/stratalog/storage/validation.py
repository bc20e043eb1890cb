"""Validation of a producer's batch before the log assigns it offsets.

Kafka's ``analyzeAndValidateRecords`` + ``LogValidator`` for a leader append,
as a pure function: bytes and the topic config in, a validated copy of the batch
(or a named error) out. It never touches the log, so a refused batch changes
nothing on disk.

Records are walked only as far as the rules need (``summarize_records``: keys
present, timestamps, offset deltas); the batch is rebuilt only when the topic's
``compression.type`` names a codec other than the producer's.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratalog.common.config import LogConfig
from stratalog.common.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    RecordTooLargeError,
)
from stratalog.common.names import TopicPartition
from stratalog.records import (
    MAGIC_OFFSET,
    Compression,
    TimestampType,
    build_batch,
    checked_batch,
    decode_records,
    parse_header,
    set_max_timestamp_in_place,
    summarize_records,
    validate_batch,
)

_LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    data: bytearray  # a private copy whose header the log may rewrite
    last_offset_delta: int
    max_timestamp: int
    log_append_time: int
    record_count: int
    producer_id: int = -1        # an idempotent producer's id, epoch and first sequence (-1: none)
    producer_epoch: int = -1
    base_sequence: int = -1


def validate_leader_batch(batch: bytes | bytearray, config: LogConfig, tp: TopicPartition,
                          now_ms: int) -> ValidatedBatch:
    if len(batch) < MAGIC_OFFSET + 1:
        raise CorruptRecordError(len(batch), f"append to {tp} of {len(batch)} bytes is too short to be a batch")
    magic = batch[MAGIC_OFFSET]
    if magic in (0, 1):
        raise InvalidRecordError(
            f"append to {tp}: message format v{magic} is not accepted for appends (Kafka 4.0 writes only v2, KIP-724)"
        )
    checked = checked_batch(batch)   # the native kernel's one call; None: the checks below name the fault
    header = checked[0] if checked is not None else validate_batch(batch, 0, source=f"append to {tp}")
    if header.size != len(batch):
        raise InvalidRecordError(
            f"append to {tp}: expected exactly one record batch of {header.size} bytes, got {len(batch)} bytes "
            f"({len(batch) - header.size} after the first batch)"
        )
    if header.size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"append to {tp}: batch of {header.size} bytes is larger than max.message.bytes "
            f"({config.max_message_bytes})"
        )
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"append to {tp}: a producer batch must have base offset 0, this one has {header.base_offset}"
        )
    if header.is_control:
        raise InvalidRecordError(f"append to {tp}: producers may not write control batches")
    if header.is_transactional:
        # Kafka refuses a transactional batch for a partition its coordinator did not add to the
        # transaction; here no coordinator exists, so no marker could ever end it, and it would hold
        # every read_committed reader at its first offset for good.
        raise InvalidTxnStateError(
            f"append to {tp}: batch of producer id {header.producer_id} is transactional, but this engine has "
            "no transaction coordinator: the partition was not added to a transaction")
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"append to {tp}: batch declares {header.records_count} records but last offset delta "
            f"{header.last_offset_delta}; a producer batch holds offsets 0..count-1"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"append to {tp}: producer id {header.producer_id} set without a base sequence")
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        raise InvalidTimestampError(f"append to {tp}: producers may not set LogAppendTime on a batch")

    summary = checked[1] if checked is not None and checked[1] is not None else \
        summarize_records(batch, 0, source=f"append to {tp}")
    if config.compact and summary.first_keyless_index >= 0:
        raise InvalidRecordError(
            f"append to {tp}: compacted topic requires a key on every record; record "
            f"{summary.first_keyless_index} of the batch has none"
        )
    log_append = config.message_timestamp_type == _LOG_APPEND_TIME
    if not log_append:
        _check_timestamps(summary.min_timestamp, summary.max_timestamp, config, tp, now_ms)

    data = bytearray(batch)
    compression = header.compression
    target = _target_codec(config, compression)
    if target != compression:
        data = bytearray(_recompress(data, target, config))

    if log_append:
        set_max_timestamp_in_place(data, 0, TimestampType.LOG_APPEND_TIME, now_ms)
        return ValidatedBatch(data, header.last_offset_delta, now_ms, now_ms, summary.count, header.producer_id,
                              header.producer_epoch, header.base_sequence)
    if summary.max_timestamp != header.max_timestamp or target != compression:
        set_max_timestamp_in_place(data, 0, TimestampType.CREATE_TIME, summary.max_timestamp)
    return ValidatedBatch(data, header.last_offset_delta, summary.max_timestamp, -1, summary.count, header.producer_id,
                          header.producer_epoch, header.base_sequence)


def _check_timestamps(min_ts: int, max_ts: int, config: LogConfig, tp: TopicPartition, now_ms: int) -> None:
    if min_ts >= 0 and now_ms - min_ts > config.message_timestamp_before_max_ms:
        raise InvalidTimestampError(
            f"append to {tp}: timestamp {min_ts} is {now_ms - min_ts} ms before the broker's time {now_ms}, "
            f"more than message.timestamp.before.max.ms ({config.message_timestamp_before_max_ms})"
        )
    if max_ts >= 0 and max_ts - now_ms > config.message_timestamp_after_max_ms:
        raise InvalidTimestampError(
            f"append to {tp}: timestamp {max_ts} is {max_ts - now_ms} ms after the broker's time {now_ms}, "
            f"more than message.timestamp.after.max.ms ({config.message_timestamp_after_max_ms})"
        )


def _target_codec(config: LogConfig, source: Compression) -> Compression:
    if config.compression_type == "producer":
        return source
    return Compression.from_name(config.compression_type)


def _recompress(data: bytearray, target: Compression, config: LogConfig) -> bytes:
    """Rebuild the batch with the topic's codec, keeping producer fields (Kafka's non-in-place path)."""
    header = parse_header(data, 0)
    records = decode_records(data, 0)
    level = {
        Compression.GZIP: config.compression_gzip_level,
        Compression.LZ4: config.compression_lz4_level,
        Compression.ZSTD: config.compression_zstd_level,
    }.get(target)
    return build_batch(
        records,
        base_offset=0,
        compression=target,
        compression_level=level,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        last_offset_delta=header.last_offset_delta,
    )
