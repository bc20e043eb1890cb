"""Behaviour of stratalog.records: Kafka's v2 batches, legacy v0/v1 entries, codecs and varints.

Byte layouts are checked against the clean-room vectors of the reference
(kafka-storage.md §2.10); damaged input of any kind must surface as
CorruptRecordError naming a byte position, never as another exception.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CorruptRecordError
from stratalog.records import (
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    BatchInfo,
    Compression,
    ControlRecordType,
    Header,
    Record,
    RecordsSummary,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    compress,
    compute_crc,
    decode_any,
    decode_records,
    decode_varint,
    decompress,
    encode_varint,
    iter_batch_infos,
    legacy_records,
    parse_control_key,
    parse_end_txn_marker,
    parse_header,
    parse_legacy_entry,
    peek_batch,
    set_max_timestamp_in_place,
    set_offsets_in_place,
    summarize_records,
    validate_batch,
)
from stratalog.records.varint import VARLONG_MAX_BYTES

# --------------------------------------------------------------------------- helpers

T = TypeVar("T")

VECTOR_ONE = bytes.fromhex(
    "0000000000000000 0000003a 00000000 02 e99b8dd8 0000 00000000"
    "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    "10 00 00 00 02 6b 02 76 00".replace(" ", "")
)
VECTOR_TWO = bytes.fromhex(
    "0000000000000064 00000046 00000003 02 7d82460e 0000 00000001 00000000000003e8 00000000000003ed"
    "ffffffffffffffff ffff ffffffff 00000002"
    "10 00 00 00 02 61 02 31 00"
    "16 00 0a 02 02 62 01 02 02 68 02 78".replace(" ", "")
)
VECTOR_V1 = bytes.fromhex(
    "0000000000000000 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76".replace(" ", "")
)
VECTOR_V0 = bytes.fromhex("0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76".replace(" ", ""))

VECTOR_TWO_RECORDS = [
    Record(100, 1000, b"a", b"1"),
    Record(101, 1005, b"b", None, (Header("h", b"x"),)),
]


def fix_crc(batch: bytearray, pos: int = 0) -> None:
    """Recompute the CRC-32C of the v2 batch at ``pos`` after a deliberate edit."""
    size = struct.unpack_from(">i", batch, pos + 8)[0] + LOG_OVERHEAD
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + size])))


def legacy_entry(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    """A v0/v1 log entry written the way LegacyRecord does (CRC-32 over magic..end)."""
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def compressed_wrapper(
    codec: Compression,
    magic: int,
    wrapper_offset: int,
    inner: list[bytes],
    *,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    value = compress(codec, b"".join(inner))
    return legacy_entry(wrapper_offset, magic, None, value, attributes=int(codec) | attributes, timestamp=timestamp)


def some_records(n: int = 5, base: int = 0) -> list[Record]:
    return [
        Record(
            base + i,
            1_700_000_000_000 + 7 * i,
            None if i % 3 == 0 else f"key-{i}".encode(),
            None if i % 4 == 3 else b"value " * (i + 1),
            (Header("trace", b"t" * i), Header("null", None)) if i % 2 else (),
        )
        for i in range(n)
    ]


# --------------------------------------------------------------------------- varint


@pytest.mark.parametrize(
    ("value", "encoded", "limit"),
    [
        (0, "00", 5),
        (-1, "01", 5),
        (1, "02", 5),
        (63, "7e", 5),
        (-64, "7f", 5),
        (64, "8001", 5),
        (2**31 - 1, "feffffff0f", 5),
        (-(2**31), "ffffffff0f", 5),
        (2**63 - 1, "feffffffffffffffff01", 10),
        (-(2**63), "ffffffffffffffffff01", 10),
    ],
)
def test_varints_are_zigzag_then_little_endian_base128(value: int, encoded: str, limit: int) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0, limit=limit) == (value, len(encoded) // 2)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.binary(max_size=4))
def test_any_int64_survives_a_varlong_round_trip_and_decoding_stops_at_its_end(value: int, tail: bytes) -> None:
    data = b"\x00" + encode_varint(value) + tail
    assert decode_varint(data, 1, limit=VARLONG_MAX_BYTES) == (value, len(data) - len(tail))


def test_encoding_a_value_wider_than_int64_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**63)
    with pytest.raises(ValueError):
        encode_varint(-(2**63) - 1)


def test_a_varint_longer_than_five_bytes_is_corrupt_at_its_start() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes") as e:
        decode_varint(b"\x00\x00\x80\x80\x80\x80\x80\x01", 2)
    assert e.value.position == 2


def test_a_varint_wider_than_32_bits_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="wider"):
        decode_varint(b"\xff\xff\xff\xff\x1f", 0)


def test_a_varint_cut_by_the_end_of_its_region_reports_its_start() -> None:
    with pytest.raises(CorruptRecordError, match="truncated") as e:
        decode_varint(b"\x01\x80\x80\x01", 1, end=3)
    assert e.value.position == 1
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"\x01", 1)


# --------------------------------------------------------------------------- compression


def test_codec_names_are_kafkas() -> None:
    assert [c.kafka_name for c in Compression] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert Compression.from_name("uncompressed") is Compression.NONE
    assert Compression.from_name("zstd") is Compression.ZSTD
    with pytest.raises(ValueError):
        Compression.from_name("producer")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(Compression)), st.binary(max_size=70_000) | st.just(b"abc" * 40_000))
def test_every_codec_round_trips_any_bytes(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_uses_xerial_framing_with_32_kib_blocks() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2
    pos, blocks = 16, 0
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        pos += 4 + size
        blocks += 1
    assert pos == len(framed) and blocks == 3


def test_snappy_reader_accepts_raw_blocks_and_concatenated_streams() -> None:
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(b"hello raw snappy"))
    assert decompress(Compression.SNAPPY, raw) == b"hello raw snappy"
    two = compress(Compression.SNAPPY, b"first ") + compress(Compression.SNAPPY, b"second")
    assert decompress(Compression.SNAPPY, two) == b"first second"


def test_a_snappy_block_claiming_an_impossible_size_is_corrupt_not_allocated() -> None:
    header = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 5  # claims 4 GiB from 10 bytes
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(Compression.SNAPPY, header + struct.pack(">i", len(block)) + block)


def test_lz4_frames_have_independent_blocks_and_no_content_checksum() -> None:
    frame = compress(Compression.LZ4, b"x" * 200_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flags = frame[4]
    assert flags >> 6 == 1  # frame version
    assert flags & 0x20  # block independence: KafkaLZ4BlockInputStream rejects linked blocks
    assert not flags & 0x04  # no content checksum


def test_v0_lz4_frames_with_the_pre_kip57_header_checksum_still_decompress() -> None:
    frame = bytearray(compress(Compression.LZ4, b"old kafka " * 1000))
    frame[6] ^= 0xFF  # the header checksum byte (no content size in our frames)
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(frame))
    assert decompress(Compression.LZ4, bytes(frame), magic=0) == b"old kafka " * 1000


def test_gzip_and_zstd_write_their_standard_frames() -> None:
    assert compress(Compression.GZIP, b"abc")[:2] == b"\x1f\x8b"
    assert compress(Compression.ZSTD, b"abc")[:4] == b"\x28\xb5\x2f\xfd"


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_undecompressable_data_is_corrupt_at_the_callers_position(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError) as e:
        decompress(codec, b"definitely not compressed data", position=1234, source="x.log")
    assert e.value.position == 1234 and e.value.source == "x.log"
    assert codec.kafka_name in e.value.reason


def test_compression_levels_follow_kafkas_ranges() -> None:
    assert decompress(Compression.GZIP, compress(Compression.GZIP, b"a" * 100, level=1)) == b"a" * 100
    assert decompress(Compression.ZSTD, compress(Compression.ZSTD, b"a" * 100, level=-5)) == b"a" * 100
    assert decompress(Compression.LZ4, compress(Compression.LZ4, b"a" * 100, level=17)) == b"a" * 100
    with pytest.raises(ValueError):
        compress(Compression.GZIP, b"a", level=10)
    with pytest.raises(ValueError):
        compress(Compression.LZ4, b"a", level=18)


# --------------------------------------------------------------------------- v2: reference vectors


def test_the_single_record_vector_is_built_byte_for_byte() -> None:
    built = build_batch([Record(0, 1_700_000_000_000, b"k", b"v")], partition_leader_epoch=0)
    assert built.hex() == VECTOR_ONE.hex()
    assert len(built) == 70


def test_the_two_record_vector_is_built_byte_for_byte() -> None:
    built = build_batch(VECTOR_TWO_RECORDS, base_offset=100, partition_leader_epoch=3)
    assert built.hex() == VECTOR_TWO.hex()
    assert len(built) == 82


def test_the_two_record_vector_parses_to_its_exact_fields() -> None:
    h = validate_batch(VECTOR_TWO)
    assert (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, h.crc) == (100, 0x46, 3, 2, 0x7D82460E)
    assert (h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (0, 1, 1000, 1005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (-1, -1, -1, 2)
    assert (h.size, h.last_offset, h.next_offset) == (82, 101, 102)
    assert h.compression is Compression.NONE and h.timestamp_type is TimestampType.CREATE_TIME
    assert not (h.is_transactional or h.is_control or h.has_delete_horizon)
    assert h.delete_horizon_ms is None and h.last_sequence == -1
    assert decode_records(VECTOR_TWO) == VECTOR_TWO_RECORDS


def test_the_single_record_vector_decodes_and_summarizes() -> None:
    assert decode_records(VECTOR_ONE) == [Record(0, 1_700_000_000_000, b"k", b"v")]
    assert summarize_records(VECTOR_ONE) == RecordsSummary(1, 1_700_000_000_000, 1_700_000_000_000, 0, -1)
    assert compute_crc(VECTOR_ONE, 0, 70) == 0xE99B8DD8


# --------------------------------------------------------------------------- v2: header


def test_timestamp_types_carry_kafkas_names() -> None:
    assert [t.kafka_name for t in TimestampType] == ["NoTimestampType", "CreateTime", "LogAppendTime"]


def test_header_flags_come_from_the_attribute_bits() -> None:
    batch = build_batch(
        some_records(3),
        compression=Compression.ZSTD,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
        delete_horizon_ms=1_800_000_000_000,
        max_timestamp=1_750_000_000_000,
    )
    h = parse_header(batch)
    assert h.attributes == 4 | 8 | 16 | 64
    assert h.compression is Compression.ZSTD
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h.is_transactional and not h.is_control and h.has_delete_horizon
    assert h.delete_horizon_ms == h.base_timestamp == 1_800_000_000_000
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 10, 12)


def test_last_sequence_wraps_past_int32_max_to_zero() -> None:
    batch = build_batch(some_records(5), producer_id=1, producer_epoch=0, base_sequence=2**31 - 3)
    assert parse_header(batch).last_sequence == 1  # MAX-2 +4: MAX-1, MAX, 0, 1


def test_a_header_needs_61_bytes() -> None:
    with pytest.raises(CorruptRecordError, match="61 bytes") as e:
        parse_header(b"\x00" * 10 + VECTOR_ONE[:60], 10)
    assert e.value.position == 10


def test_a_magic_other_than_2_is_reported_at_the_magic_byte() -> None:
    data = bytearray(VECTOR_ONE)
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1") as e:
        parse_header(bytes(data))
    assert e.value.position == 16


def test_a_batch_length_below_49_is_corrupt() -> None:
    data = bytearray(VECTOR_ONE)
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum") as e:
        parse_header(bytes(data), source="00000000000000000000.log")
    assert e.value.position == 8 and e.value.source == "00000000000000000000.log"


def test_an_unknown_codec_id_is_corrupt() -> None:
    data = bytearray(VECTOR_ONE)
    data[22] = 5
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="codec id 5") as e:
        validate_batch(bytes(data))
    assert e.value.position == 21


def test_a_batch_cut_short_is_reported_as_truncated() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(VECTOR_TWO[:-1])
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_records(VECTOR_TWO[:-1], verify_crc=False)


@pytest.mark.parametrize("index", [21, 30, 57, 61, 81])
def test_a_flipped_byte_inside_the_crc_range_is_reported_with_its_position(index: int) -> None:
    data = bytearray(b"garbage!" + VECTOR_TWO)
    data[8 + index] ^= 0x40
    with pytest.raises(CorruptRecordError) as e:
        validate_batch(data, 8, source="seg.log")
    assert e.value.position == 8
    assert "stored crc = 0x7d82460e" in e.value.reason and "computed crc = 0x" in e.value.reason
    assert "seg.log at byte 8" in str(e.value)
    with pytest.raises(CorruptRecordError):
        decode_records(data, 8)


@pytest.mark.parametrize("index", [0, 7, 12, 15])
def test_base_offset_and_leader_epoch_lie_outside_the_crc(index: int) -> None:
    data = bytearray(VECTOR_TWO)
    data[index] ^= 0xFF
    validate_batch(data)


def test_stamping_offsets_in_place_touches_only_base_offset_and_leader_epoch() -> None:
    original = build_batch(some_records(4), compression=Compression.GZIP)
    data = bytearray(original)
    set_offsets_in_place(data, 0, 1_000_000, 17)
    changed = [i for i in range(len(data)) if data[i] != original[i]]
    assert set(changed) <= set(range(0, 8)) | set(range(12, 16))
    h = validate_batch(data)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1_000_000, 17, 1_000_003)
    assert [r.offset for r in decode_records(data)] == [1_000_000, 1_000_001, 1_000_002, 1_000_003]


def test_setting_log_append_time_sets_bit_3_and_a_valid_crc() -> None:
    data = bytearray(b"\x00" * 5 + build_batch(some_records(3)))
    set_max_timestamp_in_place(memoryview(data), 5, TimestampType.LOG_APPEND_TIME, 1_999_999_999_999)
    h = validate_batch(data, 5)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.max_timestamp == 1_999_999_999_999
    assert {r.timestamp for r in decode_records(data, 5)} == {1_999_999_999_999}
    set_max_timestamp_in_place(data, 5, TimestampType.CREATE_TIME, 5)
    h = validate_batch(data, 5)
    assert h.timestamp_type is TimestampType.CREATE_TIME and h.max_timestamp == 5 and h.attributes == 0


def test_setting_an_unchanged_max_timestamp_leaves_the_bytes_alone() -> None:
    original = build_batch(some_records(3))
    data = bytearray(original)
    data[17] ^= 1  # a wrong CRC would be recomputed by any rewrite
    set_max_timestamp_in_place(data, 0, TimestampType.CREATE_TIME, parse_header(original).max_timestamp)
    assert data[17] == original[17] ^ 1


def test_rewriting_the_timestamp_clears_attribute_bits_kafka_never_sets() -> None:
    data = bytearray(build_batch(some_records(2), compression=Compression.SNAPPY))
    data[21] |= 0x80
    fix_crc(data)
    set_max_timestamp_in_place(data, 0, TimestampType.LOG_APPEND_TIME, 77)
    assert parse_header(data).attributes == 2 | 8


# --------------------------------------------------------------------------- v2: build & decode


@pytest.mark.parametrize("codec", list(Compression))
def test_records_with_nulls_and_headers_round_trip_through_every_codec(codec: Compression) -> None:
    records = some_records(20, base=500)
    batch = build_batch(records, base_offset=500, compression=codec)
    h = validate_batch(batch)
    assert h.compression is codec and h.records_count == 20 and h.last_offset == 519
    assert decode_records(batch) == records
    assert decode_records(bytearray(batch)) == records
    assert decode_records(memoryview(b"xx" + batch), 2) == records


def test_base_timestamp_is_the_first_records_and_max_timestamp_the_largest() -> None:
    records = [Record(0, 50, b"a", b""), Record(1, 10, b"b", b""), Record(2, 90, b"c", b""), Record(3, -1, b"d", b"")]
    h = parse_header(build_batch(records))
    assert (h.base_timestamp, h.max_timestamp) == (50, 90)
    assert decode_records(build_batch(records)) == records


def test_records_without_timestamps_are_allowed() -> None:
    records = [Record(0, -1, b"a", b"1"), Record(1, -1, None, None)]
    batch = build_batch(records)
    assert (parse_header(batch).base_timestamp, parse_header(batch).max_timestamp) == (-1, -1)
    assert decode_records(batch) == records


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    records = some_records(4)
    batch = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=1_234)
    decoded = decode_records(batch)
    assert [r.timestamp for r in decoded] == [1_234] * 4
    assert [(r.offset, r.key, r.value) for r in decoded] == [(r.offset, r.key, r.value) for r in records]
    assert summarize_records(batch) == RecordsSummary(4, 1_234, 1_234, 0, 0)


def test_a_delete_horizon_replaces_base_timestamp_and_keeps_record_timestamps() -> None:
    records = some_records(3)
    batch = build_batch(records, delete_horizon_ms=1_800_000_000_000, compression=Compression.LZ4)
    h = parse_header(batch)
    assert h.has_delete_horizon and h.base_timestamp == 1_800_000_000_000
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert decode_records(batch) == records


def test_compaction_can_rebuild_a_batch_with_gaps_keeping_its_last_offset() -> None:
    survivors = [Record(1003, 5, b"k3", b"v"), Record(1007, 9, b"k7", None)]
    batch = build_batch(
        survivors,
        base_offset=1000,
        last_offset_delta=9,
        max_timestamp=12,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
    )
    h = validate_batch(batch)
    assert (h.base_offset, h.last_offset, h.records_count, h.max_timestamp, h.last_sequence) == (1000, 1009, 2, 12, 9)
    assert decode_records(batch) == survivors
    assert summarize_records(batch) == RecordsSummary(2, 5, 9, 7, -1)


def test_an_empty_batch_keeps_its_offsets_and_is_written_like_kafkas_empty_header() -> None:
    batch = build_batch(
        [],
        base_offset=40,
        last_offset_delta=4,
        max_timestamp=777,
        compression=Compression.GZIP,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
    )
    h = validate_batch(batch)
    assert len(batch) == V2_HEADER_SIZE
    assert (h.records_count, h.base_timestamp, h.max_timestamp, h.last_offset) == (0, -1, 777, 44)
    assert h.compression is Compression.NONE
    assert decode_records(batch) == []
    assert summarize_records(batch) == RecordsSummary(0, -1, -1, -1, -1)
    with pytest.raises(ValueError):
        build_batch([])


def test_builder_rejects_what_kafka_could_not_represent() -> None:
    with pytest.raises(ValueError, match="does not follow"):
        build_batch([Record(5, 0, b"a", b""), Record(5, 0, b"b", b"")], base_offset=5)
    with pytest.raises(ValueError, match="does not follow"):
        build_batch([Record(4, 0, b"a", b"")], base_offset=5)
    with pytest.raises(ValueError, match="int32"):
        build_batch([Record(2**31, 0, b"a", b"")])
    with pytest.raises(ValueError, match="last_offset_delta"):
        build_batch(some_records(3), last_offset_delta=1)
    with pytest.raises(ValueError, match="timestamp type"):
        build_batch(some_records(1), timestamp_type=TimestampType.NO_TIMESTAMP)
    with pytest.raises(ValueError, match="out of range"):
        build_batch(some_records(1), producer_epoch=40_000)


def test_header_keys_may_be_any_unicode() -> None:
    records = [Record(0, 0, b"k", b"v", (Header("clé-🔑", b"\x00"), Header("", None)))]
    assert decode_records(build_batch(records)) == records


# --------------------------------------------------------------------------- v2: corrupt records


def _uncompressed_with_record_bytes(record_bytes: bytes, count: int) -> bytearray:
    """A valid-CRC batch around hand-made record bytes."""
    data = bytearray(build_batch([Record(0, 0, b"k", b"v")]))
    del data[V2_HEADER_SIZE:]
    data += record_bytes
    struct.pack_into(">i", data, 8, len(data) - LOG_OVERHEAD)
    struct.pack_into(">i", data, 57, count)
    fix_crc(data)
    return data


def test_more_declared_records_than_present_is_an_incorrect_batch_size() -> None:
    data = bytearray(VECTOR_TWO)
    struct.pack_into(">i", data, 57, 3)
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="Incorrect declared batch size, premature EOF") as e:
        decode_records(data)
    assert e.value.position == 82
    with pytest.raises(CorruptRecordError, match="premature EOF"):
        summarize_records(data)


def test_fewer_declared_records_than_present_is_an_incorrect_batch_size() -> None:
    data = bytearray(VECTOR_TWO)
    struct.pack_into(">i", data, 57, 1)
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="records still remaining") as e:
        decode_records(data)
    assert e.value.position == 70  # where the undeclared second record starts
    with pytest.raises(CorruptRecordError, match="records still remaining"):
        summarize_records(data)


def test_a_negative_record_count_is_corrupt() -> None:
    data = bytearray(VECTOR_ONE)
    struct.pack_into(">i", data, 57, -1)
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="invalid record count -1"):
        decode_records(data)


def test_a_record_whose_fields_do_not_fill_its_length_is_corrupt_at_the_record() -> None:
    # record of the first vector with its length bumped from 8 to 9 and a stray byte
    data = _uncompressed_with_record_bytes(bytes.fromhex("12 00 00 00 02 6b 02 76 00 00".replace(" ", "")), 1)
    with pytest.raises(CorruptRecordError, match="expected to read 9 bytes") as e:
        decode_records(data)
    assert e.value.position == 61


def test_a_record_longer_than_its_batch_is_corrupt() -> None:
    data = _uncompressed_with_record_bytes(bytes.fromhex("7e 00 00 00 02 6b 02 76 00".replace(" ", "")), 1)
    with pytest.raises(CorruptRecordError, match="remaining bytes") as e:
        decode_records(data)
    assert e.value.position == 61
    with pytest.raises(CorruptRecordError):
        summarize_records(data)


def test_a_key_running_past_its_record_is_corrupt() -> None:
    data = _uncompressed_with_record_bytes(bytes.fromhex("10 00 00 00 40 6b 02 76 00".replace(" ", "")), 1)
    with pytest.raises(CorruptRecordError):
        decode_records(data)
    with pytest.raises(CorruptRecordError, match="overrun"):
        summarize_records(data)


def test_a_header_key_that_is_not_utf8_is_corrupt_at_the_bad_byte() -> None:
    data = _uncompressed_with_record_bytes(bytes.fromhex("16 00 00 00 02 6b 02 76 02 02 ff 01".replace(" ", "")), 1)
    with pytest.raises(CorruptRecordError, match="UTF-8") as e:
        decode_records(data)
    assert e.value.position == 71


def test_negative_header_counts_and_key_sizes_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="invalid number of record headers -1"):
        decode_records(_uncompressed_with_record_bytes(bytes.fromhex("10 00 00 00 02 6b 02 76 01".replace(" ", "")), 1))
    with pytest.raises(CorruptRecordError, match="negative header key size"):
        decode_records(
            _uncompressed_with_record_bytes(bytes.fromhex("16 00 00 00 02 6b 02 76 02 01 02 01".replace(" ", "")), 1)
        )


def test_summaries_require_offset_deltas_to_increase_up_to_last_offset_delta() -> None:
    two = bytes.fromhex("10 00 00 02 02 61 02 31 00  10 00 00 02 02 62 02 32 00".replace(" ", ""))
    data = _uncompressed_with_record_bytes(two, 2)
    struct.pack_into(">i", data, 23, 1)
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="offset delta 1 not in") as e:
        summarize_records(data)
    assert e.value.position == 70
    assert [r.offset for r in decode_records(data)] == [1, 1]  # Kafka's reader does not check order
    struct.pack_into(">i", data, 23, 0)
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="offset delta 1 not in"):
        summarize_records(data)


def test_corruption_inside_compressed_records_names_the_batch_and_the_decompressed_offset() -> None:
    body = bytes.fromhex("10 00 00 00 02 6b 02 76 00 00".replace(" ", ""))  # one stray byte
    data = bytearray(build_batch([Record(0, 0, b"k", b"v")]))
    del data[V2_HEADER_SIZE:]
    data += compress(Compression.GZIP, body)
    data[22] = Compression.GZIP
    struct.pack_into(">i", data, 8, len(data) - LOG_OVERHEAD)
    fix_crc(data)
    buf = b"\x00" * 100 + data
    with pytest.raises(CorruptRecordError, match="decompressed records of batch at 100") as e:
        decode_records(buf, 100)
    assert e.value.position == 100 and "offset 9" in e.value.reason


def test_undecompressable_records_are_corrupt() -> None:
    data = bytearray(VECTOR_TWO)
    data[22] = Compression.ZSTD
    fix_crc(data)
    with pytest.raises(CorruptRecordError, match="zstd decompression failed") as e:
        decode_records(data)
    assert e.value.position == 61


# --------------------------------------------------------------------------- v2: summaries


def test_a_summary_reports_timestamps_the_max_timestamp_offset_and_the_first_keyless_record() -> None:
    records = [
        Record(10, 300, b"a", b""),
        Record(11, 100, b"b", b""),
        Record(12, 900, None, b""),
        Record(13, 900, b"c", b""),
        Record(14, 50, None, None),
    ]
    for codec in Compression:
        summary = summarize_records(build_batch(records, base_offset=10, compression=codec))
        assert summary == RecordsSummary(5, 50, 900, 2, 2)


records_strategy = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=70_000),  # offset gap
        st.integers(min_value=-1, max_value=2**45),
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
    ),
    max_size=25,
)


RawRecord = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _materialize(raw: list[RawRecord], base: int) -> list[Record]:
    records: list[Record] = []
    offset = base - 1
    for gap, ts, key, value, headers in raw:
        offset += gap
        records.append(Record(offset, ts, key, value, tuple(Header(k, v) for k, v in headers)))
    return records


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_strategy, st.sampled_from(list(Compression)), st.integers(min_value=0, max_value=2**40))
def test_arbitrary_records_round_trip_through_build_and_decode(
    raw: list[RawRecord], codec: Compression, base: int
) -> None:
    records = _materialize(raw, base)
    if records and records[-1].offset - base > 2**31 - 1:
        return
    batch = build_batch(
        records,
        base_offset=base,
        compression=codec,
        last_offset_delta=None if records else 0,
        max_timestamp=None if records else -1,
    )
    assert decode_records(batch) == records
    summary = summarize_records(batch)
    assert summary.count == len(records)
    if records:
        timestamps = [r.timestamp for r in records]
        assert (summary.min_timestamp, summary.max_timestamp) == (min(timestamps), max(timestamps))
        first_max = next(r for r in records if r.timestamp == max(timestamps))
        assert summary.offset_delta_of_max_timestamp == first_max.offset - base
        keyless = [i for i, r in enumerate(records) if r.key is None]
        assert summary.first_keyless_index == (keyless[0] if keyless else -1)


# --------------------------------------------------------------------------- control records


def test_an_end_transaction_marker_is_one_control_record_in_a_transactional_batch() -> None:
    batch = build_end_txn_marker_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=2, coordinator_epoch=5, base_offset=106, timestamp=123
    )
    h = validate_batch(batch)
    assert h.is_control and h.is_transactional and h.compression is Compression.NONE
    assert (h.base_offset, h.records_count, h.producer_id, h.producer_epoch, h.base_sequence) == (106, 1, 7, 2, -1)
    (marker,) = decode_records(batch)
    assert marker.key == bytes.fromhex("00000001") and marker.value == bytes.fromhex("0000 00000005".replace(" ", ""))
    assert parse_control_key(marker.key) is ControlRecordType.COMMIT
    assert parse_end_txn_marker(marker.value) == 5
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(
            ControlRecordType.LEADER_CHANGE, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0
        )


def test_control_keys_of_unknown_type_are_tolerated_but_short_keys_are_corrupt() -> None:
    assert parse_control_key(bytes.fromhex("0000 0006".replace(" ", ""))) is ControlRecordType.KRAFT_VOTERS
    assert parse_control_key(bytes.fromhex("0001 0063 ff".replace(" ", ""))) is ControlRecordType.UNKNOWN
    with pytest.raises(CorruptRecordError, match="at least 4 bytes") as e:
        parse_control_key(b"\x00\x00\x01", position=99)
    assert e.value.position == 99
    with pytest.raises(CorruptRecordError):
        parse_control_key(None)
    with pytest.raises(CorruptRecordError, match="Invalid version"):
        parse_control_key(bytes.fromhex("ffff0000"))


def test_end_transaction_marker_values_need_six_bytes() -> None:
    assert parse_end_txn_marker(bytes.fromhex("0001 7fffffff 00".replace(" ", ""))) == 2**31 - 1
    with pytest.raises(CorruptRecordError, match="at least 6 bytes"):
        parse_end_txn_marker(b"\x00\x00\x00")
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(None)


# --------------------------------------------------------------------------- legacy v0/v1


def test_the_v1_vector_parses_to_its_exact_fields() -> None:
    assert legacy_entry(0, 1, b"k", b"v", timestamp=1000) == VECTOR_V1
    e = parse_legacy_entry(VECTOR_V1)
    assert (e.position, e.size, e.offset, e.crc, e.magic, e.attributes) == (0, 36, 0, 0xE4E321BC, 1, 0)
    assert (e.timestamp, e.key, e.value) == (1000, b"k", b"v")
    assert e.compression is Compression.NONE and e.timestamp_type is TimestampType.CREATE_TIME
    assert legacy_records(e) == [Record(0, 1000, b"k", b"v")]


def test_the_v0_vector_parses_to_its_exact_fields() -> None:
    assert legacy_entry(0, 0, b"k", b"v") == VECTOR_V0
    e = parse_legacy_entry(VECTOR_V0)
    assert (e.size, e.offset, e.crc, e.magic, e.timestamp, e.key, e.value) == (28, 0, 0x1FECD70A, 0, -1, b"k", b"v")
    assert e.timestamp_type is TimestampType.NO_TIMESTAMP
    assert legacy_records(e) == [Record(0, -1, b"k", b"v")]


def test_legacy_null_keys_and_values_are_none() -> None:
    e = parse_legacy_entry(legacy_entry(5, 1, None, None, timestamp=9))
    assert (e.key, e.value) == (None, None)


def test_a_legacy_entry_size_below_14_is_corrupt_as_in_file_log_input_stream() -> None:
    data = bytearray(VECTOR_V0)
    struct.pack_into(">i", data, 8, 13)
    with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead") as e:
        parse_legacy_entry(bytes(data))
    assert e.value.position == 8


def test_a_legacy_crc_mismatch_names_both_crcs() -> None:
    data = bytearray(b"\x00" * 3 + VECTOR_V1)
    data[3 + 30] ^= 1
    with pytest.raises(CorruptRecordError, match="stored crc = 0xe4e321bc") as e:
        parse_legacy_entry(bytes(data), 3)
    assert e.value.position == 3
    assert parse_legacy_entry(bytes(data), 3, verify_crc=False).key == b"j"


def test_legacy_entries_with_unknown_magic_or_lengths_past_their_end_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="magic 2 is not a legacy"):
        parse_legacy_entry(VECTOR_ONE)
    bad_key = bytearray(VECTOR_V0)
    struct.pack_into(">i", bad_key, 18, 50)
    with pytest.raises(CorruptRecordError, match="key of 50 bytes overruns"):
        parse_legacy_entry(bytes(bad_key), verify_crc=False)
    with pytest.raises(CorruptRecordError, match="truncated"):
        parse_legacy_entry(VECTOR_V0[:-1])


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_v1_wrappers_turn_relative_inner_offsets_absolute(codec: Compression) -> None:
    inner = [legacy_entry(i, 1, f"k{i}".encode(), b"v" * i, timestamp=100 + i) for i in range(3)]
    wrapper = parse_legacy_entry(compressed_wrapper(codec, 1, 52, inner, timestamp=102))
    assert wrapper.compression is codec and wrapper.key is None
    assert legacy_records(wrapper) == [Record(50 + i, 100 + i, f"k{i}".encode(), b"v" * i) for i in range(3)]


def test_a_v1_wrapper_offset_of_zero_keeps_inner_offsets_as_they_are() -> None:
    inner = [legacy_entry(i, 1, b"k", b"v", timestamp=1) for i in range(3)]
    wrapper = parse_legacy_entry(compressed_wrapper(Compression.GZIP, 1, 0, inner))
    assert [r.offset for r in legacy_records(wrapper)] == [0, 1, 2]


def test_a_v1_wrapper_offset_below_its_last_inner_offset_is_corrupt() -> None:
    inner = [legacy_entry(i, 1, b"k", b"v", timestamp=1) for i in range(3)]
    wrapper = parse_legacy_entry(b"\x00" * 4 + compressed_wrapper(Compression.GZIP, 1, 1, inner), 4)
    with pytest.raises(CorruptRecordError, match="less than the last inner message offset") as e:
        legacy_records(wrapper)
    assert e.value.position == 4


def test_log_append_time_v1_wrappers_give_inner_records_the_wrapper_timestamp() -> None:
    inner = [legacy_entry(i, 1, b"k", b"v", timestamp=5) for i in range(2)]
    entry = parse_legacy_entry(compressed_wrapper(Compression.SNAPPY, 1, 11, inner, attributes=0x08, timestamp=999))
    assert entry.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [(r.offset, r.timestamp) for r in legacy_records(entry)] == [(10, 999), (11, 999)]


def test_v0_wrappers_carry_absolute_inner_offsets_even_with_old_lz4_frames() -> None:
    inner = [legacy_entry(70 + i, 0, b"k", b"v%d" % i) for i in range(3)]
    frame = bytearray(compress(Compression.LZ4, b"".join(inner)))
    frame[6] ^= 0x55  # pre-KIP-57 writers computed the header checksum wrongly
    entry = parse_legacy_entry(legacy_entry(72, 0, None, bytes(frame), attributes=Compression.LZ4))
    assert legacy_records(entry) == [Record(70 + i, -1, b"k", b"v%d" % i) for i in range(3)]


def test_broken_compressed_wrappers_are_corrupt_at_the_wrapper() -> None:
    null_value = parse_legacy_entry(legacy_entry(3, 1, None, None, attributes=1))
    with pytest.raises(CorruptRecordError, match="null value"):
        legacy_records(null_value)
    empty = parse_legacy_entry(compressed_wrapper(Compression.GZIP, 1, 3, []))
    with pytest.raises(CorruptRecordError, match="no inner records"):
        legacy_records(empty)
    nested = compressed_wrapper(Compression.GZIP, 1, 0, [legacy_entry(0, 1, b"k", b"v")])
    double = parse_legacy_entry(b"\x00" * 9 + compressed_wrapper(Compression.GZIP, 1, 5, [nested]), 9)
    with pytest.raises(CorruptRecordError, match="Inner messages must not be compressed") as e:
        legacy_records(double)
    assert e.value.position == 9
    bad_inner = bytearray(legacy_entry(0, 1, b"k", b"v"))
    bad_inner[-1] ^= 1
    wrapper = parse_legacy_entry(compressed_wrapper(Compression.GZIP, 1, 0, [bytes(bad_inner)]))
    with pytest.raises(CorruptRecordError, match="decompressed messages of entry at 0"):
        legacy_records(wrapper)
    assert legacy_records(wrapper, verify_crc=False)[0].value == b"w"


# --------------------------------------------------------------------------- batch infos


def _mixed_log() -> bytes:
    return VECTOR_V0 + VECTOR_V1 + VECTOR_TWO + build_batch(some_records(3, base=102), base_offset=102)


def test_peeking_reads_offsets_and_max_timestamp_of_every_format() -> None:
    log = _mixed_log()
    infos = list(iter_batch_infos(log))
    assert infos == [
        BatchInfo(0, 28, 0, 0, 0, -1, None),
        BatchInfo(28, 36, 1, 0, 0, 1000, None),
        BatchInfo(64, 82, 2, 100, 101, 1005, 2),
        BatchInfo(146, len(log) - 146, 2, 102, 104, 1_700_000_000_014, 3),
    ]
    assert infos[2].next_offset == 102


def test_a_partial_tail_ends_iteration_quietly() -> None:
    log = _mixed_log()
    for cut in range(1, 40):
        infos = list(iter_batch_infos(log[:-cut]))
        assert len(infos) == 3
    assert peek_batch(VECTOR_ONE[:17], 0) is None  # Kafka needs more than 17 bytes
    assert peek_batch(VECTOR_ONE, 70) is None
    assert list(iter_batch_infos(b"")) == []


@pytest.mark.parametrize(
    ("size_field", "match"), [(13, "smaller than minimum record overhead"), (48, "minimum allowed overhead")]
)
def test_peeking_rejects_impossible_sizes(size_field: int, match: str) -> None:
    data = bytearray(b"\x00" * 7 + VECTOR_ONE)
    struct.pack_into(">i", data, 7 + 8, size_field)
    with pytest.raises(CorruptRecordError, match=match) as e:
        peek_batch(bytes(data), 7, source="0.log")
    assert e.value.position == 15 and e.value.source == "0.log"


def test_peeking_rejects_unknown_magic_and_short_v1_entries() -> None:
    data = bytearray(VECTOR_ONE)
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="unknown magic 3") as e:
        peek_batch(bytes(data), 0)
    assert e.value.position == 16
    short_v1 = bytearray(VECTOR_V0)
    short_v1[16] = 1
    with pytest.raises(CorruptRecordError, match="v1 record overhead"):
        peek_batch(bytes(short_v1), 0)


def test_decode_any_dispatches_on_magic() -> None:
    log = _mixed_log()
    assert decode_any(log, 0) == (BatchInfo(0, 28, 0, 0, 0, -1, None), [Record(0, -1, b"k", b"v")])
    assert decode_any(log, 28)[1] == [Record(0, 1000, b"k", b"v")]
    assert decode_any(log, 64)[1] == VECTOR_TWO_RECORDS
    assert decode_any(log, 146)[1] == some_records(3, base=102)
    with pytest.raises(CorruptRecordError, match="incomplete"):
        decode_any(log[:-1], 146)


# --------------------------------------------------------------------------- fuzzing: only CorruptRecordError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_corrupt_errors(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Run ``fn``: it may succeed or raise CorruptRecordError with a position, nothing else."""
    try:
        return fn(*args, **kwargs)
    except CorruptRecordError as e:
        assert isinstance(e.position, int) and e.reason
        return None


@FUZZ
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=20))
def test_random_bytes_raise_nothing_but_corrupt_record_errors(data: bytes, pos: int) -> None:
    for verify in (True, False):
        _only_corrupt_errors(decode_records, data, pos, verify_crc=verify)
        _only_corrupt_errors(parse_legacy_entry, data, pos, verify_crc=verify)
        _only_corrupt_errors(decode_any, data, pos, verify_crc=verify)
    _only_corrupt_errors(summarize_records, data, pos)
    _only_corrupt_errors(peek_batch, data, pos)
    _only_corrupt_errors(lambda: list(iter_batch_infos(data, start=pos)))
    _only_corrupt_errors(lambda: decode_varint(data, pos, limit=VARLONG_MAX_BYTES))


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(list(Compression)), st.integers(0, 40), st.booleans())
def test_random_records_behind_a_valid_header_and_crc_raise_only_corrupt_record_errors(
    body: bytes, codec: Compression, count: int, compressed: bool
) -> None:
    data = bytearray(VECTOR_ONE[:V2_HEADER_SIZE]) + (compress(codec, body) if compressed else body)
    data[22] = codec
    struct.pack_into(">i", data, 8, len(data) - LOG_OVERHEAD)
    struct.pack_into(">i", data, 57, count)
    fix_crc(data)
    _only_corrupt_errors(decode_records, bytes(data))
    _only_corrupt_errors(summarize_records, bytes(data))
    _only_corrupt_errors(decode_any, bytes(data))


UNCOMPRESSED_RECORDS = build_batch(some_records(6))[V2_HEADER_SIZE:]


@FUZZ
@given(st.sampled_from(list(Compression)), st.data())
def test_damaged_record_sections_inside_any_codec_raise_only_corrupt_record_errors(
    codec: Compression, data: st.DataObject
) -> None:
    body = bytearray(UNCOMPRESSED_RECORDS)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        body[index] = data.draw(st.integers(min_value=0, max_value=255))
    body = body[: data.draw(st.integers(min_value=0, max_value=len(body)))] + data.draw(st.binary(max_size=4))
    batch = bytearray(VECTOR_ONE[:V2_HEADER_SIZE]) + compress(codec, bytes(body))
    batch[22] = codec
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">i", batch, 23, data.draw(st.integers(min_value=0, max_value=8)))
    struct.pack_into(">i", batch, 57, data.draw(st.integers(min_value=0, max_value=8)))
    fix_crc(batch)
    _only_corrupt_errors(decode_records, bytes(batch))
    _only_corrupt_errors(summarize_records, bytes(batch))


def _fuzz_batch(codec: Compression) -> bytes:
    return build_batch(some_records(6, base=10), base_offset=10, compression=codec)


FUZZ_BATCHES = {codec: _fuzz_batch(codec) for codec in Compression}


@FUZZ
@given(st.sampled_from(list(Compression)), st.data())
def test_truncated_batches_raise_only_corrupt_record_errors(codec: Compression, data: st.DataObject) -> None:
    batch = FUZZ_BATCHES[codec]
    cut = data.draw(st.integers(min_value=0, max_value=len(batch) - 1))
    for fn in (decode_records, summarize_records, validate_batch):
        with pytest.raises(CorruptRecordError):
            fn(batch[:cut])
    assert peek_batch(batch[:cut], 0) is None


@FUZZ
@given(st.sampled_from(list(Compression)), st.data())
def test_flipped_bytes_with_the_crc_fixed_up_raise_only_corrupt_record_errors(
    codec: Compression, data: st.DataObject
) -> None:
    batch = bytearray(FUZZ_BATCHES[codec])
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(min_value=0, max_value=len(batch) - 1))
        batch[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    if struct.unpack_from(">i", batch, 8)[0] + LOG_OVERHEAD == len(batch):
        fix_crc(batch)
    _only_corrupt_errors(decode_records, bytes(batch))
    _only_corrupt_errors(summarize_records, bytes(batch))
    _only_corrupt_errors(peek_batch, bytes(batch), 0)
    _only_corrupt_errors(decode_any, bytes(batch))


LEGACY_FUZZ = [
    VECTOR_V0,
    VECTOR_V1,
    compressed_wrapper(Compression.GZIP, 1, 5, [legacy_entry(i, 1, b"k", b"v" * i, timestamp=i) for i in range(3)]),
    compressed_wrapper(Compression.SNAPPY, 0, 2, [legacy_entry(i, 0, b"k", b"v" * i) for i in range(3)]),
    compressed_wrapper(Compression.LZ4, 1, 2, [legacy_entry(i, 1, None, b"v" * i) for i in range(3)]),
]


@FUZZ
@given(st.sampled_from(LEGACY_FUZZ), st.data())
def test_damaged_legacy_entries_raise_only_corrupt_record_errors(entry: bytes, data: st.DataObject) -> None:
    damaged = bytearray(entry)
    index = data.draw(st.integers(min_value=0, max_value=len(damaged) - 1))
    damaged[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    if data.draw(st.booleans()):  # fix the CRC so the damage reaches the parser
        struct.pack_into(">I", damaged, 12, zlib.crc32(bytes(damaged[16:])))
    cut = data.draw(st.integers(min_value=0, max_value=len(damaged)))
    for buf in (bytes(damaged), bytes(damaged[:cut])):
        parsed = _only_corrupt_errors(parse_legacy_entry, buf)
        if parsed is not None:
            _only_corrupt_errors(legacy_records, parsed)
        _only_corrupt_errors(peek_batch, buf, 0)
        _only_corrupt_errors(decode_any, buf)
