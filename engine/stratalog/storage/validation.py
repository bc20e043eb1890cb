"""Validation of a producer's batch before the log assigns it offsets.

Kafka's ``analyzeAndValidateRecords`` + ``LogValidator`` for a leader append,
as a pure function: bytes and the topic config in, the batch to write (the
producer's bytes, or a copy where they must change) or a named error out. It
never touches the log, so a refused batch changes nothing on disk.

Records are walked only as far as the rules need (``summarize_records``: keys
present, timestamps, offset deltas); the batch is rebuilt only when the topic's
``compression.type`` names a codec other than the producer's.

The common case -- one whole, sound, uncompressed batch that the topic keeps as sent --
is decided by one native call and a few comparisons (``_accepted_as_sent``), and the
producer's bytes are kept without a copy: the log sets the base offset and the
partition leader epoch as it writes them, and neither is under the CRC. Anything else,
every refusal included, goes the reference path below, which names what is wrong.
"""

from __future__ import annotations

from typing import NamedTuple

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
    native,
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
from stratalog.records.batch_header import CONTROL_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT

_LOG_APPEND_TIME = "LogAppendTime"
_REFUSED_ATTRIBUTES = CONTROL_BIT | TRANSACTIONAL_BIT | TIMESTAMP_TYPE_BIT   # each has its own refusal below


class ValidatedBatch(NamedTuple):
    """A producer batch the log may append (a tuple: one is made for every append)."""

    # The batch to write: the producer's bytes (``bytes``, so nobody can change them before the
    # write) or a rewritten copy. Its base offset and partition leader epoch are set at the write.
    data: bytes | bytearray
    last_offset_delta: int
    max_timestamp: int
    log_append_time: int
    record_count: int
    producer_id: int = -1        # an idempotent producer's id, epoch and first sequence (-1: none)
    producer_epoch: int = -1
    base_sequence: int = -1


class AsSentRules(NamedTuple):
    """The config a batch kept as sent is held to in one native call (``LogSegment.try_append_as_sent``):
    ``_accepted_as_sent``'s rules and the active segment's roll bounds."""

    max_message_bytes: int
    compact: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    segment_ms: int
    segment_bytes: int


def as_sent_rules(config: LogConfig) -> AsSentRules | None:
    """``config``'s ``AsSentRules``; None where no batch is kept as sent (another codec asked by
    ``compression.type``, or LogAppendTime stamped on every batch)."""
    if config.compression_type not in ("producer", "uncompressed") or config.message_timestamp_type == _LOG_APPEND_TIME:
        return None
    return AsSentRules(config.max_message_bytes, config.compact, config.message_timestamp_before_max_ms,
                       config.message_timestamp_after_max_ms, config.segment_ms, config.segment_bytes)


def validate_leader_batch(batch: bytes | bytearray, config: LogConfig, tp: TopicPartition,
                          now_ms: int) -> ValidatedBatch:
    accepted = _accepted_as_sent(batch, config, now_ms)
    return accepted if accepted is not None else _validate_step_by_step(batch, config, tp, now_ms)


def _accepted_as_sent(batch: bytes | bytearray, config: LogConfig, now_ms: int) -> ValidatedBatch | None:
    """The batch as it came, when the native kernel finds it sound and every rule of
    ``_validate_step_by_step`` accepts it unchanged; None to leave the decision to that path."""
    kernel = native.kernel
    if kernel is None or config.compression_type not in ("producer", "uncompressed") \
            or config.message_timestamp_type == _LOG_APPEND_TIME:
        return None
    facts = kernel.leader_batch_facts(batch)
    if facts is None:
        return None
    (size, attributes, last_offset_delta, header_max_timestamp, producer_id, producer_epoch, base_sequence, count,
     min_timestamp, max_timestamp, first_keyless, base_offset) = facts
    if (size > config.max_message_bytes or base_offset != 0 or attributes & _REFUSED_ATTRIBUTES
            or count != last_offset_delta + 1 or (producer_id >= 0 and base_sequence < 0)
            or (config.compact and first_keyless >= 0)
            or max_timestamp != header_max_timestamp   # the reference path rewrites the header's
            or (min_timestamp >= 0 and now_ms - min_timestamp > config.message_timestamp_before_max_ms)
            or (max_timestamp >= 0 and max_timestamp - now_ms > config.message_timestamp_after_max_ms)):
        return None
    data = batch if type(batch) is bytes else bytes(batch)
    return ValidatedBatch(data, last_offset_delta, max_timestamp, -1, count, producer_id, producer_epoch,
                          base_sequence)


def _validate_step_by_step(batch: bytes | bytearray, config: LogConfig, tp: TopicPartition,
                           now_ms: int) -> ValidatedBatch:
    """The reference: every check in Kafka's order, each refusal named."""
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
