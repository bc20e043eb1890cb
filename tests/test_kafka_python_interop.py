"""What stratalog puts on disk and takes in, checked by kafka-python, an independent v2 implementation.

Two directions:

* every batch stratalog writes into a segment file - after offset assignment, a
  topic-level recompression or LogAppendTime stamping, in every codec - is read
  back from the ``.log`` bytes by kafka-python's ``DefaultRecordBatch`` with a
  valid CRC and exactly the records that were appended;
* batches kafka-python's ``DefaultRecordBatchBuilder`` writes go in through
  ``stratalog produce --batch-file`` and come out of ``stratalog consume``
  unchanged, at contiguous offsets; a damaged batch file is refused whole.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from stratalog.storage.log import Log
from stratalog.records import Compression, Header, Record, build_batch, iter_batch_infos

T0 = 1_700_000_000_000  # the conftest clock's "now"
CODECS = list(Compression)
CODEC_IDS = [c.kafka_name for c in CODECS]
KP_CODEC = {Compression.NONE: 0, Compression.GZIP: 1, Compression.SNAPPY: 2, Compression.LZ4: 3,
            Compression.ZSTD: 4}


# -- what a kafka-python reader sees in our segment files ----------------------------------------

def kafka_python_view(log_dir: Path) -> list[tuple[DefaultRecordBatch, list]]:
    """Every batch of every ``.log`` in the partition directory, parsed by kafka-python."""
    out = []
    for path in sorted(log_dir.glob("*.log")):
        data = path.read_bytes()
        infos = list(iter_batch_infos(data))
        assert sum(i.size for i in infos) == len(data), f"{path.name} has bytes outside whole batches"
        for info in infos:
            batch = DefaultRecordBatch(data[info.position : info.position + info.size])
            assert batch.magic == 2
            assert batch.validate_crc(), f"{path.name}: batch at byte {info.position} fails kafka-python's CRC check"
            out.append((batch, list(batch)))
    return out


def as_tuples(records: list) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]


def sample_records(n: int, seed: int) -> list[Record]:
    """Records with null and empty keys and values, repeated and null-valued headers, shuffled timestamps."""
    out = []
    for i in range(n):
        key = None if (i + seed) % 4 == 0 else (b"" if (i + seed) % 7 == 0 else b"key-%d" % (i % 3))
        value = None if (i + seed) % 5 == 0 else (b"value %d " % i) * (i % 4 + 1)
        headers: tuple[Header, ...] = ()
        if i % 3 == 1:
            headers = (Header("trace", b"t%d" % i), Header("trace", None), Header("ünï", b"\xff\x00"))
        out.append(Record(i, T0 - 1000 + (i * 37 + seed) % 50, key, value, headers))
    return out


def expected_tuples(records: list[Record], first_offset: int, timestamp: int | None = None) -> list[tuple]:
    return [(first_offset + r.offset, r.timestamp if timestamp is None else timestamp, r.key, r.value,
             [(h.key, h.value) for h in r.headers]) for r in records]


def append_all(log: Log, batches: list[list[Record]], codec: Compression) -> list[tuple]:
    expected: list[tuple] = []
    for records in batches:
        info = log.append(build_batch(records, compression=codec))
        expected += expected_tuples(records, info.first_offset,
                                    None if info.log_append_time < 0 else info.log_append_time)
    return expected


BATCHES = [sample_records(1, 0), sample_records(7, 1), sample_records(3, 2), sample_records(12, 3),
           sample_records(2, 4)]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_every_batch_in_our_segments_reads_in_kafka_python_with_its_assigned_offsets(make_log, codec):
    log = make_log(segment_bytes=700)
    expected = append_all(log, BATCHES, codec)
    log.flush()
    view = kafka_python_view(log.dir)
    assert len(log.segments) > 1
    assert sum((as_tuples(r) for _, r in view), []) == expected
    first = 0
    for batch, records in view:
        assert batch.base_offset == first and batch.records_count == len(records)
        assert batch.last_offset == records[-1].offset
        assert batch.compression_type == KP_CODEC[codec]
        assert batch.timestamp_type == 0
        assert batch.max_timestamp == max(r.timestamp for r in records)
        assert batch.producer_id == -1 and batch.base_sequence == -1 and not batch.is_transactional
        first = batch.next_offset


@pytest.mark.parametrize("topic_codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("producer_codec", [Compression.NONE, Compression.LZ4], ids=["from-none", "from-lz4"])
def test_a_topic_compression_type_rewrites_batches_kafka_python_reads_in_the_topic_codec(
        make_log, producer_codec, topic_codec):
    # Kafka's topic setting spells "no codec" as 'uncompressed'.
    log = make_log(compression_type="uncompressed" if topic_codec == Compression.NONE else topic_codec.kafka_name)
    expected = append_all(log, BATCHES, producer_codec)
    view = kafka_python_view(log.dir)
    assert sum((as_tuples(r) for _, r in view), []) == expected
    assert {batch.compression_type for batch, _ in view} == {KP_CODEC[topic_codec]}
    for batch, records in view:
        assert batch.max_timestamp == max(r.timestamp for r in records)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_log_append_time_batches_read_in_kafka_python_with_the_broker_time(make_log, clock, codec):
    log = make_log(message_timestamp_type="LogAppendTime")
    expected = []
    for step, records in enumerate(BATCHES):
        clock.now = T0 + 1000 * step
        info = log.append(build_batch(records, compression=codec))
        assert info.log_append_time == clock.now
        expected += expected_tuples(records, info.first_offset, timestamp=clock.now)
    view = kafka_python_view(log.dir)
    assert sum((as_tuples(r) for _, r in view), []) == expected
    for step, (batch, _) in enumerate(view):
        assert batch.timestamp_type == 1  # LogAppendTime
        assert batch.max_timestamp == T0 + 1000 * step


def test_segments_rewritten_by_a_clean_reopen_and_a_recovery_still_read_in_kafka_python(make_log):
    log = make_log(segment_bytes=600)
    expected = append_all(log, BATCHES[:3], Compression.ZSTD)
    log.close()
    log = make_log(segment_bytes=600, clean=True)
    expected += append_all(log, BATCHES[3:], Compression.SNAPPY)
    log.close()
    recovered = make_log(segment_bytes=600, recovery_point=0)
    assert [r.offset for r in recovered.read_records(0)] == [t[0] for t in expected]
    assert sum((as_tuples(r) for _, r in kafka_python_view(recovered.dir)), []) == expected


# -- kafka-python's batches through the command line -------------------------------------------

def cli(*args: str | Path, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stratalog.cli", *map(str, args)], input=input,
                          capture_output=True, text=True, timeout=120)


def ok(*args: str | Path) -> str:
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def kp_batch(codec: Compression, records: list[tuple[int, bytes | None, bytes | None, list]]) -> bytes:
    """A producer batch from kafka-python's builder: (timestamp, key, value, headers) per record."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODEC[codec], is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    data = bytes(builder.build())
    # kafka-python falls back to no compression when it does not pay: make sure the codec is really used.
    assert int.from_bytes(data[21:23], "big") & 0x07 == KP_CODEC[codec], "kafka-python did not compress this batch"
    return data


def kp_records(n: int, tag: str) -> list[tuple[int, bytes | None, bytes | None, list]]:
    out = []
    for i in range(n):
        key = None if i % 4 == 3 else f"{tag}-key-{i % 3}".encode()
        value = None if i % 5 == 4 else (f"{tag} value {i} " * 20).encode() + bytes([0x80 + i % 100])
        headers = [("h", f"{i}".encode()), ("h", None), ("bin", b"\xff\xfe")] if i % 2 else []
        out.append((T0 + (i * 13) % 40 - 20, key, value, headers))
    return out


def from_json(record: dict) -> tuple:
    def raw(name: str) -> bytes | None:
        if f"{name}_b64" in record:
            return base64.b64decode(record[f"{name}_b64"])
        return None if record[name] is None else record[name].encode()

    def header_value(v: object) -> bytes | None:
        if v is None:
            return None
        return base64.b64decode(v["b64"]) if isinstance(v, dict) else str(v).encode()

    pairs = record["headers"].items() if isinstance(record["headers"], dict) else record["headers"]
    return (record["offset"], record["timestamp"], raw("key"), raw("value"), [(k, header_value(v)) for k, v in pairs])


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    ok("topics", "create", "--data-dir", directory, "--topic", "in")
    return directory


def test_kafka_python_batches_produced_from_files_consume_back_identically_at_contiguous_offsets(tmp_path, data):
    expected: list[tuple] = []
    next_offset = 0
    for n, codec in enumerate(CODECS):
        records = kp_records(3 + 2 * n, codec.kafka_name)
        path = tmp_path / f"batch-{codec.kafka_name}.bin"
        path.write_bytes(kp_batch(codec, records))
        [appended] = [json.loads(line) for line in ok("produce", "--data-dir", data, "--topic", "in",
                                                      "--batch-file", path).splitlines()]
        assert (appended["baseOffset"], appended["lastOffset"]) == (next_offset, next_offset + len(records) - 1)
        expected += [(next_offset + i, ts, key, value, headers)
                     for i, (ts, key, value, headers) in enumerate(records)]
        next_offset += len(records)
    consumed = [json.loads(line) for line in ok("consume", "--data-dir", data, "--topic", "in").splitlines()]
    assert [from_json(r) for r in consumed] == expected
    assert {r["timestampType"] for r in consumed} == {"CreateTime"}
    # And what went to disk is still what kafka-python reads, now at the assigned offsets.
    assert sum((as_tuples(r) for _, r in kafka_python_view(data / "in-0")), []) == expected


def test_a_batch_file_holding_several_kafka_python_batches_appends_them_in_order(tmp_path, data):
    parts = [kp_records(2, "a"), kp_records(4, "b"), kp_records(1, "c")]
    path = tmp_path / "three.bin"
    path.write_bytes(b"".join(kp_batch(Compression.GZIP, p) for p in parts))
    out = [json.loads(line) for line in ok("produce", "--data-dir", data, "--topic", "in",
                                           "--batch-file", path).splitlines()]
    assert [(o["baseOffset"], o["lastOffset"]) for o in out] == [(0, 1), (2, 5), (6, 6)]
    consumed = [json.loads(line) for line in ok("consume", "--data-dir", data, "--topic", "in").splitlines()]
    flat = [r for p in parts for r in p]
    assert [from_json(r)[1:] for r in consumed] == [(ts, k, v, h) for ts, k, v, h in flat]


def _refused_untouched(data: Path, path: Path) -> str:
    ok("produce", "--data-dir", data, "--topic", "in", "--batch-file", _write(path.with_suffix(".ok"),
                                                                            kp_batch(Compression.NONE, kp_records(2, "ok"))))
    before = tree(data)
    result = cli("produce", "--data-dir", data, "--topic", "in", "--batch-file", path)
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: CORRUPT_MESSAGE: ")
    assert tree(data) == before, "a refused batch file changed the log"
    return line


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _names_byte(line: str, *positions: int) -> bool:
    return any(re.search(rf"\bbyte {p}\b", line) for p in positions)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_a_kafka_python_batch_with_a_flipped_byte_is_refused_naming_its_position(tmp_path, data, codec):
    damaged = bytearray(kp_batch(codec, kp_records(4, "x")))
    damaged[len(damaged) - 3] ^= 0x01  # inside the (compressed) records, covered by the CRC
    line = _refused_untouched(data, _write(tmp_path / "bad.bin", bytes(damaged)))
    assert _names_byte(line, 0, 17), line  # the batch start or its CRC field
    assert "crc" in line.lower()


def test_a_damaged_second_batch_refuses_the_whole_file_naming_its_position_in_the_file(tmp_path, data):
    first = kp_batch(Compression.NONE, kp_records(3, "first"))
    second = bytearray(kp_batch(Compression.NONE, kp_records(3, "second")))
    second[-2] ^= 0x40
    line = _refused_untouched(data, _write(tmp_path / "bad.bin", first + bytes(second)))
    assert _names_byte(line, len(first), len(first) + 17), line


def test_a_batch_file_with_a_wrong_magic_in_its_second_batch_is_refused_before_any_append(tmp_path, data):
    first = kp_batch(Compression.NONE, kp_records(3, "first"))
    second = bytearray(kp_batch(Compression.NONE, kp_records(3, "second")))
    second[16] = 7  # magic
    line = _refused_untouched(data, _write(tmp_path / "bad.bin", first + bytes(second)))
    assert _names_byte(line, len(first) + 16), line


def test_a_batch_file_cut_short_is_refused_naming_where_the_partial_batch_starts(tmp_path, data):
    first = kp_batch(Compression.NONE, kp_records(3, "first"))
    second = kp_batch(Compression.NONE, kp_records(3, "second"))
    line = _refused_untouched(data, _write(tmp_path / "short.bin", first + second[:-10]))
    assert _names_byte(line, len(first)), line
