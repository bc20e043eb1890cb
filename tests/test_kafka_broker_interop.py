"""A real Apache Kafka broker and stratalog share log directories: each reads what the other wrote,
and both cleaners compact the same segments to the same records.

One single-node KRaft broker (``kafka_broker.KafkaBroker``, the pinned jars of
scripts/kafka-toolchain) serves the whole module; every test starts, stops and restarts it around
what it does to the broker's log directory, and always stops it with SIGTERM (controlled shutdown,
``.kafka_cleanshutdown`` written) before touching its files. Clients are kafka-python.

* Kafka reads stratalog: stratalog builds partition ``t-0`` (every codec, headers with null values
  and repeated keys, null keys, tombstones, explicit and out-of-order timestamps, small segments with
  dense indexes, a log start offset inside the first segment). Its segment files replace those of an
  empty ``t-0`` the broker created, and the broker's directory-level checkpoints get stratalog's
  values for ``t 0`` (other lines kept). The broker restarts, first after a clean shutdown (it trusts
  stratalog's indexes: fetches and ListOffsets go through them), then after an unclean one with the
  recovery point at 0 (it re-reads and CRC-checks every batch and rebuilds every index). Each time a
  consumer must read exactly what was appended, ListOffsets by timestamp must answer as
  ``Log.offset_for_timestamp``, and Kafka must not have had to change a byte of the segments: after
  the recovery its rebuilt indexes equal stratalog's.
* stratalog reads Kafka: kafka-python producers (none, gzip, snappy, lz4, zstd; idempotent; linger
  so batches hold many records) write a rolling topic; after the broker stops, ``stratalog verify``
  finds its directory clean without changing it, ``stratalog dump-log`` prints exactly what Kafka's
  DumpLogSegments prints for every segment (``--deep-iteration``), ``stratalog consume`` returns every
  record sent, and a broker started on the directory stratalog opened and closed serves them all again.
* Same cleaning, same result: a keyed workload with tombstones goes to a compacted topic while the
  broker's cleaner is off; a copy of the directory is cleaned by ``stratalog compact``, the original by
  Kafka's cleaner after a restart with the cleaner on. Both must retain the same records (offset,
  timestamp, key, value, header keys, as Kafka's DumpLogSegments reads them from either directory),
  which must be exactly the latest record of each key below the active segment plus everything in it;
  the non-empty batches and the segments must be the same, and both cleaner checkpoints must say the
  same, and so must the emptied batches both keep (the last batch of each live idempotent producer).

Kafka 4 refuses ``segment.bytes`` below 1 MiB; the topics here use Kafka's ``internal.segment.bytes``
(a topic config Kafka's own tests use for small segments) so that segments roll every few KiB.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import shutil
import string
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka_broker import KafkaBroker
from server_harness import Server
from kafka_tools import KafkaToolchain, ToolResult, kafka_toolchain  # noqa: F401  (kafka_toolchain is a fixture)

from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Header, Record, build_batch
from stratalog.broker.topics import TopicAdmin

T0 = 1_700_000_000_000
SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
CLI_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def broker(kafka_toolchain: KafkaToolchain, tmp_path_factory: pytest.TempPathFactory):  # noqa: F811
    node = KafkaBroker(kafka_toolchain, tmp_path_factory.mktemp("kafka-broker"),
                       log_levels={"org.apache.kafka.storage.internals.log": "info"})
    try:
        yield node
    finally:
        node.close()


# -- helpers ------------------------------------------------------------------------------------------

def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's ``topic partition offset`` checkpoint (an empty file has no entries)."""
    text = path.read_text(encoding="utf-8")
    if text == "":
        return {}
    lines = text.splitlines()
    assert lines[0] == "0", f"{path}: version line {lines[0]!r}"
    assert int(lines[1]) == len(lines) - 2, f"{path}: count line {lines[1]!r} but {len(lines) - 2} entries"
    entries = {}
    for line in lines[2:]:
        topic, partition, offset = line.split()
        entries[(topic, int(partition))] = int(offset)
    return entries


def write_offsets_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in entries.items()]
    path.write_text(f"0\n{len(lines)}\n" + "".join(line + "\n" for line in lines), encoding="utf-8")


def segment_files(directory: Path, kinds: Iterable[str] = ("log", "index", "timeindex")) -> list[Path]:
    wanted = set(kinds)
    return sorted(p for p in directory.iterdir() if (m := SEGMENT_FILE.match(p.name)) and m.group(2) in wanted)


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def stratalog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stratalog.cli", *args], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, check=False)


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    return (f"command: {' '.join(map(str, proc.args))}\nexit status: {proc.returncode}\n"
            f"--- stderr ---\n{proc.stderr[-4000:]}\n--- stdout (first 4000 chars) ---\n{proc.stdout[:4000]}")


def consumer_view(record: Any) -> tuple:
    """(offset, timestamp, key, value, headers) of a kafka-python ConsumerRecord."""
    return (record.offset, record.timestamp, record.key, record.value,
            tuple((k, v) for k, v in (record.headers or [])))


def record_view(record: Record) -> tuple:
    return (record.offset, record.timestamp, record.key, record.value,
            tuple((h.key, h.value) for h in record.headers))


_ALPHABET = string.ascii_letters + string.digits + " -_.:/=+"


def _text(rng: random.Random, low: int, high: int) -> bytes:
    return "".join(rng.choices(_ALPHABET, k=rng.randint(low, high))).encode()


_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
          "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango")


def _words(rng: random.Random, low: int, high: int) -> bytes:
    """Text that every codec compresses (kafka-python sends a batch uncompressed when that is smaller)."""
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high))).encode()


def _headers(rng: random.Random, null_values: bool = True) -> tuple[tuple[str, bytes | None], ...]:
    """Headers with repeated, empty and non-ASCII keys; kafka-python cannot send null header values."""
    keys = ("trace-id", "h", "dup", "dup", "hé", "")
    return tuple((rng.choice(keys),
                  None if null_values and rng.random() < 0.25 else rng.randbytes(rng.randint(0, 12)))
                 for _ in range(rng.choice((0, 0, 1, 2, 3))))


# -- a. Kafka reads stratalog ------------------------------------------------------------------------

SL_SEGMENT_BYTES = 2048
SL_INDEX_INTERVAL = 256
SL_BATCHES = 60


@dataclass
class StratalogPartition:
    directory: Path
    records: list[Record]  # every record appended, with its offset
    log_start: int
    log_end: int
    checkpoints: dict[str, int | None]  # checkpoint file name -> stratalog's value for t 0 (None = no line)
    time_queries: dict[int, tuple[int, int] | None]  # timestamp -> (offset, timestamp) per Log.offset_for_timestamp


def _stratalog_batches(rng: random.Random) -> list[tuple[Compression, list[Record]]]:
    codecs = list(Compression)
    batches = []
    for i in range(SL_BATCHES):
        count = 1 if i % 11 == 4 else rng.randint(2, 12)
        # Mostly rising timestamps; every 6th batch goes back in time (the time index must not).
        base = T0 - 50_000 + i * 3 if i % 6 == 5 else T0 + i * 1000
        records = []
        for j in range(count):
            key = None if rng.random() < 0.2 else b"key-%d-%d" % (i, j)
            value = None if rng.random() < 0.12 else _text(rng, 0, 160)
            headers = tuple(Header(k, v) for k, v in _headers(rng))
            records.append(Record(j, base + rng.randint(-20, 20), key, value, headers))
        batches.append((codecs[i % len(codecs)], records))
    return batches


def build_stratalog_partition(root: Path) -> StratalogPartition:
    data_dir = root / "stratalog-data"
    manager = open_log_manager([data_dir])
    try:
        TopicAdmin(manager).create_topic("t", 1, {"segment.bytes": SL_SEGMENT_BYTES, "index.interval.bytes": SL_INDEX_INTERVAL,
                                      "retention.ms": -1})
        log = manager.get_log("t", 0)
        appended: list[Record] = []
        for codec, records in _stratalog_batches(random.Random("stratalog-to-kafka")):
            info = log.append(build_batch(records, compression=codec))
            appended.extend(Record(info.first_offset + r.offset, r.timestamp, r.key, r.value, r.headers)
                            for r in records)
        segments = log.segments
        assert len(segments) >= 8, f"expected several rolls with segment.bytes={SL_SEGMENT_BYTES}: {segments}"
        # A log start offset inside the first segment (DeleteRecords), so log-start-offset-checkpoint has a line.
        log_start = (segments[0].base_offset + segments[1].base_offset) // 2 + 1
        assert log.maybe_increment_log_start_offset(log_start)
        timestamps = sorted({r.timestamp for r in appended})
        queries = sorted({T0 - 100_000, timestamps[-1] + 1, *timestamps,
                          *(t - 1 for t in timestamps[::3]), *(t + 1 for t in timestamps[::3])})
        time_queries = {}
        for ts in queries:
            found = log.offset_for_timestamp(ts)
            time_queries[ts] = None if found is None else (found.offset, found.timestamp)
        log_end = log.log_end_offset
    finally:
        manager.close()
    checkpoints: dict[str, int | None] = {}
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        checkpoints[name] = read_offsets_checkpoint(data_dir / name).get(("t", 0))
    assert checkpoints["log-start-offset-checkpoint"] == log_start
    assert checkpoints["recovery-point-offset-checkpoint"] == log_end
    return StratalogPartition(data_dir / "t-0", appended, log_start, log_end, checkpoints, time_queries)


def _install_stratalog_segments(broker: KafkaBroker, built: StratalogPartition) -> None:
    partition_dir = broker.log_dir / "t-0"
    for path in segment_files(partition_dir, ("log", "index", "timeindex", "txnindex", "snapshot")):
        path.unlink()
    for path in segment_files(built.directory, ("log", "index", "timeindex", "txnindex")):
        shutil.copy2(path, partition_dir / path.name)
    for name, value in built.checkpoints.items():
        path = broker.log_dir / name
        entries = read_offsets_checkpoint(path)
        entries.pop(("t", 0), None)
        if value is not None:
            entries[("t", 0)] = value
        write_offsets_checkpoint(path, entries)
    # stratalog stamps partitionLeaderEpoch 0 on every batch: epoch 0 starts at offset 0.
    (partition_dir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n", encoding="utf-8")


def _check_kafka_serves(broker: KafkaBroker, built: StratalogPartition, when: str) -> None:
    from kafka import TopicPartition

    broker.wait_for_leader("t", 0)
    tp = TopicPartition("t", 0)
    served = broker.read_partition("t", 0)
    expected = [record_view(r) for r in built.records if r.offset >= built.log_start]
    got = [consumer_view(r) for r in served]
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        pytest.fail(f"{when}: the broker served {len(got)} records, stratalog appended {len(expected)} from "
                    f"offset {built.log_start}; first difference at index {first}:\n"
                    f"  kafka:     {got[first] if first < len(got) else None}\n"
                    f"  stratalog: {expected[first] if first < len(expected) else None}")
    assert all(r.timestamp_type == 0 for r in served), f"{when}: not every record is CreateTime"
    assert {r.leader_epoch for r in served} == {0}, f"{when}: leader epochs {({r.leader_epoch for r in served})}"

    consumer = broker.consumer()
    try:
        assert consumer.beginning_offsets([tp])[tp] == built.log_start, f"{when}: log start offset"
        assert consumer.end_offsets([tp])[tp] == built.log_end, f"{when}: log end offset"
        mismatches = []
        for ts, expected_answer in built.time_queries.items():
            answer = consumer.offsets_for_times({tp: ts})[tp]
            kafka_answer = None if answer is None else (answer.offset, answer.timestamp)
            if kafka_answer != expected_answer:
                mismatches.append(f"timestamp {ts}: kafka {kafka_answer}, stratalog {expected_answer}")
        assert not mismatches, (f"{when}: ListOffsets by timestamp disagrees with Log.offset_for_timestamp "
                                f"({len(mismatches)} of {len(built.time_queries)} queries):\n"
                                + "\n".join(mismatches[:30]))
    finally:
        consumer.close()


def _loader_lines(output: str, partition: str) -> list[str]:
    """The broker's log lines about loading ``partition`` (its storage loggers log at INFO here)."""
    return [line for line in output.splitlines()
            if f"partition={partition}," in line or f"partition {partition}" in line or f"/{partition}/" in line]


def _differing_files(left: Path, right: Path, names: Iterable[str]) -> list[str]:
    out = []
    for name in names:
        a, b = left / name, right / name
        if not b.exists():
            out.append(f"{name}: gone from {right}")
        elif a.read_bytes() != b.read_bytes():
            out.append(f"{name}: {a.stat().st_size} bytes from stratalog, {b.stat().st_size} bytes after Kafka")
    return out


def test_kafka_serves_and_recovers_what_stratalog_wrote(broker: KafkaBroker, tmp_path: Path) -> None:
    broker.start()
    broker.create_topic("t", {"retention.ms": -1, "index.interval.bytes": SL_INDEX_INTERVAL})
    epoch = broker.wait_for_leader("t", 0)
    broker.stop()
    partition_dir = broker.log_dir / "t-0"
    assert epoch in (0, None), f"a new topic's first leader epoch is {epoch}, not 0"
    assert (partition_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    partition_metadata = (partition_dir / "partition.metadata").read_bytes()

    built = build_stratalog_partition(tmp_path)
    names = [p.name for p in segment_files(built.directory)]
    _install_stratalog_segments(broker, built)

    # 1. Clean shutdown: the broker loads stratalog's segments and indexes as they are.
    broker.start()
    _check_kafka_serves(broker, built, "after a clean restart")
    broker.stop()
    complaints = [line for line in _loader_lines(broker.output(), "t-0")
                  if " WARN " in line or " ERROR " in line or "Recovering" in line]
    assert not complaints, "the broker did not take stratalog's segments as they are:\n" + "\n".join(complaints)
    changed = _differing_files(built.directory, partition_dir, names)
    assert not changed, "the broker changed stratalog's segment files while serving them:\n" + "\n".join(changed)
    assert (partition_dir / "partition.metadata").read_bytes() == partition_metadata

    # 2. Unclean shutdown, recovery point 0: the broker re-reads every batch and rebuilds every index.
    (broker.log_dir / ".kafka_cleanshutdown").unlink()
    path = broker.log_dir / "recovery-point-offset-checkpoint"
    entries = read_offsets_checkpoint(path)
    entries[("t", 0)] = 0
    write_offsets_checkpoint(path, entries)
    for index in segment_files(partition_dir, ("index", "timeindex")):
        index.unlink()  # Kafka would otherwise only reset them; this way nothing of stratalog's indexes is left
    broker.start()
    _check_kafka_serves(broker, built, "after recovery from offset 0")
    broker.stop()
    recovered = {int(m.group(1)) for line in _loader_lines(broker.output(), "t-0")
                 if (m := re.search(r"Recovering unflushed segment (\d+)\.", line))}
    assert recovered == {int(name[:20]) for name in names if name.endswith(".log")}, (
        f"the broker recovered segments {sorted(recovered)} of t-0\n{broker.describe_output()}")
    changed = _differing_files(built.directory, partition_dir, names)
    assert not changed, ("Kafka's recovery of stratalog's segments (same index.interval.bytes) produced other "
                         "files than stratalog wrote:\n" + "\n".join(changed))


def _write_producers_partition(data_dir: Path, topic: str, now: int) -> int:
    """A stratalog partition where producer 1001 wrote only in its first segment and 1002 in its last;
    returns the log end."""
    manager = open_log_manager([data_dir])
    try:
        TopicAdmin(manager).create_topic(topic, 1, {"segment.bytes": SL_SEGMENT_BYTES, "retention.ms": -1})
        log = manager.get_log(topic, 0)
        for n in range(3):                                     # producer 1001, epoch 2: sequences 0..8
            log.append(build_batch([Record(i, now + n, b"a", b"1001") for i in range(3)], producer_id=1001,
                                   producer_epoch=2, base_sequence=3 * n))
        while len(log.segments) < 5:                           # the last two segments hold nothing of 1001
            log.append(build_batch([Record(0, now, None, b"p" * 300)]))
        log.append(build_batch([Record(i, now + 50, b"b", b"1002") for i in range(2)], producer_id=1002,
                               producer_epoch=0, base_sequence=40))
        return log.log_end_offset
    finally:
        manager.close()


def _describe_producers(toolchain: KafkaToolchain, broker: KafkaBroker, topic: str) -> dict[int, dict[str, str]]:
    """``kafka-transactions.sh describe-producers``: the producers the broker's partition knows, by id."""
    result = toolchain.java("org.apache.kafka.tools.TransactionsCommand",
                            ["--bootstrap-server", broker.bootstrap, "describe-producers", "--topic", topic,
                             "--partition", "0"])
    assert result.returncode == 0, result.describe()
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    assert lines and lines[0][0] == "ProducerId", result.describe()
    return {int(row[0]): dict(zip(lines[0], row)) for row in lines[1:]}


def test_kafka_loading_a_stratalog_directory_knows_its_idempotent_producers(
        broker: KafkaBroker, kafka_toolchain: KafkaToolchain, tmp_path: Path) -> None:  # noqa: F811
    """stratalog's producer snapshots (at every roll and at shutdown) are what a Kafka broker loads its
    producers from. Without them a broker after a clean shutdown knows none: it then takes empty
    snapshots at its last segments instead of scanning the log, and would take a retried batch of
    1001 or 1002 again, or refuse their next one."""
    topic = "producers"
    broker.start()
    broker.create_topic(topic, {"retention.ms": -1})
    broker.wait_for_leader(topic, 0)
    broker.stop()
    now = int(time.time() * 1000)                              # producer.id.expiration.ms counts from these
    end = _write_producers_partition(tmp_path / "stratalog-data", topic, now)
    built = tmp_path / "stratalog-data" / f"{topic}-0"
    partition_dir = broker.log_dir / f"{topic}-0"
    for path in segment_files(partition_dir, ("log", "index", "timeindex", "txnindex", "snapshot")):
        path.unlink()
    for path in segment_files(built, ("log", "index", "timeindex", "snapshot")):
        shutil.copy2(path, partition_dir / path.name)
    assert (partition_dir / f"{end:020d}.snapshot").exists(), "no snapshot at the log end after a clean close"
    path = broker.log_dir / "recovery-point-offset-checkpoint"
    entries = read_offsets_checkpoint(path)
    entries[(topic, 0)] = end
    write_offsets_checkpoint(path, entries)
    (partition_dir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n", encoding="utf-8")

    broker.start()
    try:
        broker.wait_for_leader(topic, 0)
        producers = _describe_producers(kafka_toolchain, broker, topic)
    finally:
        broker.stop()
    assert {pid: (p["ProducerEpoch"], p["LastSequence"], p["LastTimestamp"]) for pid, p in producers.items()} == {
        1001: ("2", "8", str(now + 2)),
        1002: ("0", "41", str(now + 50)),
    }, broker.describe_output()


# -- b. stratalog reads Kafka ------------------------------------------------------------------------

KAFKA_SEGMENT_BYTES = 16 * 1024
CODECS = (None, "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 160


@dataclass(frozen=True)
class Sent:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    codec: str


def produce_kafka_topic(broker: KafkaBroker, topic: str) -> list[Sent]:
    rng = random.Random("kafka-to-stratalog")
    sent: list[Sent] = []
    for number, codec in enumerate(CODECS):
        producer = broker.producer(compression_type=codec, linger_ms=30, batch_size=8192, acks="all",
                                   enable_idempotence=True)
        try:
            pending = []
            for i in range(RECORDS_PER_CODEC):
                n = number * RECORDS_PER_CODEC + i
                key = None if rng.random() < 0.2 else b"key-%05d" % n
                r = rng.random()
                value = None if r < 0.1 and key is not None else (rng.randbytes(rng.randint(1, 40)) if r < 0.15
                                              else _words(rng, 0, 60))
                timestamp = T0 + n * 10 + rng.randint(-30, 30) if n % 13 else T0 - 86_400_000 + n
                headers = _headers(rng, null_values=False)
                future = producer.send(topic, value=value, key=key, headers=list(headers), partition=0,
                                       timestamp_ms=timestamp)
                pending.append((future, timestamp, key, value, headers))
            producer.flush()
            for future, timestamp, key, value, headers in pending:
                metadata = future.get(timeout=30)
                sent.append(Sent(metadata.offset, timestamp, key, value, headers, codec or "none"))
        finally:
            producer.close()
    assert [s.offset for s in sent] == list(range(len(sent))), "offsets were not assigned in send order"
    return sent


def _json_bytes(obj: dict[str, Any], name: str) -> bytes | None:
    if f"{name}_b64" in obj:
        return base64.b64decode(obj[f"{name}_b64"])
    value = obj[name]
    return None if value is None else value.encode()


def _json_header_value(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    return value.encode()


def _json_headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((k, _json_header_value(v)) for k, v in pairs)


def _stderr_blocks(text: str) -> list[str]:
    """stderr as a sorted list of blocks: a line and the indented lines under it."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("  ") and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return sorted("\n".join(b) for b in blocks)


def _dump_batches(stdout: str) -> list[dict[str, str]]:
    batches = []
    for line in stdout.splitlines():
        if line.startswith("baseOffset: "):
            # "name: value" pairs; values have no spaces except "OptionalLong.empty"-style tokens
            tokens = line.split(" ")
            batches.append({tokens[i].rstrip(":"): tokens[i + 1] for i in range(0, len(tokens) - 1, 2)})
    return batches


def test_stratalog_reads_what_kafka_wrote(broker: KafkaBroker, kafka_toolchain: KafkaToolchain,  # noqa: F811
                                         tmp_path: Path) -> None:
    topic = "from-kafka"
    broker.start()
    broker.create_topic(topic, {"retention.ms": -1, "internal.segment.bytes": KAFKA_SEGMENT_BYTES})
    sent = produce_kafka_topic(broker, topic)
    broker.stop()
    copy = tmp_path / "broker-copy"
    shutil.copytree(broker.log_dir, copy, symlinks=True)
    partition_dir = copy / f"{topic}-0"
    assert (copy / "__cluster_metadata-0").is_dir() and (copy / "meta.properties").exists()
    files = segment_files(partition_dir)
    assert len([f for f in files if f.suffix == ".log"]) >= 5, f"Kafka did not roll the topic: {files}"

    # verify: clean, and read-only (a lock file is the only thing it may leave behind).
    before = tree_digest(copy)
    verified = stratalog_cli("verify", "--data-dir", str(copy))
    assert verified.returncode == 0, f"stratalog verify rejects the broker's directory\n{describe(verified)}"
    after = tree_digest(copy)
    touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)} - {".lock"}
    assert not touched, f"stratalog verify changed the broker's directory: {sorted(touched)}"

    # dump-log prints what Kafka's DumpLogSegments prints, file for file: batches, records' metadata, index
    # entries. (Not --print-data-log: some values here are not UTF-8, and how the replacement characters come
    # out is the printing of text, not the reading of the log.)
    flags = ("--deep-iteration",)
    kafka_dump = kafka_toolchain.dump_log_segments(files, *flags)
    assert kafka_dump.returncode == 0, kafka_dump.describe()
    ours = stratalog_cli("dump-log", "--files", ",".join(map(str, files)), *flags)
    assert ours.returncode == 0, describe(ours)
    if ours.stdout != kafka_dump.stdout:
        diff = next(((i, a, b) for i, (a, b) in enumerate(zip(ours.stdout.splitlines(),
                                                                 kafka_dump.stdout.splitlines())) if a != b), None)
        pytest.fail(f"stratalog dump-log differs from Kafka's DumpLogSegments on the broker's segments; first "
                    f"differing line: {diff}\n{describe(ours)}\n{kafka_dump.describe()}")
    # Kafka reports non-consecutive offsets (every segment not at 0) at the end, in hash order.
    assert _stderr_blocks(ours.stderr) == _stderr_blocks(kafka_dump.stderr), (
        f"stderr differs:\n{ours.stderr}\n---\n{kafka_dump.stderr}")
    batches = _dump_batches(kafka_dump.stdout)
    by_offset = {s.offset: s for s in sent}
    assert sum(int(b["count"]) for b in batches) == len(sent)
    assert any(int(b["count"]) > 1 for b in batches), "linger_ms produced no multi-record batch"
    for b in batches:
        assert b["compresscodec"] == by_offset[int(b["baseOffset"])].codec, f"batch {b}"
        assert b["producerId"] != "-1", f"batch {b} has no producer id, though the producer is idempotent"

    # consume returns every record sent.
    consumed = stratalog_cli("consume", "--data-dir", str(copy), "--topic", topic, "--partition", "0")
    assert consumed.returncode == 0, f"stratalog consume failed on the broker's directory\n{describe(consumed)}"
    got = []
    for line in consumed.stdout.splitlines():
        obj = json.loads(line)
        assert obj["timestampType"] == "CreateTime", line
        got.append((obj["offset"], obj["timestamp"], _json_bytes(obj, "key"), _json_bytes(obj, "value"),
                    _json_headers(obj["headers"])))
    expected = [(s.offset, s.timestamp, s.key, s.value, s.headers) for s in sent]
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        pytest.fail(f"stratalog consume returned {len(got)} records, {len(expected)} were sent; first difference "
                    f"at index {first}:\n  stratalog: {got[first] if first < len(got) else None}\n"
                    f"  sent:      {expected[first] if first < len(expected) else None}")

    # A broker starts on the directory stratalog has opened and closed (its checkpoints, its clean-shutdown
    # marker) and serves the same records.
    assert (copy / ".kafka_cleanshutdown").exists()
    reopened = KafkaBroker(broker.toolchain, tmp_path / "reopened", log_dir=copy)
    try:
        reopened.start()
        reopened.wait_for_leader(topic, 0)
        served = [consumer_view(r) for r in reopened.read_partition(topic, 0)]
        reopened.stop()
    finally:
        reopened.close()
    assert served == expected, "the broker restarted on the directory stratalog opened serves other records"


def test_read_committed_on_stratalog_stops_where_it_stops_on_kafka(broker: KafkaBroker, tmp_path: Path) -> None:
    """Kafka's transactions as a Kafka broker wrote them (kafka-python's transactional producers): one
    committed, one aborted, one left open. On the broker's directory, ``stratalog serve`` gives the last
    stable offset Kafka gave, a read_committed fetch returns what Kafka's read_committed consumer
    returned and names the aborted transaction, and read_uncommitted goes on past the open one."""
    from kafka import TopicPartition as KafkaTopicPartition

    topic = "transactions"
    broker.start()
    broker.create_topic(topic, {"retention.ms": -1})
    plain = broker.producer(acks="all")
    transactional = []

    def transaction(name: str, values: list[bytes], end: str | None) -> None:
        producer = broker.producer(transactional_id=name, acks="all")
        transactional.append(producer)
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value=value, key=b"k", partition=0)
        producer.flush()
        if end == "commit":
            producer.commit_transaction()
        elif end == "abort":
            producer.abort_transaction()

    try:
        plain.send(topic, value=b"before", partition=0).get(timeout=30)
        transaction("committed", [b"c1", b"c2"], "commit")
        transaction("aborted", [b"a1"], "abort")
        transaction("open", [b"o1", b"o2"], None)        # never ended: Kafka's LSO stays at o1
        plain.send(topic, value=b"after", partition=0).get(timeout=30)
        tp = KafkaTopicPartition(topic, 0)
        committed = broker.consumer(isolation_level="read_committed")
        uncommitted = broker.consumer()
        try:
            committed.assign([tp])
            uncommitted.assign([tp])
            kafka_lso = committed.end_offsets([tp])[tp]
            kafka_hw = uncommitted.end_offsets([tp])[tp]
            kafka_read: list[Any] = []
            deadline = time.monotonic() + 60
            while committed.position(tp) < kafka_lso and time.monotonic() < deadline:
                kafka_read.extend(committed.poll(timeout_ms=500).get(tp, []))
        finally:
            committed.close()
            uncommitted.close()
        broker.stop()
    finally:
        for producer in (plain, *transactional):
            producer.close(timeout=0)
    kafka_values = [r.value for r in kafka_read]
    assert kafka_values == [b"before", b"c1", b"c2"] and kafka_lso < kafka_hw, (kafka_values, kafka_lso, kafka_hw)

    copy = tmp_path / "broker-copy"
    shutil.copytree(broker.log_dir, copy, symlinks=True)
    server = Server([copy], log_path=tmp_path / "serve.log").start()
    try:
        def offsets(**query: str) -> int:
            return server.ok("GET", f"/v1/topics/{topic}/partitions/0/offsets", params={"timestamp": -1, **query})[
                "offset"]

        assert offsets(isolation="read_committed") == kafka_lso
        assert offsets() == kafka_hw
        read = server.fetch_json(topic, 0, 0, isolation="read_committed")
        assert [r["value"] for r in read["records"]] == ["before", "c1", "c2"], read
        assert read["lastStableOffset"] == kafka_lso and read["nextOffset"] <= kafka_lso
        [aborted] = read["abortedTransactions"]
        a1 = next(r for r in server.fetch_json(topic, 0, 0)["records"] if r["value"] == "a1")
        assert aborted["firstOffset"] == a1["offset"], read
        raw = server.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0, "isolation": "read_committed",
                                                                             "format": "binary"})
        assert raw.headers["X-Last-Stable-Offset"] == str(kafka_lso)
        assert raw.headers["X-Aborted-Transactions"] == f"{aborted['producerId']}:{aborted['firstOffset']}"
        everything = [r["value"] for r in server.read_all(topic, 0)]
        assert {"a1", "o1", "o2", "after"} <= set(everything)
    finally:
        server.terminate()


# -- c. same cleaning, same result ------------------------------------------------------------------

COMPACT_SEGMENT_BYTES = 8 * 1024
COMPACT_RECORDS = 3000
COMPACT_KEYS = 200
DELETE_RETENTION_MS = 10 * 24 * 3600 * 1000
COMPACT_CONFIG = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
    "min.compaction.lag.ms": "0",
    "file.delete.delay.ms": "1000",
}
COMPACT_CODECS = (None, "gzip", "lz4")  # one producer each, one after the other


def produce_keyed_workload(broker: KafkaBroker, topic: str) -> list[Sent]:
    rng = random.Random(20240601)
    # Timestamps of the last minutes: with older ones the broker would expire the producers' state
    # (producer.id.expiration.ms is a day after the last timestamp) and its cleaner would treat them as gone.
    base = time.time_ns() // 1_000_000 - 60_000 - COMPACT_RECORDS * 10
    sent: list[Sent] = []
    per_producer = COMPACT_RECORDS // len(COMPACT_CODECS)
    for number, codec in enumerate(COMPACT_CODECS):
        producer = broker.producer(compression_type=codec, linger_ms=20, batch_size=4096, acks="all",
                                   enable_idempotence=True)
        try:
            pending = []
            for i in range(per_producer):
                n = number * per_producer + i
                key = b"key-%03d" % rng.randrange(COMPACT_KEYS)
                value = None if rng.random() < 0.1 else b"value-%05d-" % n + _text(rng, 0, 40)
                headers = (("n", b"%d" % n),) if n % 5 == 0 else ()
                timestamp = base + n * 10
                future = producer.send(topic, value=value, key=key, headers=list(headers), partition=0,
                                       timestamp_ms=timestamp)
                pending.append((future, timestamp, key, value, headers))
            producer.flush()
            for future, timestamp, key, value, headers in pending:
                sent.append(Sent(future.get(timeout=30).offset, timestamp, key, value, headers, codec or "none"))
        finally:
            producer.close()
    assert [s.offset for s in sent] == list(range(len(sent)))
    return sent


_RECORD_LINE = re.compile(r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) "
                          r"valueSize: (-?\d+) sequence: (-?\d+) headerKeys: \[([^\]]*)\](.*)$")


@dataclass
class Dumped:
    batches: list[dict[str, str]]
    records: list[tuple[int, int, bytes | None, bytes | None, tuple[str, ...]]]  # (offset, ts, key, value, header keys)


def parse_dump(result: ToolResult) -> Dumped:
    """Batches and records of DumpLogSegments --deep-iteration --print-data-log (ASCII keys and values)."""
    assert result.returncode == 0, result.describe()
    batches: list[dict[str, str]] = []
    records = []
    for line in result.stdout.splitlines():
        if line.startswith("baseOffset: "):
            tokens = line.split(" ")
            batches.append({tokens[i].rstrip(":"): tokens[i + 1] for i in range(0, len(tokens) - 1, 2)})
        elif line.startswith("| offset: "):
            m = _RECORD_LINE.match(line)
            assert m, f"unparsed record line {line!r}"
            offset, _, ts, key_size, value_size, _, header_keys, rest = m.groups()
            key_size, value_size = int(key_size), int(value_size)
            key = value = None
            if key_size >= 0:
                assert rest.startswith(" key: "), line
                key, rest = rest[6:6 + key_size].encode(), rest[6 + key_size:]
            if value_size >= 0:
                assert rest.startswith(" payload: "), line
                value, rest = rest[10:].encode(), ""
                assert len(value) == value_size, line
            assert rest == "", line
            headers = tuple(header_keys.split(",")) if header_keys else ()
            records.append((int(offset), int(ts), key, value, headers))
    return Dumped(batches, records)


def expected_after_cleaning(sent: list[Sent], end: int) -> list[tuple]:
    """Below ``end``, the latest record of each key (tombstones too: delete.retention.ms is far); from ``end``, all."""
    latest: dict[bytes | None, int] = {}
    for s in sent:
        if s.offset < end:
            latest[s.key] = s.offset
    return [(s.offset, s.timestamp, s.key, s.value, tuple(k for k, _ in s.headers))
            for s in sent if s.offset >= end or latest[s.key] == s.offset]


def _batch_shape(b: dict[str, str]) -> tuple:
    return (int(b["baseOffset"]), int(b["lastOffset"]), int(b["count"]), b["compresscodec"], b["producerId"],
            b["producerEpoch"], b["baseSequence"], b["lastSequence"])


def test_kafka_and_stratalog_cleaners_keep_the_same_records(
        broker: KafkaBroker, kafka_toolchain: KafkaToolchain, tmp_path: Path) -> None:  # noqa: F811
    topic = "compacted"
    broker.start(**{"log.cleaner.enable": "false"})
    broker.create_topic(topic, {**COMPACT_CONFIG, "internal.segment.bytes": COMPACT_SEGMENT_BYTES})
    sent = produce_keyed_workload(broker, topic)
    broker.stop()

    # The pre-clean state, for stratalog: a copy of the whole broker directory.
    copy = tmp_path / "stratalog-cleaned"
    shutil.copytree(broker.log_dir, copy, symlinks=True)
    pre_logs = segment_files(copy / f"{topic}-0", ("log",))
    assert len(pre_logs) >= 8, f"expected many inactive segments: {pre_logs}"
    active_base = int(pre_logs[-1].name[:20])
    assert 0 < active_base < len(sent)

    # Kafka's cleaner on the original.
    broker.start(**{"log.cleaner.enable": "true"})
    checkpoint = broker.log_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 90
    while read_offsets_checkpoint(checkpoint).get((topic, 0)) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"Kafka's cleaner did not checkpoint {topic}-0 within 90 s: "
                        f"{checkpoint.read_text()!r}\n{broker.describe_output()}")
        time.sleep(0.2)
    kafka_checkpoint = read_offsets_checkpoint(checkpoint)[(topic, 0)]
    broker.wait_for_leader(topic, 0)
    served = broker.read_partition(topic, 0)
    broker.stop()

    # stratalog's cleaner on the copy, with the same topic configuration.
    (copy / f"{topic}-0" / "stratalog-topic.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in {**COMPACT_CONFIG, "segment.bytes": COMPACT_SEGMENT_BYTES}.items()),
        encoding="utf-8")
    compacted = stratalog_cli("compact", "--data-dir", str(copy), "--topic", topic, "--force")
    assert compacted.returncode == 0, describe(compacted)
    reports = [json.loads(line) for line in compacted.stdout.splitlines()]
    assert reports[-1] == {"logsCleaned": 1}, describe(compacted)
    stratalog_checkpoint = read_offsets_checkpoint(copy / "cleaner-offset-checkpoint").get((topic, 0))

    assert kafka_checkpoint == active_base, (
        f"Kafka cleaned up to {kafka_checkpoint}, the active segment is at {active_base}")
    assert stratalog_checkpoint == kafka_checkpoint, (
        f"cleaner-offset-checkpoint: stratalog {stratalog_checkpoint}, Kafka {kafka_checkpoint}\n{describe(compacted)}")

    kafka_dump = parse_dump(kafka_toolchain.dump_log_segments(
        segment_files(broker.log_dir / f"{topic}-0", ("log",)), "--deep-iteration", "--print-data-log"))
    stratalog_dump = parse_dump(kafka_toolchain.dump_log_segments(
        segment_files(copy / f"{topic}-0", ("log",)), "--deep-iteration", "--print-data-log"))
    expected = expected_after_cleaning(sent, active_base)

    # What must be equal: the retained records, offset for offset.
    kafka_set, stratalog_set = set(kafka_dump.records), set(stratalog_dump.records)
    only_kafka = sorted(kafka_set - stratalog_set)
    only_stratalog = sorted(stratalog_set - kafka_set)
    assert not only_kafka and not only_stratalog, (
        f"the cleaners retained different records: {len(only_kafka)} only in Kafka's result "
        f"(offsets {[r[0] for r in only_kafka][:50]}), {len(only_stratalog)} only in stratalog's "
        f"(offsets {[r[0] for r in only_stratalog][:50]})\nfirst only-Kafka: {only_kafka[:3]}\n"
        f"first only-stratalog: {only_stratalog[:3]}")
    assert kafka_dump.records == expected, "Kafka's cleaner did not keep exactly the latest record of each key"
    assert stratalog_dump.records == expected
    assert [consumer_view(r)[:4] for r in served] == [r[:4] for r in expected], "Kafka served other records"

    # Batches: every batch that still holds records is the same batch on both sides (same base and last
    # offsets, codec, producer fields); empty batches are compared separately below.
    kafka_batches = [_batch_shape(b) for b in kafka_dump.batches]
    stratalog_batches = [_batch_shape(b) for b in stratalog_dump.batches]
    assert [b for b in kafka_batches if b[2] > 0] == [b for b in stratalog_batches if b[2] > 0]
    # Empty batches (every record removed, the header kept): Kafka keeps the last batch of each producer it
    # still considers active (RETAIN_EMPTY) so that the producer's sequence survives cleaning; so must we.
    kafka_empty = sorted(b for b in kafka_batches if b[2] == 0)
    stratalog_empty = sorted(b for b in stratalog_batches if b[2] == 0)
    assert kafka_empty == stratalog_empty, (
        "the cleaners kept different empty batches (all records removed, header retained):\n"
        f"  Kafka:     {kafka_empty}\n  stratalog: {stratalog_empty}")
    kafka_bases = [int(p.name[:20]) for p in segment_files(broker.log_dir / f"{topic}-0", ("log",))]
    stratalog_bases = [int(p.name[:20]) for p in segment_files(copy / f"{topic}-0", ("log",))]
    assert kafka_bases == stratalog_bases, f"segments after cleaning: Kafka {kafka_bases}, stratalog {stratalog_bases}"
