"""The v2 record batch (magic 2) API in one import.

The batch format is implemented in small modules - ``batch_header`` (the
61-byte header, CRC, in-place edits), ``record`` (decoded values),
``builder`` (writing), ``reader`` (decoding and the append-path walk) and
``control`` (transaction markers); this module gathers their public names so
callers can think of "a batch" as one thing.
"""

from __future__ import annotations

from stratalog.records.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    V2_HEADER_SIZE,
    BatchHeader,
    TimestampType,
    compute_crc,
    increment_sequence,
    parse_header,
    set_max_timestamp_in_place,
    set_offsets_in_place,
    validate_batch,
)
from stratalog.records.builder import build_batch
from stratalog.records.control import (
    ControlRecordType,
    build_end_txn_marker_batch,
    parse_control_key,
    parse_end_txn_marker,
)
from stratalog.records.reader import RecordsSummary, checked_batch, decode_records, summarize_records
from stratalog.records.record import Header, Record

__all__ = [
    "ATTRIBUTES_OFFSET",
    "CRC_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "V2_HEADER_SIZE",
    "BatchHeader",
    "ControlRecordType",
    "Header",
    "Record",
    "RecordsSummary",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker_batch",
    "compute_crc",
    "decode_records",
    "increment_sequence",
    "parse_control_key",
    "parse_end_txn_marker",
    "parse_header",
    "set_max_timestamp_in_place",
    "set_offsets_in_place",
    "summarize_records",
    "checked_batch",
    "validate_batch",
]
