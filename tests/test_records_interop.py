"""stratalog.records against kafka-python and against Apache Kafka's own Java code.

Batches we build must read back in kafka-python with a valid CRC and the same
records; batches and legacy message sets kafka-python builds (every codec,
headers, null keys and values) must decode identically here.  The last tests
run Kafka's ``MemoryRecords`` (from the jars ``scripts/kafka-toolchain``
fetches) both ways: Kafka validates and iterates what we build, and we decode
what Kafka's ``MemoryRecordsBuilder`` writes, line for line.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from kafka_tools import KafkaToolchain, kafka_toolchain  # noqa: F401  (pytest fixture)
from stratalog.records import (
    Compression,
    ControlRecordType,
    Header,
    Record,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    compress,
    decode_any,
    decode_records,
    decompress,
    iter_batch_infos,
    legacy_records,
    parse_header,
    parse_legacy_entry,
    peek_batch,
    set_max_timestamp_in_place,
    set_offsets_in_place,
    summarize_records,
    validate_batch,
)

Flat = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def flat(records: list[Record]) -> list[Flat]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple((h.key, h.value) for h in r.headers)) for r in records]


def kafka_python_records(batch: bytes) -> tuple[DefaultRecordBatch, list[Flat]]:
    """Read a v2 batch with kafka-python, checking its CRC first."""
    kb = DefaultRecordBatch(batch)
    assert kb.validate_crc(), "kafka-python computes a different CRC-32C"
    records = [
        (r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers)) for r in kb
    ]
    return kb, records


def compressible_records(n: int, base: int = 0, *, big: bool = False) -> list[Record]:
    """Records with repetitive values (so every codec really compresses), nulls and headers."""
    return [
        Record(
            base + i,
            1_700_000_000_000 + 3 * i,
            None if i % 4 == 1 else f"user-{i % 7}".encode(),
            None if i % 5 == 4 else (b"payload-%d " % i) * (2_000 if big else 8),
            (Header("source", b"stratalog"), Header("empty", b""), Header("nil", None)) if i % 3 == 0 else (),
        )
        for i in range(n)
    ]


CODECS = list(Compression)
KAFKA_PYTHON_CODEC = {c: int(c) for c in Compression}


# --------------------------------------------------------------------------- our batches -> kafka-python

SCENARIOS: dict[str, dict[str, Any]] = {
    "plain": {},
    "log-append-time": {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": 1_800_000_000_000},
    "delete-horizon": {"delete_horizon_ms": 1_900_000_000_000},
    "transactional": {
        "is_transactional": True,
        "producer_id": 123_456_789,
        "producer_epoch": 7,
        "base_sequence": 1_000,
        "partition_leader_epoch": 12,
    },
    "gap-kept-last-offset": {"last_offset_delta": 50, "max_timestamp": 1_700_000_009_999},
}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_batch_we_build_reads_back_in_kafka_python_with_a_valid_crc(codec: Compression, scenario: str) -> None:
    options = SCENARIOS[scenario]
    records = compressible_records(12, base=1_000)
    if scenario == "gap-kept-last-offset":
        records = [r for r in records if r.offset % 3 != 1]
    batch = build_batch(records, base_offset=1_000, compression=codec, **options)
    kb, theirs = kafka_python_records(batch)

    expected = flat(records)
    if scenario == "log-append-time":
        expected = [(o, options["max_timestamp"], k, v, h) for o, _, k, v, h in expected]
    assert theirs == expected
    assert kb.compression_type == int(codec)
    assert kb.base_offset == 1_000 and kb.records_count == len(records)
    assert kb.last_offset == 1_000 + options.get("last_offset_delta", records[-1].offset - 1_000)
    assert kb.timestamp_type == int(options.get("timestamp_type", TimestampType.CREATE_TIME))
    assert kb.max_timestamp == options.get("max_timestamp", max(r.timestamp for r in records))
    assert kb.is_transactional == options.get("is_transactional", False)
    assert kb.producer_id == options.get("producer_id", -1)
    assert kb.producer_epoch == options.get("producer_epoch", -1)
    assert kb.base_sequence == options.get("base_sequence", -1)
    assert kb.leader_epoch == options.get("partition_leader_epoch", -1)
    if scenario == "delete-horizon":
        assert kb.first_timestamp == options["delete_horizon_ms"]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_large_multi_block_batches_read_back_in_kafka_python(codec: Compression) -> None:
    records = compressible_records(40, big=True)  # ~700 KB: many snappy and lz4 blocks
    _, theirs = kafka_python_records(build_batch(records, compression=codec))
    assert theirs == flat(records)


@pytest.mark.parametrize("marker", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_transaction_markers_read_back_in_kafka_python_as_control_records(marker: ControlRecordType) -> None:
    batch = build_end_txn_marker_batch(
        marker, producer_id=42, producer_epoch=3, coordinator_epoch=9, base_offset=77, timestamp=1_234
    )
    kb = DefaultRecordBatch(batch)
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    (control,) = list(kb)
    assert (control.offset, control.timestamp, control.type, control.version) == (77, 1_234, int(marker), 0)
    assert control.commit == (marker is ControlRecordType.COMMIT)
    assert struct.unpack(">hi", control.value) == (0, 9)


def test_an_empty_batch_reads_back_in_kafka_python() -> None:
    batch = build_batch(
        [], base_offset=10, last_offset_delta=3, max_timestamp=99, producer_id=1, producer_epoch=0, base_sequence=0
    )
    kb, theirs = kafka_python_records(batch)
    assert theirs == [] and kb.last_offset == 13 and kb.first_timestamp == -1 and kb.max_timestamp == 99


def test_in_place_offset_and_timestamp_stamping_keeps_kafka_pythons_crc_check_happy() -> None:
    batch = bytearray(build_batch(compressible_records(5), compression=Compression.GZIP))
    set_offsets_in_place(batch, 0, 5_000, 4)
    set_max_timestamp_in_place(batch, 0, TimestampType.LOG_APPEND_TIME, 1_999)
    kb, theirs = kafka_python_records(bytes(batch))
    assert kb.leader_epoch == 4 and kb.timestamp_type == 1
    assert [(o, t) for o, t, *_ in theirs] == [(5_000 + i, 1_999) for i in range(5)]


# --------------------------------------------------------------------------- kafka-python batches -> us


def kafka_python_batch(
    records: list[Record],
    codec: Compression,
    *,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(2, KAFKA_PYTHON_CODEC[codec], transactional, *producer, batch_size=2**30)
    for r in records:
        metadata = builder.append(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        assert metadata is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_kafka_python_batches_decode_identically_and_summaries_agree(codec: Compression) -> None:
    records = compressible_records(30)
    batch = kafka_python_batch(records, codec, producer=(99, 1, 5), transactional=True)
    header = validate_batch(batch)
    assert header.compression is codec  # the data compresses, so kafka-python kept the codec
    producer = (header.producer_id, header.producer_epoch, header.base_sequence, header.is_transactional)
    assert producer == (99, 1, 5, True)
    _, theirs = kafka_python_records(batch)
    assert flat(decode_records(batch)) == theirs == flat(records)
    summary = summarize_records(batch)
    timestamps = [r.timestamp for r in records]
    assert (summary.count, summary.min_timestamp, summary.max_timestamp) == (30, min(timestamps), max(timestamps))
    assert summary.offset_delta_of_max_timestamp == 29
    assert summary.first_keyless_index == 1
    info = peek_batch(batch, 0)
    assert info is not None and (info.base_offset, info.last_offset, info.records_count) == (0, 29, 30)


kp_records = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**41),
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=200) | st.just(b"z" * 5_000),
        st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=10)), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kp_records, st.sampled_from(CODECS))
def test_arbitrary_kafka_python_batches_decode_identically(
    raw: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]], codec: Compression
) -> None:
    records = [Record(i, ts, k, v, tuple(Header(hk, hv) for hk, hv in hs)) for i, (ts, k, v, hs) in enumerate(raw)]
    batch = kafka_python_batch(records, codec)
    _, theirs = kafka_python_records(batch)
    assert flat(decode_records(batch)) == theirs
    summary = summarize_records(batch)
    assert summary.count == len(records)
    assert summary.max_timestamp == max(r.timestamp for r in records)
    # and what we rebuild from the decoded records reads the same in kafka-python
    rebuilt = build_batch(decode_records(batch), compression=codec)
    assert kafka_python_records(rebuilt)[1] == theirs


# --------------------------------------------------------------------------- legacy v0/v1 from kafka-python


def legacy_builder_output(magic: int, codec: Compression, records: list[Record]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, KAFKA_PYTHON_CODEC[codec], batch_size=2**30)
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value) is not None
    return bytes(builder.build())


def kafka_python_legacy(entry: bytes, magic: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """kafka-python's deep iteration of one v0/v1 entry (it reports v0 timestamps as None)."""
    return [(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in LegacyRecordBatch(entry, magic)]


def legacy_plain_records(n: int) -> list[Record]:
    return [
        Record(i, 1_600_000_000_000 + i, None if i % 3 == 2 else b"k%d" % i, None if i == 4 else b"legacy value " * 20)
        for i in range(n)
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_kafka_python_message_sets_decode_entry_by_entry(magic: int) -> None:
    records = legacy_plain_records(6)
    message_set = legacy_builder_output(magic, Compression.NONE, records)
    infos = list(iter_batch_infos(message_set))
    assert [i.magic for i in infos] == [magic] * 6
    decoded: list[Record] = []
    for info in infos:
        entry_bytes = message_set[info.position : info.position + info.size]
        theirs = kafka_python_legacy(entry_bytes, magic)
        _, ours = decode_any(message_set, info.position)
        assert [(r.offset, r.timestamp, r.key, r.value) for r in ours] == theirs
        decoded += ours
    expected_ts = [r.timestamp if magic else -1 for r in records]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (r.offset, ts, r.key, r.value) for r, ts in zip(records, expected_ts)
    ]


@pytest.mark.parametrize(
    ("magic", "codec"),
    [
        (0, Compression.GZIP),
        (0, Compression.SNAPPY),
        # v0 + lz4 needs xxhash in kafka-python (to fake the pre-KIP-57 header
        # checksum); test_records covers reading such frames.
        (1, Compression.GZIP),
        (1, Compression.SNAPPY),
        (1, Compression.LZ4),
    ],
    ids=lambda v: v.kafka_name if isinstance(v, Compression) else f"v{v}",
)
def test_compressed_kafka_python_wrappers_deep_iterate_identically(magic: int, codec: Compression) -> None:
    records = legacy_plain_records(8)
    wrapper = bytearray(legacy_builder_output(magic, codec, records))
    # kafka-python leaves the wrapper offset at 0 for the broker to assign; a
    # broker stamps the last inner offset (outside the CRC), as we do here.
    last = 5_000 + len(records) - 1
    struct.pack_into(">q", wrapper, 0, last if magic == 1 else 0)
    entry = parse_legacy_entry(bytes(wrapper))
    assert entry.compression is codec and entry.magic == magic
    theirs = kafka_python_legacy(bytes(wrapper), magic)
    ours = [(r.offset, r.timestamp, r.key, r.value) for r in legacy_records(entry)]
    assert ours == theirs
    if magic == 1:
        assert [o for o, *_ in ours] == list(range(5_000, 5_000 + len(records)))


def test_a_kafka_python_v1_wrapper_left_at_offset_zero_reads_as_kafka_reads_it() -> None:
    wrapper = legacy_builder_output(1, Compression.GZIP, legacy_plain_records(3))
    # kafka-python itself would compute negative offsets here; Kafka keeps inner offsets as they are.
    assert [r.offset for r in legacy_records(parse_legacy_entry(wrapper))] == [0, 1, 2]


# --------------------------------------------------------------------------- codec streams


@pytest.mark.parametrize("size", [0, 10, 40_000, 200_000])
def test_our_snappy_lz4_gzip_and_zstd_streams_decode_with_kafka_pythons_codecs(size: int) -> None:
    data = (b"stream %d " * 5 % tuple(range(5)) * (size // 40 + 1))[:size]
    if size:  # kafka-python takes a header-only xerial stream (len 16, not > 16) for raw snappy
        assert kcodec.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert kcodec.lz4_decode(compress(Compression.LZ4, data)) == data
    assert kcodec.gzip_decode(compress(Compression.GZIP, data)) == data
    assert kcodec.zstd_decode(compress(Compression.ZSTD, data)) == data


@pytest.mark.parametrize("size", [0, 10, 40_000, 200_000])
def test_kafka_pythons_codec_streams_decompress_here(size: int) -> None:
    data = (b"python %d " * 5 % tuple(range(5)) * (size // 40 + 1))[:size]
    assert decompress(Compression.SNAPPY, kcodec.snappy_encode(data)) == data
    assert decompress(Compression.SNAPPY, kcodec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(Compression.LZ4, kcodec.lz4_encode(data)) == data
    assert decompress(Compression.GZIP, kcodec.gzip_encode(data)) == data
    assert decompress(Compression.ZSTD, kcodec.zstd_encode(data)) == data


# --------------------------------------------------------------------------- Apache Kafka's own code

# A single-file Java program run with the pinned Kafka jars on the class path:
# "read" validates (ensureValid: size + CRC-32C) and iterates every batch of the
# given files with MemoryRecords, printing one line per batch and per record;
# "write" builds batches with MemoryRecordsBuilder (every codec; CreateTime,
# LogAppendTime, transactional, delete horizon) plus a COMMIT marker.
# Written against org.apache.kafka.common.record.internal (Kafka 4.x).
KAFKA_RECORDS_CHECK = r"""
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.*;
import org.apache.kafka.common.utils.ByteBufferOutputStream;

public class KafkaRecordsCheck {
    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder("x");
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }

    static String hex(byte[] b) { return b == null ? "-" : hex(ByteBuffer.wrap(b)); }

    static void read(Path file) throws Exception {
        MemoryRecords recs = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(file)));
        for (MutableRecordBatch batch : recs.batches()) {
            batch.ensureValid();
            System.out.println(String.join(" ", "B", "" + batch.baseOffset(), "" + batch.lastOffset(),
                "" + batch.countOrNull(), batch.compressionType().name, "" + batch.timestampType(),
                "" + batch.maxTimestamp(), "" + batch.producerId(), "" + batch.producerEpoch(),
                "" + batch.baseSequence(), "" + batch.lastSequence(), "" + batch.isTransactional(),
                "" + batch.isControlBatch(), "" + batch.deleteHorizonMs(), "" + batch.partitionLeaderEpoch()));
            for (org.apache.kafka.common.record.internal.Record r : batch) {
                StringBuilder sb = new StringBuilder(
                    "R " + r.offset() + " " + r.timestamp() + " " + hex(r.key()) + " " + hex(r.value()));
                for (Header h : r.headers())
                    sb.append(" ").append(hex(h.key().getBytes("UTF-8"))).append("=").append(hex(h.value()));
                System.out.println(sb);
            }
        }
    }

    static Compression codec(String name) {
        switch (name) {
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: return Compression.NONE;
        }
    }

    static void write(Path dir) throws Exception {
        Random rnd = new Random(42);
        for (String name : new String[]{"none", "gzip", "snappy", "lz4", "zstd"}) {
            ByteBuffer out = ByteBuffer.allocate(8 << 20);
            long offset = 0;
            for (int variant = 0; variant < 4; variant++) {
                // 0: CreateTime, 1: LogAppendTime, 2: transactional producer, 3: delete horizon
                TimestampType tt = variant == 1 ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
                long appendTime = variant == 1 ? 1_800_000_000_000L : RecordBatch.NO_TIMESTAMP;
                long pid = variant == 2 ? 4242L : -1L;
                short epoch = (short) (variant == 2 ? 3 : -1);
                int seq = variant == 2 ? 17 : -1;
                long horizon = variant == 3 ? 1_900_000_000_000L : RecordBatch.NO_TIMESTAMP;
                ByteBufferOutputStream bbos = new ByteBufferOutputStream(out);
                MemoryRecordsBuilder b = new MemoryRecordsBuilder(bbos, RecordBatch.MAGIC_VALUE_V2, codec(name), tt,
                    offset, appendTime, pid, epoch, seq, variant == 2, false, 5, Integer.MAX_VALUE, horizon);
                int n = variant == 0 ? 300 : 7;
                for (int i = 0; i < n; i++) {
                    byte[] key = i % 4 == 1 ? null : ("key-" + (i % 11)).getBytes("UTF-8");
                    byte[] value = i % 5 == 4 ? null : new byte[rnd.nextInt(i % 3 == 0 ? 3000 : 40)];
                    if (value != null)
                        for (int j = 0; j < value.length; j++)
                            value[j] = (byte) (j % 7 == 0 ? rnd.nextInt() : 'a' + j % 13);
                    Header[] headers = i % 3 != 0 ? new Header[0] : new Header[]{
                        new RecordHeader("h\u00e9", new byte[]{1, 2}), new RecordHeader("n", (byte[]) null)};
                    long ts = 1_700_000_000_000L + rnd.nextInt(100000) - 500;
                    b.appendWithOffset(offset + i * (variant == 0 ? 1 : 2), ts, key, value, headers);
                }
                MemoryRecords m = b.build();
                offset = m.batches().iterator().next().lastOffset() + 1;
                out = bbos.buffer();
            }
            MemoryRecords marker = MemoryRecords.withEndTransactionMarker(offset, 1_700_000_123_456L, 5, 4242L,
                (short) 3, new EndTransactionMarker(ControlRecordType.COMMIT, 9));
            out.put(marker.buffer());
            out.flip();
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            Files.write(dir.resolve("kafka-" + name + ".bin"), bytes);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("read")) {
            for (int i = 1; i < args.length; i++) {
                System.out.println("F " + args[i]);
                read(Paths.get(args[i]));
            }
        } else {
            write(Paths.get(args[1]));
        }
    }
}
"""


@pytest.fixture(scope="session")
def kafka_records_check(kafka_toolchain: KafkaToolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("kafka-java") / "KafkaRecordsCheck.java"
    source.write_text(KAFKA_RECORDS_CHECK)
    return source


def kafka_reads(toolchain: KafkaToolchain, program: Path, files: list[Path]) -> list[str]:
    result = toolchain.java(str(program), ["read", *map(str, files)])
    assert result.returncode == 0, result.describe()
    return result.stdout.splitlines()


def our_reading(path: Path) -> list[str]:
    """Our decoding of a file of batches, in the Java program's line format."""
    data = path.read_bytes()
    lines = [f"F {path}"]
    infos = list(iter_batch_infos(data))
    assert sum(i.size for i in infos) == len(data)
    for info in infos:
        h = validate_batch(data, info.position)
        horizon = "OptionalLong.empty" if h.delete_horizon_ms is None else f"OptionalLong[{h.delete_horizon_ms}]"
        lines.append(
            f"B {h.base_offset} {h.last_offset} {h.records_count} {h.compression.kafka_name} "
            f"{h.timestamp_type.kafka_name} {h.max_timestamp} {h.producer_id} {h.producer_epoch} {h.base_sequence} "
            f"{h.last_sequence} {str(h.is_transactional).lower()} {str(h.is_control).lower()} {horizon} "
            f"{h.partition_leader_epoch}"
        )
        for r in decode_records(data, info.position):
            line = f"R {r.offset} {r.timestamp} {_hex(r.key)} {_hex(r.value)}"
            line += "".join(f" {_hex(h.key.encode())}={_hex(h.value)}" for h in r.headers)
            lines.append(line)
        assert summarize_records(data, info.position).count == h.records_count
    return lines


def _hex(b: bytes | None) -> str:
    return "-" if b is None else "x" + b.hex()


def _varied_records(rnd: random.Random, n: int, base: int, *, big: bool) -> list[Record]:
    records, offset = [], base - 1
    for i in range(n):
        offset += 1 + i % 2  # gaps, as after compaction
        size = rnd.randrange(70_000 if big else 50)
        value = None if i % 5 == 4 else bytes(rnd.randrange(256) if j % 7 == 0 else 97 + j % 13 for j in range(size))
        records.append(
            Record(
                offset,
                1_700_000_000_000 + rnd.randrange(-1_000, 100_000),
                None if i % 4 == 1 else b"key-%d" % i,
                value,
                (Header("h\u00e9", b"\x01\x02"), Header("n", None)) if i % 3 == 0 else (),
            )
        )
    return records


def test_kafka_validates_and_reads_every_batch_we_build_identically(
    kafka_toolchain: KafkaToolchain, kafka_records_check: Path, tmp_path: Path  # noqa: F811
) -> None:
    rnd = random.Random(7)
    files = []
    for codec in Compression:
        parts, offset = [], 0
        variants: list[dict[str, Any]] = [
            {},
            {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": 1_800_000_000_000},
            {"producer_id": 4242, "producer_epoch": 3, "base_sequence": 2**31 - 5, "is_transactional": True},
            {"delete_horizon_ms": 1_900_000_000_000},
            {"last_offset_delta": 200, "max_timestamp": 1_700_000_200_000},
            {},  # large values: many snappy/lz4 blocks
        ]
        for epoch, options in enumerate(variants):
            records = _varied_records(rnd, 12 if epoch == 5 else 40, offset, big=epoch == 5)
            batch = build_batch(records, base_offset=offset, compression=codec, partition_leader_epoch=epoch, **options)
            parts.append(batch)
            offset = parse_header(batch).next_offset
        producer = {"producer_id": 1, "producer_epoch": 0, "base_sequence": 0}
        empty = build_batch([], base_offset=offset, last_offset_delta=3, max_timestamp=5, **producer)
        parts.append(empty)
        marker = build_end_txn_marker_batch(
            ControlRecordType.ABORT,
            producer_id=4242,
            producer_epoch=3,
            coordinator_epoch=9,
            base_offset=offset + 4,
            timestamp=1,
        )
        parts.append(marker)
        path = tmp_path / f"ours-{codec.kafka_name}.bin"
        path.write_bytes(b"".join(parts))
        files.append(path)
    assert kafka_reads(kafka_toolchain, kafka_records_check, files) == [line for f in files for line in our_reading(f)]


def test_batches_written_by_kafka_decode_identically_here(
    kafka_toolchain: KafkaToolchain, kafka_records_check: Path, tmp_path: Path  # noqa: F811
) -> None:
    result = kafka_toolchain.java(str(kafka_records_check), ["write", str(tmp_path)])
    assert result.returncode == 0, result.describe()
    files = [tmp_path / f"kafka-{codec.kafka_name}.bin" for codec in Compression]
    theirs = kafka_reads(kafka_toolchain, kafka_records_check, files)
    assert any(line.startswith("B ") and " lz4 LogAppendTime " in line for line in theirs)
    assert [line for f in files for line in our_reading(f)] == theirs
