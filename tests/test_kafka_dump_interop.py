"""Apache Kafka's own DumpLogSegments reads what stratalog writes, and sees what stratalog meant to write.

Data is written through the public engine API (``open_log_manager``, ``create_topic``,
``Log.append`` of ``build_batch`` producer batches, ``close``) into topics with small
``segment.bytes`` and ``index.interval.bytes``, so every partition has several rolled
segments plus the closed active one, each with ``.log``, ``.index`` and ``.timeindex``.
The topics cover no compression and each codec (gzip, snappy, lz4, zstd), LogAppendTime,
a topic ``compression.type`` that makes the engine recompress, headers (null values,
empty and repeated keys), null and empty keys and values (tombstones), idempotent-producer
fields and out-of-order timestamps.

Kafka (pinned in bench/kafka/pom.xml, fetched by scripts/kafka-toolchain) then runs three times
over all the files:

* ``--deep-iteration --index-sanity-check --verify-index-only`` (the broker's startup checks);
* ``--verify-index-only`` on the index files alone (every entry checked against the log;
  ``--index-sanity-check`` would skip that);
* ``--print-data-log --deep-iteration`` (every batch and record with key and payload, every
  index entry, plus the same index/log cross-checks).

Each must exit 0 with nothing on stderr except one message Kafka prints for its own segments
too (below), and every line on stdout must equal the line computed here from what was
appended (offsets, counts, timestamps, sizes, CRCs, keys, values, header keys) and from the
bytes of the files (positions, index entries). Expectations never come from stratalog's
dump-log command.
"""

from __future__ import annotations

import random
import string
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka_tools import (  # noqa: F401  (kafka_toolchain is a fixture)
    KafkaToolchain,
    KafkaToolchainError,
    ToolResult,
    kafka_toolchain,
    kafka_toolchain_or_error,
)

from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Header, Record, build_batch
from stratalog.broker.topics import TopicAdmin

T0 = 1_700_000_000_000
PRODUCER_ID = 4242
PRODUCER_EPOCH = 3
BATCHES_PER_TOPIC = 40
SEGMENT_BYTES = 4096
LEADER_EPOCH = 0  # the standalone engine is the leader of epoch 0 of every partition


@dataclass(frozen=True)
class Scenario:
    topic: str
    producer_codecs: tuple[Compression, ...]  # cycled over the batches
    index_interval_bytes: int
    log_append_time: bool = False
    topic_codec: Compression | None = None  # topic compression.type other than "producer"

    def overrides(self) -> dict[str, str]:
        props = {"segment.bytes": str(SEGMENT_BYTES), "index.interval.bytes": str(self.index_interval_bytes)}
        if self.log_append_time:
            props["message.timestamp.type"] = "LogAppendTime"
        if self.topic_codec is not None:
            props["compression.type"] = self.topic_codec.kafka_name
        return props


SCENARIOS = (
    Scenario("uncompressed", (Compression.NONE,), index_interval_bytes=0),
    Scenario("gzip", (Compression.GZIP,), index_interval_bytes=512),
    Scenario("snappy", (Compression.SNAPPY,), index_interval_bytes=512),
    Scenario("lz4", (Compression.LZ4,), index_interval_bytes=512),
    Scenario("zstd", (Compression.ZSTD,), index_interval_bytes=512),
    Scenario("log-append-time", tuple(Compression), index_interval_bytes=1024, log_append_time=True),
    Scenario("topic-zstd", (Compression.NONE, Compression.GZIP, Compression.LZ4), index_interval_bytes=300,
             topic_codec=Compression.ZSTD),
)
TOPICS = [s.topic for s in SCENARIOS]

# -- writing ----------------------------------------------------------------------------------------

_ALPHABET = string.ascii_letters + string.digits + " -_.:/=+,;"
_UTF8 = ("héllo wörld", "日本語のテキスト", "naïve ☃ ✓", "ключ-значение")
_HEADER_KEYS = ("trace-id", "h", "dup", "dup", "hé-ader", "")


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=n))


def _key(rng: random.Random, i: int, j: int) -> bytes | None:
    r = rng.random()
    if r < 0.15:
        return None
    if r < 0.20:
        return b""
    if r < 0.25:
        return rng.choice(_UTF8).encode()
    return f"key-{i}-{j}-{_text(rng, rng.randint(0, 20))}".encode()


def _value(rng: random.Random, small: bool) -> bytes | None:
    r = rng.random()
    if r < 0.12:
        return None  # tombstone
    if r < 0.16:
        return b""
    if r < 0.22:
        return (rng.choice(_UTF8) * rng.randint(1, 5)).encode()
    return _text(rng, rng.randint(1, 12 if small else 400)).encode()


def _headers(rng: random.Random) -> tuple[Header, ...]:
    return tuple(
        Header(rng.choice(_HEADER_KEYS), None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 16)))
        for _ in range(rng.choice((0, 0, 0, 1, 2, 3)))
    )


def _producer_records(rng: random.Random, i: int) -> list[Record]:
    """Records of producer batch ``i``, with offsets 0..n-1 as a producer sends them."""
    if i % 9 == 5:
        count, small = 40, True  # many tiny records
    elif i % 9 == 2:
        count, small = 1, False
    else:
        count, small = rng.randint(2, 6), False
    # Mostly increasing batch timestamps; every 7th batch is older than all before it, so the
    # time index must keep pointing at the batch holding the largest timestamp so far.
    base = T0 - 10_000 + i if i % 7 == 3 else T0 + 1000 * i
    return [Record(j, base + rng.randint(-50, 50), _key(rng, i, j), _value(rng, small), _headers(rng))
            for j in range(count)]


@dataclass
class WrittenBatch:
    base_offset: int
    records: list[Record]  # with the offsets the log assigned
    sent: bytes  # the producer batch given to Log.append
    codec: Compression  # codec of the batch on disk
    producer_id: int
    producer_epoch: int
    base_sequence: int
    log_append_time: int  # -1 for CreateTime
    recompressed: bool

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def max_timestamp(self) -> int:
        if self.log_append_time >= 0:
            return self.log_append_time
        return max(r.timestamp for r in self.records)

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.log_append_time >= 0 else "CreateTime"


@dataclass
class Segment:
    base_offset: int
    log: Path
    index: Path
    time_index: Path
    # (position, size, batch bytes) of each batch in the .log, walked from the bytes
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)


@dataclass
class WrittenTopic:
    scenario: Scenario
    directory: Path
    batches: list[WrittenBatch]
    segments: list[Segment]

    def batch_at(self, base_offset: int) -> WrittenBatch:
        return next(b for b in self.batches if b.base_offset == base_offset)


def _write_topic(manager, scenario: Scenario) -> list[WrittenBatch]:
    TopicAdmin(manager).create_topic(scenario.topic, 1, scenario.overrides())
    log = manager.get_log(scenario.topic, 0)
    rng = random.Random(f"stratalog-kafka-interop-{scenario.topic}")
    written: list[WrittenBatch] = []
    next_offset = 0
    sequence = 0
    for i in range(BATCHES_PER_TOPIC):
        records = _producer_records(rng, i)
        codec = scenario.producer_codecs[i % len(scenario.producer_codecs)]
        idempotent = i % 4 == 1
        producer = (PRODUCER_ID, PRODUCER_EPOCH, sequence) if idempotent else (-1, -1, -1)
        sent = build_batch(records, compression=codec, producer_id=producer[0], producer_epoch=producer[1],
                           base_sequence=producer[2])
        before = time.time_ns() // 1_000_000
        info = log.append(sent)
        after = time.time_ns() // 1_000_000
        assert info.first_offset == next_offset, f"{scenario.topic} batch {i}: offsets not assigned in order"
        assert info.last_offset == next_offset + len(records) - 1
        if scenario.log_append_time:
            assert before <= info.log_append_time <= after, "LogAppendTime is not the time of the append"
        else:
            assert info.log_append_time == -1
        on_disk_codec = scenario.topic_codec if scenario.topic_codec is not None else codec
        written.append(WrittenBatch(
            base_offset=next_offset,
            records=[Record(next_offset + r.offset, r.timestamp, r.key, r.value, r.headers) for r in records],
            sent=sent,
            codec=on_disk_codec,
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=producer[2],
            log_append_time=info.log_append_time if scenario.log_append_time else -1,
            recompressed=on_disk_codec != codec,
        ))
        next_offset += len(records)
        if idempotent:
            sequence += len(records)
    return written


def _walk_log(data: bytes) -> list[tuple[int, int, bytes]]:
    """(position, size, bytes) of each whole v2 batch; stops at a partial tail (Kafka prints those)."""
    out = []
    position = 0
    while position + 12 <= len(data):
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        if position + size > len(data):
            break
        out.append((position, size, data[position:position + size]))
        position += size
    return out


def _find_segments(directory: Path) -> list[Segment]:
    segments = []
    for log in sorted(directory.glob("*.log")):
        base = int(log.name.split(".")[0])
        segment = Segment(base, log, log.with_suffix(".index"), log.with_suffix(".timeindex"))
        segment.batches = _walk_log(log.read_bytes())
        segments.append(segment)
    return segments


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, WrittenTopic]:
    data_dir = tmp_path_factory.mktemp("kafka-interop") / "data"
    manager = open_log_manager([data_dir])
    try:
        batches = {s.topic: _write_topic(manager, s) for s in SCENARIOS}
    finally:
        manager.close()
    topics = {}
    for scenario in SCENARIOS:
        directory = data_dir / f"{scenario.topic}-0"
        topics[scenario.topic] = WrittenTopic(scenario, directory, batches[scenario.topic],
                                              _find_segments(directory))
    return topics


# -- running Kafka ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dumps:
    sanity: ToolResult  # --deep-iteration --index-sanity-check --verify-index-only, all files
    verify: ToolResult  # --verify-index-only, index files
    data: ToolResult  # --print-data-log --deep-iteration, all files


def _segment_files(topics: dict[str, WrittenTopic]) -> list[Path]:
    files = []
    for topic in topics.values():
        for segment in topic.segments:
            for path in (segment.log, segment.index, segment.time_index):
                assert path.exists(), f"{path} missing: Kafka expects .log, .index and .timeindex per segment"
                files.append(path)
    return files


@pytest.fixture(scope="module")
def dumps(kafka_toolchain: KafkaToolchain, written: dict[str, WrittenTopic]) -> Dumps:  # noqa: F811
    files = _segment_files(written)
    index_files = [f for f in files if f.suffix in (".index", ".timeindex")]
    return Dumps(
        sanity=kafka_toolchain.dump_log_segments(files, "--deep-iteration", "--index-sanity-check",
                                                 "--verify-index-only"),
        verify=kafka_toolchain.dump_log_segments(index_files, "--verify-index-only"),
        data=kafka_toolchain.dump_log_segments(files, "--print-data-log", "--deep-iteration"),
    )


def _sections(result: ToolResult) -> dict[str, list[str]]:
    """stdout split per ``Dumping <file>`` header."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in result.stdout.split("\n")[:-1] if result.stdout.endswith("\n") else result.stdout.split("\n"):
        if line.startswith("Dumping "):
            current = sections.setdefault(line[len("Dumping "):], [])
        else:
            assert current is not None, f"output before the first 'Dumping' line: {line!r}\n{result.describe()}"
            current.append(line)
    return sections


def _stderr_blocks(text: str) -> Counter[str]:
    """stderr as blocks: a line and the indented lines under it."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("  ") and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return Counter("\n".join(b) for b in blocks)


def _allowed_stderr(topics: dict[str, WrittenTopic]) -> Counter[str]:
    """What Kafka prints to stderr for a clean log deep-iterated file by file.

    DumpLogSegments checks that offsets are consecutive starting from -1 for *each* file it is
    given, so it reports every segment whose base offset is not 0, exactly so:
    ``-1 is followed by <base offset>``. It prints the same for Kafka's own segments; anything
    else on stderr is a finding.
    """
    return Counter(
        f"Non-consecutive offsets in {segment.log}\n  -1 is followed by {segment.base_offset}"
        for topic in topics.values() for segment in topic.segments if segment.base_offset != 0
    )


def _check_ran_clean(result: ToolResult, allowed_stderr: Counter[str]) -> None:
    assert result.returncode == 0, f"Kafka's DumpLogSegments failed\n{result.describe()}"
    unexpected = _stderr_blocks(result.stderr) - allowed_stderr
    assert not unexpected, ("Kafka's DumpLogSegments reported errors or mismatches:\n"
                            + "\n".join(unexpected.elements()) + f"\n\n{result.describe()}")


# -- expectations -----------------------------------------------------------------------------------

def _expected_crc(batch: WrittenBatch, on_disk: bytes) -> int:
    if batch.recompressed:
        # The engine rebuilt the batch; the CRC is checked by Kafka's own "isvalid".
        return crc32c(on_disk[21:])
    sent = bytearray(batch.sent)
    if batch.log_append_time >= 0:
        # LogAppendTime: attributes bit 3 and maxTimestamp change, so the CRC is recomputed.
        struct.pack_into(">h", sent, 21, struct.unpack_from(">h", sent, 21)[0] | 0x08)
        struct.pack_into(">q", sent, 35, batch.log_append_time)
        return crc32c(bytes(sent[21:]))
    # baseOffset and partitionLeaderEpoch are outside the CRC: the producer's CRC stays valid.
    return struct.unpack_from(">I", sent, 17)[0]


def _batch_line(batch: WrittenBatch, position: int, size: int, crc: int) -> str:
    count = len(batch.records)
    last_sequence = batch.base_sequence + count - 1 if batch.base_sequence >= 0 else -1
    return (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {LEADER_EPOCH} isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: {position} "
            f"{batch.timestamp_type}: {batch.max_timestamp} size: {size} magic: 2 "
            f"compresscodec: {batch.codec.kafka_name} crc: {crc} isvalid: true")


def _record_line(batch: WrittenBatch, index: int, print_data: bool) -> str:
    record = batch.records[index]
    timestamp = batch.log_append_time if batch.log_append_time >= 0 else record.timestamp
    sequence = batch.base_sequence + index if batch.base_sequence >= 0 else -1
    line = (f"| offset: {record.offset} {batch.timestamp_type}: {timestamp} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)} sequence: {sequence} "
            f"headerKeys: [{','.join(h.key for h in record.headers)}]")
    if print_data:
        if record.key is not None:
            line += " key: " + record.key.decode("utf-8")
        if record.value is not None:
            line += " payload: " + record.value.decode("utf-8")
    return line


def _expected_log(topic: WrittenTopic, segment: Segment, *, print_data: bool) -> list[str]:
    lines = [f"Log starting offset: {segment.base_offset}"]
    for position, size, on_disk in segment.batches:
        base_offset = struct.unpack_from(">q", on_disk, 0)[0]
        batch = topic.batch_at(base_offset)
        if not batch.recompressed:
            assert size == len(batch.sent), f"{segment.log}@{position}: stored batch size differs from the sent one"
        lines.append(_batch_line(batch, position, size, _expected_crc(batch, on_disk)))
        lines.extend(_record_line(batch, i, print_data) for i in range(len(batch.records)))
    return lines


def _index_entries(path: Path) -> list[tuple[int, int]]:
    """(relative offset, position) entries of an .index file, from its bytes."""
    data = path.read_bytes()
    assert len(data) % 8 == 0, f"{path}: length {len(data)} is not a multiple of 8"
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def _time_index_entries(path: Path) -> list[tuple[int, int]]:
    """(timestamp, relative offset) entries of a .timeindex file, from its bytes."""
    data = path.read_bytes()
    assert len(data) % 12 == 0, f"{path}: length {len(data)} is not a multiple of 12"
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def _expected_index_dump(segment: Segment) -> list[str]:
    entries = _index_entries(segment.index)
    if not entries:
        return [f"{segment.index} is empty."]
    return [f"offset: {segment.base_offset + rel} position: {position}" for rel, position in entries]


def _expected_time_index_dump(segment: Segment) -> list[str]:
    return [f"timestamp: {ts} offset: {segment.base_offset + rel}"
            for ts, rel in _time_index_entries(segment.time_index)]


def _assert_lines(actual: list[str] | None, expected: list[str], what: str, result: ToolResult) -> None:
    assert actual is not None, f"Kafka printed nothing for {what}\n{result.describe()}"
    if actual == expected:
        return
    for n, (a, e) in enumerate(zip(actual, expected)):
        if a != e:
            pytest.fail(f"{what}: line {n + 1} differs\n  Kafka:    {a}\n  expected: {e}", pytrace=False)
    pytest.fail(f"{what}: Kafka printed {len(actual)} lines, expected {len(expected)}\n"
                f"  Kafka's extra/last: {actual[len(expected):][:5]}\n  expected extra: {expected[len(actual):][:5]}",
                pytrace=False)


# -- tests ------------------------------------------------------------------------------------------

def test_kafka_toolchain_is_available() -> None:
    """Fails (never skips) with the toolchain's own message when Java, Maven or the download is missing."""
    try:
        toolchain = kafka_toolchain_or_error()
        main_class = toolchain.dump_log_segments_class
    except KafkaToolchainError as error:
        pytest.fail(str(error), pytrace=False)
    result = toolchain.java(main_class, ["--version"])
    assert result.returncode == 0 and result.stdout.strip() == toolchain.version, result.describe()


def test_written_data_has_rolled_segments_and_indexes(written: dict[str, WrittenTopic]) -> None:
    """The fixture exercises what the interop checks are about (guards against a vacuous pass)."""
    for topic in written.values():
        assert len(topic.segments) >= 3, f"{topic.scenario.topic}: only {len(topic.segments)} segments"
        walked = [struct.unpack_from(">q", b, 0)[0] for s in topic.segments for _, _, b in s.batches]
        assert walked == [b.base_offset for b in topic.batches], f"{topic.scenario.topic}: batches lost or reordered"
        for segment in topic.segments:
            assert segment.log.stat().st_size == sum(size for _, size, _ in segment.batches), \
                f"{segment.log}: bytes after the last whole batch"
        assert sum(len(_index_entries(s.index)) for s in topic.segments) >= len(topic.segments), \
            f"{topic.scenario.topic}: too few offset-index entries to test anything"
    records = [r for t in written.values() for b in t.batches for r in b.records]
    assert any(r.key is None for r in records) and any(r.value is None for r in records)
    assert any(r.key == b"" for r in records) and any(r.value == b"" for r in records)
    assert any(h.value is None for r in records for h in r.headers)


def test_sanity_check_mode_is_clean(kafka_toolchain: KafkaToolchain, written: dict[str, WrittenTopic],  # noqa: F811
                                    dumps: Dumps) -> None:
    """``--deep-iteration --index-sanity-check --verify-index-only``: every index passes the broker's check."""
    _check_ran_clean(dumps.sanity, _allowed_stderr(written))


@pytest.mark.parametrize("topic", TOPICS)
def test_sanity_check_mode_output(topic: str, written: dict[str, WrittenTopic], dumps: Dumps) -> None:
    sections = _sections(dumps.sanity)
    for segment in written[topic].segments:
        _assert_lines(sections.get(str(segment.log)), _expected_log(written[topic], segment, print_data=False),
                      f"{segment.log} (deep iteration)", dumps.sanity)
        index_expected = ([f"{segment.index} is empty."] if segment.index.stat().st_size == 0
                          else [f"{segment.index} passed sanity check."])
        _assert_lines(sections.get(str(segment.index)), index_expected, f"{segment.index} sanity", dumps.sanity)
        _assert_lines(sections.get(str(segment.time_index)), [f"{segment.time_index} passed sanity check."],
                      f"{segment.time_index} sanity", dumps.sanity)


def test_verify_index_mode_is_clean(written: dict[str, WrittenTopic], dumps: Dumps) -> None:
    """``--verify-index-only``: each offset-index entry names a batch start whose last offset it holds, and
    each time-index entry names the batch holding that timestamp, in increasing order."""
    _check_ran_clean(dumps.verify, Counter())
    sections = _sections(dumps.verify)
    for topic in written.values():
        for segment in topic.segments:
            index_expected = [f"{segment.index} is empty."] if segment.index.stat().st_size == 0 else []
            _assert_lines(sections.get(str(segment.index)), index_expected, f"{segment.index} verify", dumps.verify)
            _assert_lines(sections.get(str(segment.time_index)), [], f"{segment.time_index} verify", dumps.verify)


def test_print_data_log_mode_is_clean(written: dict[str, WrittenTopic], dumps: Dumps) -> None:
    _check_ran_clean(dumps.data, _allowed_stderr(written))


@pytest.mark.parametrize("topic", TOPICS)
def test_kafka_lists_batches_and_records_as_written(topic: str, written: dict[str, WrittenTopic],
                                                    dumps: Dumps) -> None:
    """``--print-data-log --deep-iteration``: every batch and record line equals what was appended."""
    sections = _sections(dumps.data)
    for segment in written[topic].segments:
        _assert_lines(sections.get(str(segment.log)), _expected_log(written[topic], segment, print_data=True),
                      str(segment.log), dumps.data)


@pytest.mark.parametrize("topic", TOPICS)
def test_kafka_lists_index_entries_as_written(topic: str, written: dict[str, WrittenTopic], dumps: Dumps) -> None:
    sections = _sections(dumps.data)
    for segment in written[topic].segments:
        _assert_lines(sections.get(str(segment.index)), _expected_index_dump(segment), str(segment.index), dumps.data)
        _assert_lines(sections.get(str(segment.time_index)), _expected_time_index_dump(segment),
                      str(segment.time_index), dumps.data)


@pytest.mark.parametrize("topic", TOPICS)
def test_segments_and_indexes_follow_kafkas_rules(topic: str, written: dict[str, WrittenTopic]) -> None:
    """What a Kafka broker would have written for the same appends (LogSegment.append / shouldRoll /
    onBecomeInactiveSegment, reference §2.5, §2.6): segment boundaries and every index entry."""
    t = written[topic]
    interval = t.scenario.index_interval_bytes
    batches = iter(t.batches)
    expected_bases: list[int] = []
    segment_size = 0
    pending = []  # batches of the segment being modelled: (position, size, last offset, max timestamp)
    model: list[tuple[int, list]] = []
    for segment in t.segments:
        for position, size, on_disk in segment.batches:
            batch = next(batches)
            if not expected_bases or segment_size + size > SEGMENT_BYTES:
                expected_bases.append(batch.base_offset)
                pending = []
                model.append((batch.base_offset, pending))
                segment_size = 0
            pending.append((segment_size, size, batch.last_offset, batch.max_timestamp))
            segment_size += size
    assert [s.base_offset for s in t.segments] == expected_bases, "segments rolled at other offsets than Kafka's"
    for segment, (base, appended) in zip(t.segments, model):
        index: list[tuple[int, int]] = []
        time_index: list[tuple[int, int]] = []
        bytes_since_last_entry = 0
        max_ts, offset_of_max_ts = -1, -1

        def maybe_append_time(ts: int, offset: int) -> None:
            if not time_index or ts > time_index[-1][0]:
                time_index.append((ts, offset - base))

        for position, size, last_offset, batch_max_ts in appended:
            if batch_max_ts > max_ts:
                max_ts, offset_of_max_ts = batch_max_ts, last_offset
            if bytes_since_last_entry > interval:
                index.append((last_offset - base, position))
                maybe_append_time(max_ts, offset_of_max_ts)
                bytes_since_last_entry = 0
            bytes_since_last_entry += size
        maybe_append_time(max_ts, offset_of_max_ts)  # at roll / close
        assert _index_entries(segment.index) == index, f"{segment.index}: entries differ from Kafka's rule"
        assert _time_index_entries(segment.time_index) == time_index, \
            f"{segment.time_index}: entries differ from Kafka's rule"


def _expected_snapshot(topic: WrittenTopic, offset: int) -> list[str]:
    """Kafka's lines for a snapshot at ``offset``: the one idempotent producer's last batch below it."""
    written = [b for b in topic.batches if b.producer_id >= 0 and b.last_offset < offset]
    if not written:
        return []
    last = written[-1]
    count = len(last.records)
    return [f"producerId: {last.producer_id} producerEpoch: {last.producer_epoch} coordinatorEpoch: -1 "
            f"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: {last.max_timestamp} "
            f"firstSequence: {last.base_sequence} lastSequence: {last.base_sequence + count - 1} "
            f"lastOffset: {last.last_offset} offsetDelta: {count - 1} timestamp: {last.max_timestamp}"]


def test_kafka_reads_the_producer_snapshots_as_written(kafka_toolchain: KafkaToolchain,  # noqa: F811
                                                       written: dict[str, WrittenTopic]) -> None:
    """A snapshot at every roll (named by the new segment) and one at shutdown (the log end); Kafka's
    tool finds in each the idempotent producer's last batch below it, as appended."""
    files: list[Path] = []
    expected: dict[str, list[str]] = {}
    for topic in written.values():
        end = topic.batches[-1].last_offset + 1
        offsets = sorted({s.base_offset for s in topic.segments[1:]} | {end})
        found = sorted(int(p.name[:20]) for p in topic.directory.glob("*.snapshot"))
        assert found == offsets, f"{topic.scenario.topic}: snapshots at {found}, rolls and the end at {offsets}"
        for offset in offsets:
            path = topic.directory / f"{offset:020d}.snapshot"
            files.append(path)
            expected[str(path)] = _expected_snapshot(topic, offset)
    assert sum(1 for lines in expected.values() if lines) > len(written), "too few producers to test anything"
    result = kafka_toolchain.dump_log_segments(files)
    assert result.returncode == 0 and not result.stderr.strip(), result.describe()
    sections = _sections(result)
    for name, lines in expected.items():
        _assert_lines(sections.get(name), lines, name, result)
