"""``stratalog dump-log`` prints segment files exactly as Kafka's kafka-dump-log.sh (DumpLogSegments) does.

Data is written through the engine into real directories; expected lines are
built from what was appended plus what the bytes on disk say (positions, sizes,
CRCs recomputed with CRC-32C), never from stratalog's own dump code. The last
test runs Apache Kafka's DumpLogSegments itself on the same files and demands
identical output.
"""

from __future__ import annotations

import gzip
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka_tools import KafkaToolchain, kafka_toolchain  # noqa: F401  (fixture)

from stratalog.cli import main
from stratalog.storage.log_manager import open_log_manager
from stratalog.records import (
    Compression,
    ControlRecordType,
    Header,
    Record,
    build_batch,
    build_end_txn_marker_batch,
)
from stratalog.broker.topics import TopicAdmin

T0 = 1_700_000_000_000
SEGMENT = "00000000000000000000"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["dump-log", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def on_disk_batches(log: Path) -> list[tuple[int, int, int]]:
    """(position, size, crc) of each batch, read straight from the bytes; each CRC is checked here."""
    data = log.read_bytes()
    found = []
    position = 0
    while position + 12 <= len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        if position + size > len(data):
            break
        stored = int.from_bytes(data[position + 17 : position + 21], "big")
        assert crc32c(data[position + 21 : position + size]) == stored
        found.append((position, size, stored))
        position += size
    return found


def codec_records(i: int) -> list[Record]:
    """Three records per batch: headers (one null-valued), a null key, a tombstone (null value)."""
    t = T0 + 10 * i
    return [
        Record(0, t, f"k{i}".encode(), f"value-{i}".encode(), (Header("h1", b"x"), Header("h2", None))),
        Record(1, t + 5, None, b"nokey"),
        Record(2, t + 3, b"tomb", None),
    ]


@pytest.fixture
def codecs_dir(tmp_path: Path) -> Path:
    """Partition t-0: one batch per codec (offsets 3i..3i+2), then an idempotent batch and a COMMIT marker."""
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("t", 1, {"index.interval.bytes": "1"})
        log = manager.get_log("t", 0)
        for i, codec in enumerate(CODECS):
            log.append(build_batch(codec_records(i), compression=Compression.from_name(codec)))
        log.append(build_batch([Record(0, T0 + 100, b"p", b"q"), Record(1, T0 + 101, b"p", b"r")],
                               producer_id=7, producer_epoch=2, base_sequence=5))
        marker = build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=2,
                                            coordinator_epoch=0, base_offset=log.log_end_offset + 3,
                                            timestamp=T0 + 200)
        log.append_raw(marker)
    return tmp_path / "t-0"


def batch_line(base: int, last: int, count: int, position: int, max_ts: int, size: int, codec: str, crc: int, *,
               base_seq: int = -1, last_seq: int = -1, pid: int = -1, epoch: int = -1, leader_epoch: int = 0,
               transactional: bool = False, control: bool = False, ts_type: str = "CreateTime") -> str:
    return (f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {base_seq} lastSequence: {last_seq} "
            f"producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: {leader_epoch} "
            f"isTransactional: {str(transactional).lower()} isControl: {str(control).lower()} "
            f"deleteHorizonMs: OptionalLong.empty position: {position} {ts_type}: {max_ts} size: {size} magic: 2 "
            f"compresscodec: {codec} crc: {crc} isvalid: true")


def expected_batch_lines(directory: Path) -> list[str]:
    batches = on_disk_batches(directory / f"{SEGMENT}.log")
    lines = [batch_line(3 * i, 3 * i + 2, 3, pos, T0 + 10 * i + 5, size, codec, crc)
             for i, (codec, (pos, size, crc)) in enumerate(zip(CODECS, batches))]
    pos, size, crc = batches[5]
    lines.append(batch_line(15, 16, 2, pos, T0 + 101, size, "none", crc, base_seq=5, last_seq=6, pid=7, epoch=2))
    pos, size, crc = batches[6]
    lines.append(batch_line(20, 20, 1, pos, T0 + 200, size, "none", crc, pid=7, epoch=2, leader_epoch=-1,
                            transactional=True, control=True))
    return lines


def expected_record_lines(i: int, *, print_data: bool) -> list[str]:
    t, base = T0 + 10 * i, 3 * i
    lines = [
        f"| offset: {base} CreateTime: {t} keySize: 2 valueSize: 7 sequence: -1 headerKeys: [h1,h2]",
        f"| offset: {base + 1} CreateTime: {t + 5} keySize: -1 valueSize: 5 sequence: -1 headerKeys: []",
        f"| offset: {base + 2} CreateTime: {t + 3} keySize: 4 valueSize: -1 sequence: -1 headerKeys: []",
    ]
    if print_data:
        lines[0] += f" key: k{i} payload: value-{i}"
        lines[1] += " payload: nokey"
        lines[2] += " key: tomb"
    return lines


def test_a_segment_dump_prints_kafkas_batch_line_for_every_codec_producer_batch_and_marker(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    code, out, err = dump(capsys, "--files", str(log))
    assert code == 0 and err == []
    assert out == [f"Dumping {log}", "Log starting offset: 0", *expected_batch_lines(codecs_dir)]


def test_deep_iteration_prints_every_record_with_its_sequence_headers_and_the_end_txn_marker(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    code, out, err = dump(capsys, "--files", str(log), "--deep-iteration")
    batches = expected_batch_lines(codecs_dir)
    expected = [f"Dumping {log}", "Log starting offset: 0"]
    for i in range(len(CODECS)):
        expected += [batches[i], *expected_record_lines(i, print_data=False)]
    expected += [batches[5],
                 f"| offset: 15 CreateTime: {T0 + 100} keySize: 1 valueSize: 1 sequence: 5 headerKeys: []",
                 f"| offset: 16 CreateTime: {T0 + 101} keySize: 1 valueSize: 1 sequence: 6 headerKeys: []",
                 batches[6],
                 f"| offset: 20 CreateTime: {T0 + 200} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                 "endTxnMarker: COMMIT coordinatorEpoch: 0"]
    assert code == 0
    assert out == expected
    # The marker sits 3 offsets past the last data record: Kafka's stderr report of the gap.
    assert err == [f"Non-consecutive offsets in {log.resolve()}", "  16 is followed by 20"]


def test_print_data_log_adds_keys_and_payloads_but_not_for_nulls_or_control_records(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    code, out, _ = dump(capsys, "--files", str(log), "--print-data-log")
    assert code == 0
    for i in range(len(CODECS)):
        start = out.index(expected_batch_lines(codecs_dir)[i]) + 1
        assert out[start : start + 3] == expected_record_lines(i, print_data=True)
    assert out[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")  # no key:/payload: on a marker


def test_skip_record_metadata_prints_only_keys_and_payloads(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    _, out, _ = dump(capsys, "--files", str(log), "--print-data-log", "--skip-record-metadata")
    assert out[3:6] == ["| key: k0 payload: value-0", "| payload: nokey", "| key: tomb"]


def test_log_append_time_batches_and_their_records_print_LogAppendTime(tmp_path, capsys):
    with open_log_manager([tmp_path]) as manager:
        TopicAdmin(manager).create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
        manager.get_log("lat", 0).append(build_batch([Record(0, T0, b"a", b"b"), Record(1, T0 + 1, b"c", b"d")]))
    log = tmp_path / "lat-0" / f"{SEGMENT}.log"
    append_time = struct.unpack(">q", log.read_bytes()[35:43])[0]  # the broker's stamp in maxTimestamp
    [(pos, size, crc)] = on_disk_batches(log)
    code, out, _ = dump(capsys, "--files", str(log), "--print-data-log")
    assert code == 0
    assert out[2:] == [
        batch_line(0, 1, 2, pos, append_time, size, "none", crc, ts_type="LogAppendTime"),
        f"| offset: 0 LogAppendTime: {append_time} keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: a payload: b",
        f"| offset: 1 LogAppendTime: {append_time} keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: c payload: d",
    ]


def index_entries(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def test_the_index_and_time_index_dumps_list_their_entries(codecs_dir, capsys):
    index, time_index = codecs_dir / f"{SEGMENT}.index", codecs_dir / f"{SEGMENT}.timeindex"
    entries, time_entries = index_entries(index), time_index_entries(time_index)
    assert len(entries) == 6 and len(time_entries) == 6  # one per append after the first
    code, out, err = dump(capsys, "--files", f"{index},{time_index}")
    assert code == 0 and err == []
    assert out == [f"Dumping {index}", *[f"offset: {o} position: {p}" for o, p in entries],
                   f"Dumping {time_index}", *[f"timestamp: {t} offset: {o}" for t, o in time_entries]]


def test_an_untrimmed_index_is_read_up_to_its_zero_tail(codecs_dir, capsys):
    index = codecs_dir / f"{SEGMENT}.index"
    entries = index_entries(index)
    with open(index, "ab") as file:
        file.write(bytes(8 * 100))  # what a crash leaves of a preallocated index
    code, out, err = dump(capsys, "--files", str(index))
    assert code == 0 and err == []
    assert out[1:] == [f"offset: {o} position: {p}" for o, p in entries]


def test_an_index_entry_pointing_inside_a_batch_is_a_mismatch_and_verify_index_only_prints_no_entries(
        codecs_dir, capsys):
    index = codecs_dir / f"{SEGMENT}.index"
    data = bytearray(index.read_bytes())
    offset, position = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, offset, position + 10)
    index.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--files", str(index), "--verify-index-only")
    assert code == 0  # as Kafka: mismatches are reported, not failures
    assert out == [f"Dumping {index}"]
    assert err[0] == f"Mismatches in :{index.resolve()}"
    assert err[1].startswith(f"  Index offset: {offset}, log offset: ")


def test_a_time_index_timestamp_that_is_not_its_batchs_max_is_a_timestamp_mismatch(codecs_dir, capsys):
    time_index = codecs_dir / f"{SEGMENT}.timeindex"
    data = bytearray(time_index.read_bytes())
    real, offset = struct.unpack_from(">qi", data, 0)
    struct.pack_into(">q", data, 0, real + 1)
    time_index.write_bytes(bytes(data))
    code, _, err = dump(capsys, "--files", str(time_index), "--verify-index-only")
    assert code == 0
    assert err == [f"Found timestamp mismatch in :{time_index.resolve()}",
                   f"  Index timestamp: {real + 1}, log timestamp: {real}"]


def test_index_sanity_check_passes_a_good_index_and_names_a_bad_one_with_kafkas_message(codecs_dir, capsys):
    index = codecs_dir / f"{SEGMENT}.index"
    code, out, _ = dump(capsys, "--files", str(index), "--index-sanity-check")
    assert (code, out) == (0, [f"Dumping {index}", f"{index} passed sanity check."])
    with open(index, "ab") as file:
        file.write(b"\x01\x02\x03")
    code, out, err = dump(capsys, "--files", str(index), "--index-sanity-check")
    assert code == 1 and out == [f"Dumping {index}"]
    assert err == [f"error: CORRUPT_MESSAGE: Index file {index.resolve()} is corrupt, found {8 * 6 + 3} bytes "
                   "which is neither positive nor a multiple of 8"]


def test_trailing_garbage_is_counted_as_invalid_bytes_at_the_end(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    with open(log, "ab") as file:
        file.write(b"\x00" * 7)
    code, out, _ = dump(capsys, "--files", str(log))
    assert code == 0
    assert out[-1] == f"Found 7 invalid bytes at the end of {SEGMENT}.log"


def test_a_flipped_byte_shows_as_isvalid_false_and_the_dump_goes_on(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    data = bytearray(log.read_bytes())
    position, size, crc = on_disk_batches(log)[1]
    data[position + 70] ^= 0xFF  # inside the CRC-covered part of the gzip batch
    log.write_bytes(bytes(data))
    code, out, _ = dump(capsys, "--files", str(log))
    assert code == 0
    assert out[3].startswith("baseOffset: 3 lastOffset: 5 count: 3 ")
    assert out[3].endswith(f"position: {position} CreateTime: {T0 + 15} size: {size} magic: 2 compresscodec: gzip "
                           f"crc: {crc} isvalid: false")
    assert len(out) == 2 + 7  # every batch still listed


def test_bytes_that_cannot_be_a_batch_stop_that_file_with_kafkas_message_and_exit_1(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    data = bytearray(log.read_bytes())
    position = on_disk_batches(log)[2][0]
    data[position + 8 : position + 12] = bytes(4)  # size field 0
    log.write_bytes(bytes(data))
    code, out, err = dump(capsys, "--files", f"{log},{codecs_dir / (SEGMENT + '.index')}")
    assert code == 1
    assert len([line for line in out if line.startswith("baseOffset:")]) == 2
    assert err[0] == (f"error: CORRUPT_MESSAGE: corrupt record batch at {log} at byte {position + 8}: "
                      "Found record size 0 smaller than minimum record overhead (14)")
    # The next file is still dumped; its entry for the damaged batch reads no batch there (-1).
    assert f"Dumping {codecs_dir / (SEGMENT + '.index')}" in out
    assert err[1] == f"Mismatches in :{(codecs_dir / (SEGMENT + '.index')).resolve()}"
    assert "  Index offset: 8, log offset: -1" in err


def test_max_bytes_stops_at_the_last_whole_batch_and_counts_no_invalid_bytes(codecs_dir, capsys):
    log = codecs_dir / f"{SEGMENT}.log"
    first, second = on_disk_batches(log)[:2]
    code, out, _ = dump(capsys, "--files", str(log), "--max-bytes", str(second[0] + second[1] - 1))
    assert code == 0
    assert out[2:] == expected_batch_lines(codecs_dir)[:1]


def legacy_entry(offset: int, magic: int, key: bytes | None, value: bytes | None, timestamp: int = -1,
                 attributes: int = 0) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_legacy_v0_and_v1_messages_print_as_kafka_prints_them(tmp_path, capsys):
    inner = legacy_entry(0, 1, b"a", b"1", 1000) + legacy_entry(1, 1, None, b"2", 1001)
    v0 = legacy_entry(0, 0, b"k", b"v")
    v1 = legacy_entry(1, 1, b"k", b"v", 1000)
    wrapper = legacy_entry(3, 1, None, gzip.compress(inner), 1001, attributes=1)
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(v0 + v1 + wrapper)
    crc = [int.from_bytes(e[12:16], "big") for e in (v0, v1, wrapper)]
    second = len(legacy_entry(0, 1, b"a", b"1", 1000))
    inner_crc = [int.from_bytes(inner[12:16], "big"), int.from_bytes(inner[second + 12 : second + 16], "big")]
    code, out, _ = dump(capsys, "--files", str(log), "--print-data-log")
    assert code == 0
    assert out[2:] == [
        f"offset: 0 position: 0 NoTimestampType: -1 size: {len(v0)} magic: 0 compresscodec: none crc: {crc[0]} "
        "isvalid: true",
        f"| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: {crc[0]} key: k payload: v",
        f"offset: 1 position: {len(v0)} CreateTime: 1000 size: {len(v1)} magic: 1 compresscodec: none crc: {crc[1]} "
        "isvalid: true",
        f"| offset: 1 CreateTime: 1000 keySize: 1 valueSize: 1 isValid: true crc: {crc[1]} key: k payload: v",
        f"offset: 3 position: {len(v0) + len(v1)} CreateTime: 1001 size: {len(wrapper)} magic: 1 "
        f"compresscodec: gzip crc: {crc[2]} isvalid: true",
        f"| offset: 2 CreateTime: 1000 keySize: 1 valueSize: 1 isValid: true crc: {inner_crc[0]} key: a payload: 1",
        f"| offset: 3 CreateTime: 1001 keySize: -1 valueSize: 1 isValid: true crc: {inner_crc[1]} payload: 2",
    ]


def test_transaction_index_and_producer_snapshot_dumps(tmp_path, capsys):
    txn_index = tmp_path / f"{SEGMENT}.txnindex"
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 7, 102, 106, 100) + struct.pack(">hqqqq", 0, 8, 107, 110, 105))
    entries = struct.pack(">qhiqiqiq", 7, 1, 9, 20, 4, 5000, 3, -1) + struct.pack(">qhiqiqiq", 8, 0, 2, -1, 0, 6000, -1, 30)
    payload = struct.pack(">i", 2) + entries
    snapshot = tmp_path / "00000000000000000021.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c(payload)) + payload)
    code, out, err = dump(capsys, "--files", f"{txn_index},{snapshot}")
    assert code == 0 and err == []
    assert out == [
        f"Dumping {txn_index}",
        "version: 0 producerId: 7 firstOffset: 102 lastOffset: 106 lastStableOffset: 100",
        "version: 0 producerId: 8 firstOffset: 107 lastOffset: 110 lastStableOffset: 105",
        f"Dumping {snapshot}",
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 5000 firstSequence: 5 lastSequence: 9 lastOffset: 20 offsetDelta: 4 timestamp: 5000",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[30] "
        "lastTimestamp: 6000",
    ]


def test_a_corrupt_producer_snapshot_prints_kafkas_crc_message(tmp_path, capsys):
    payload = struct.pack(">i", 0)
    snapshot = tmp_path / "00000000000000000021.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c(payload) ^ 1) + payload)
    _, _, err = dump(capsys, "--files", str(snapshot))
    assert err == [f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc32c(payload) ^ 1}. "
                   f"Computed crc: {crc32c(payload)}"]


@pytest.mark.parametrize("name, complaint", [
    ("00000000000000000000.log", "cannot read: No such file or directory"),
    ("00000000000000000000.data", "unknown file type '.data'"),
])
def test_a_missing_file_or_unknown_suffix_is_one_error_line_naming_the_file(tmp_path, capsys, name, complaint):
    if "No such file" not in complaint:
        (tmp_path / name).write_bytes(b"")
    code, out, err = dump(capsys, "--files", str(tmp_path / name))
    assert code == 1 and out == [] and len(err) == 1
    assert err[0].startswith(f"error: INVALID_REQUEST: --files {tmp_path / name}: {complaint}")


def test_dump_log_runs_as_a_console_command(codecs_dir):
    index = codecs_dir / f"{SEGMENT}.index"
    result = subprocess.run([sys.executable, "-c", "import sys; from stratalog.cli import main; sys.exit(main())",
                             "dump-log", "--files", str(index)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"Dumping {index}", *[f"offset: {o} position: {p}"
                                                                for o, p in index_entries(index)]]


@pytest.mark.parametrize("flags", [(), ("--deep-iteration",), ("--print-data-log",), ("--verify-index-only",),
                                   ("--index-sanity-check",)])
def test_stratalog_prints_exactly_what_kafkas_dump_log_segments_prints(codecs_dir, capsys, kafka_toolchain, flags):  # noqa: F811
    with open(codecs_dir / f"{SEGMENT}.log", "ab") as file:
        file.write(b"\x00" * 5)  # and a few invalid bytes at the end
    files = ",".join(str(codecs_dir / f"{SEGMENT}{suffix}") for suffix in (".log", ".index", ".timeindex"))
    code, out, err = dump(capsys, "--files", files, *flags)  # first: Kafka's tool may rewrite an index it opens
    kafka = kafka_toolchain.dump_log_segments([files], *flags)
    assert (code, out, err) == (kafka.returncode, kafka.stdout.splitlines(), kafka.stderr.splitlines())


def test_kafkas_dump_log_segments_agrees_on_legacy_messages_delete_horizons_txn_indexes_and_snapshots(
        tmp_path, capsys, kafka_toolchain):  # noqa: F811
    inner = legacy_entry(0, 1, b"a", b"1", 1000) + legacy_entry(1, 1, None, b"2", 1001)
    damaged = bytearray(legacy_entry(5, 1, b"z", b"z", 3000))
    damaged[-1] ^= 1
    legacy = tmp_path / "00000000000000000000.log"
    legacy.write_bytes(legacy_entry(0, 0, b"k", b"v") + legacy_entry(1, 0, None, None)
                       + legacy_entry(3, 1, None, gzip.compress(inner), 1001, attributes=1)
                       + legacy_entry(4, 1, b"x", b"y", 2000, attributes=8) + bytes(damaged) + b"\x01\x02")
    horizon = tmp_path / "00000000000000000006.log"
    horizon.write_bytes(build_batch([Record(6, 1000, b"k", None)], base_offset=6, delete_horizon_ms=123456))
    txn_index = tmp_path / "00000000000000000006.txnindex"
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 7, 102, 106, 100) + b"\x00\x01")
    payload = struct.pack(">i", 2) + struct.pack(">qhiqiqiq", 9, 0, 1, 5, 3, 6000, -1, 30) \
        + struct.pack(">qhiqiqiq", 8, 0, 2, -1, 0, 6000, -1, -1)
    snapshot = tmp_path / "00000000000000000021.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c(payload)) + payload)
    files = ",".join(str(f) for f in (legacy, horizon, txn_index, snapshot))
    code, out, err = dump(capsys, "--files", files, "--print-data-log")
    kafka = kafka_toolchain.dump_log_segments([files], "--print-data-log")
    assert (code, out, err) == (kafka.returncode, kafka.stdout.splitlines(), kafka.stderr.splitlines())
