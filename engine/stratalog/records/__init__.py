"""Kafka's on-disk record formats, byte for byte.

stratalog stores Kafka's log files unchanged, so this package is the only place
that knows how records are laid out:

* ``batch`` - the v2 record batch (magic 2), the only format stratalog writes:
  header parsing and CRC-32C validation, building, decoding, the append path's
  fast validating walk, in-place offset/timestamp stamping, control records.
* ``legacy`` - reading the pre-0.11 v0/v1 message formats, including compressed
  wrapper messages.
* ``info`` - format-agnostic batch boundaries (position, size, offsets, max
  timestamp) read from headers alone, for segments, indexes and recovery.
* ``compression`` - gzip/snappy/lz4/zstd in exactly the stream framing Kafka uses.
* ``walker`` - the one walk over a v2 batch's records, into columns: every reader of
  records (``decode_records``, the cleaner, dump-log, Spark's Arrow columns) uses it.
* ``transactions`` - which batches belong to aborted transactions, from batches alone.
* ``json_form`` - records as JSON for people (the CLI and the HTTP API).
* ``varint`` - the ZigZag varints of v2 records.
* ``native`` - which record kernel runs: the Rust one (``native/``) where it is installed, or this
  package's pure Python, which stays the reference and the fallback.

Every decoding function reports damaged or truncated bytes as
``stratalog.common.errors.CorruptRecordError`` naming the byte position, never as
another exception type.
"""

from stratalog.records.batch import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    V2_HEADER_SIZE,
    BatchHeader,
    ControlRecordType,
    Header,
    Record,
    RecordsSummary,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    compute_crc,
    decode_records,
    parse_control_key,
    parse_end_txn_marker,
    parse_header,
    set_max_timestamp_in_place,
    set_offsets_in_place,
    checked_batch,
    summarize_records,
    validate_batch,
)
from stratalog.records.compression import Compression, compress, decompress
from stratalog.records.info import (BatchInfo, RecoveryScan, decode_any, follower_batches_natively, iter_batch_infos,
                                   peek_batch, producer_batches_natively, scan_natively)
from stratalog.records.legacy import LegacyEntry, legacy_records, parse_legacy_entry
from stratalog.records.varint import decode_varint, encode_varint
from stratalog.records.builder import assemble_batch
from stratalog.records.walker import RecordColumns, native_walk, walk_records

__all__ = [
    "RecordColumns",
    "RecoveryScan",
    "follower_batches_natively",
    "producer_batches_natively",
    "scan_natively",
    "assemble_batch",
    "native_walk",
    "walk_records",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "V2_HEADER_SIZE",
    "BatchHeader",
    "BatchInfo",
    "Compression",
    "ControlRecordType",
    "Header",
    "LegacyEntry",
    "Record",
    "RecordsSummary",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker_batch",
    "compress",
    "compute_crc",
    "decode_any",
    "decode_records",
    "decode_varint",
    "decompress",
    "encode_varint",
    "iter_batch_infos",
    "legacy_records",
    "parse_control_key",
    "parse_end_txn_marker",
    "parse_header",
    "parse_legacy_entry",
    "peek_batch",
    "set_max_timestamp_in_place",
    "set_offsets_in_place",
    "summarize_records",
    "checked_batch",
    "validate_batch",
]
