"""The ``stratalog`` command line as a user runs it: real processes on real directories.

Every command here runs as ``python -m stratalog.cli ...`` in its own process, so
argument parsing, exit codes, standard output and the one-line ``error: CODE:
message`` reports are checked exactly as a shell sees them. Refused commands must
leave every file of the data directory byte for byte as it was.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from server_harness import Server, disk_state

TIMEOUT = 120
T0 = 1_700_000_000_000  # explicit timestamps: old ones are fine, message.timestamp.before.max.ms is unbounded


def cli(*args: str | Path, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stratalog.cli", *map(str, args)], input=input,
                          capture_output=True, text=True, timeout=TIMEOUT)


def ok(*args: str | Path, input: str | None = None) -> str:
    result = cli(*args, input=input)
    assert result.returncode == 0, f"stratalog {' '.join(map(str, args))} failed:\n{result.stderr}"
    return result.stdout


def refused(*args: str | Path, input: str | None = None) -> str:
    """Run a command that must fail; return its one error line (``error: CODE: message``)."""
    result = cli(*args, input=input)
    assert result.returncode == 1, f"expected exit 1, got {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line:\n{result.stderr}"
    return lines[0]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def lines_of(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def tree(root: Path) -> dict[str, str]:
    """Every path under root, with the SHA-256 of each file's bytes."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))}


def consume(data: Path, topic: str, *extra: str) -> list[dict]:
    return json_lines(ok("consume", "--data-dir", data, "--topic", topic, *extra))


def describe(data: Path, topic: str) -> dict:
    [described] = json_lines(ok("topics", "describe", "--data-dir", data, "--topic", topic, "--json"))
    return described


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def topic(data: Path) -> str:
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "1")
    return "orders"


# -- topics ----------------------------------------------------------------------------------

def test_a_created_topic_is_listed_and_described_with_its_partitions_and_overrides(data):
    assert ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "3",
              "--config", "retention.ms=60000", "--config", "segment.bytes=1048576") == "Created topic orders.\n"
    ok("topics", "create", "--data-dir", data, "--topic", "audit")
    assert ok("topics", "list", "--data-dir", data).splitlines() == ["audit", "orders"]
    described = describe(data, "orders")
    assert described["partitionCount"] == 3
    assert described["configs"] == {"retention.ms": "60000", "segment.bytes": "1048576"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["logEndOffset"] == 0 and p["logStartOffset"] == 0 for p in described["partitions"])
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["audit-0", "orders-0", "orders-1", "orders-2"]
    text = ok("topics", "describe", "--data-dir", data, "--topic", "orders")
    assert text.splitlines()[0] == "Topic: orders\tPartitionCount: 3\tConfigs: retention.ms=60000,segment.bytes=1048576"


def test_altering_a_topic_merges_new_overrides_and_drops_deleted_ones(data):
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--config", "retention.ms=60000")
    assert ok("topics", "alter", "--data-dir", data, "--topic", "orders", "--config", "cleanup.policy=compact",
              "--config", "segment.ms=1000") == "Altered topic orders.\n"
    assert describe(data, "orders")["configs"] == {"retention.ms": "60000", "cleanup.policy": "compact",
                                                   "segment.ms": "1000"}
    ok("topics", "alter", "--data-dir", data, "--topic", "orders", "--delete-config", "retention.ms")
    assert describe(data, "orders")["configs"] == {"cleanup.policy": "compact", "segment.ms": "1000"}


def test_partitions_can_grow_and_new_ones_take_the_topic_overrides_but_never_shrink(data):
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "2", "--config", "retention.ms=5000")
    ok("topics", "alter", "--data-dir", data, "--topic", "orders", "--partitions", "4")
    described = describe(data, "orders")
    assert described["partitionCount"] == 4
    assert described["configs"] == {"retention.ms": "5000"}
    assert (data / "orders-3").is_dir()
    ok("produce", "--data-dir", data, "--topic", "orders", "--partition", "3", input=lines_of({"value": "x", "timestamp": T0}))
    assert [r["value"] for r in consume(data, "orders", "--partition", "3")] == ["x"]
    before = tree(data)
    error = refused("topics", "alter", "--data-dir", data, "--topic", "orders", "--partitions", "3")
    assert error.startswith("error: INVALID_PARTITIONS: ") and "can only grow" in error
    assert tree(data) == before


def test_a_deleted_topic_disappears_with_its_directories(data):
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "2")
    ok("topics", "create", "--data-dir", data, "--topic", "audit")
    ok("produce", "--data-dir", data, "--topic", "orders", "--partition", "0", input=lines_of({"value": "x", "timestamp": T0}))
    assert ok("topics", "delete", "--data-dir", data, "--topic", "orders") == "Deleted topic orders.\n"
    assert ok("topics", "list", "--data-dir", data).splitlines() == ["audit"]
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["audit-0"]
    error = refused("consume", "--data-dir", data, "--topic", "orders")
    assert error.startswith("error: UNKNOWN_TOPIC_OR_PARTITION: ")


# -- produce and consume ---------------------------------------------------------------------

PRODUCED = [
    {"key": "alice", "value": "hello", "timestamp": T0},
    {"key": None, "value": "no key", "timestamp": T0 + 5},
    {"key": "alice", "value": None, "timestamp": T0 - 5},  # a tombstone, timestamps need not grow
    {"key_b64": base64.b64encode(b"\xff\xfe\x00").decode(), "value_b64": base64.b64encode(b"\x80binary").decode(),
     "timestamp": T0 + 10},
    {"key": "bob", "value": "with headers", "timestamp": T0 + 20,
     "headers": {"trace": "abc", "empty": "", "none": None, "raw": {"b64": base64.b64encode(b"\xc3\x28").decode()}}},
    {"key": "carol", "value": "repeated header keys", "timestamp": T0 + 30,
     "headers": [["h", "1"], ["h", "2"], ["h", None]]},
    {"key": "", "value": "", "timestamp": T0 + 40},  # empty is not null
    {"value": "ünïcødé ☃", "timestamp": T0 + 50},
]

CONSUMED = [
    {"offset": 0, "timestamp": T0, "key": "alice", "value": "hello", "headers": {}},
    {"offset": 1, "timestamp": T0 + 5, "key": None, "value": "no key", "headers": {}},
    {"offset": 2, "timestamp": T0 - 5, "key": "alice", "value": None, "headers": {}},
    {"offset": 3, "timestamp": T0 + 10, "key_b64": base64.b64encode(b"\xff\xfe\x00").decode(),
     "value_b64": base64.b64encode(b"\x80binary").decode(), "headers": {}},
    {"offset": 4, "timestamp": T0 + 20, "key": "bob", "value": "with headers",
     "headers": {"trace": "abc", "empty": "", "none": None, "raw": {"b64": base64.b64encode(b"\xc3\x28").decode()}}},
    {"offset": 5, "timestamp": T0 + 30, "key": "carol", "value": "repeated header keys",
     "headers": [["h", "1"], ["h", "2"], ["h", None]]},
    {"offset": 6, "timestamp": T0 + 40, "key": "", "value": "", "headers": {}},
    {"offset": 7, "timestamp": T0 + 50, "key": None, "value": "ünïcødé ☃", "headers": {}},
]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_consume_gives_back_exactly_the_produced_json_records_with_offsets_and_timestamps(data, topic, codec):
    out = json_lines(ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0", "--compression", codec,
                        "--batch-records", "3", input=lines_of(*PRODUCED)))
    assert [(r["baseOffset"], r["lastOffset"], r["records"]) for r in out] == [(0, 2, 3), (3, 5, 3), (6, 7, 2)]
    got = consume(data, topic)
    expected = [{"topic": topic, "partition": 0, "timestampType": "CreateTime", **r} for r in CONSUMED]
    assert got == expected


def test_a_record_without_a_timestamp_gets_the_time_of_the_produce(data, topic):
    before = time.time_ns() // 1_000_000
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0", input=lines_of({"value": "now"}))
    after = time.time_ns() // 1_000_000
    [record] = consume(data, topic)
    assert before <= record["timestamp"] <= after
    assert record["timestampType"] == "CreateTime"


def test_a_log_append_time_topic_reports_the_broker_time_and_its_type(data):
    ok("topics", "create", "--data-dir", data, "--topic", "stamped", "--config", "message.timestamp.type=LogAppendTime")
    out = json_lines(ok("produce", "--data-dir", data, "--topic", "stamped", "--partition", "0",
                        input=lines_of({"value": "a", "timestamp": T0}, {"value": "b", "timestamp": T0 + 1})))
    [appended] = out
    assert appended["logAppendTime"] > T0
    got = consume(data, "stamped")
    assert [(r["timestamp"], r["timestampType"]) for r in got] == [(appended["logAppendTime"], "LogAppendTime")] * 2


def test_consume_starts_at_from_offset_even_inside_a_batch_and_stops_after_max_records(data, topic):
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0", "--batch-records", "4",
       input=lines_of(*({"value": f"v{i}", "timestamp": T0 + i} for i in range(10))))
    assert [r["offset"] for r in consume(data, topic, "--from-offset", "2", "--max-records", "3")] == [2, 3, 4]
    assert [r["value"] for r in consume(data, topic, "--from-offset", "7")] == ["v7", "v8", "v9"]
    assert consume(data, topic, "--from-offset", "10") == []
    assert [r["offset"] for r in consume(data, topic, "--max-records", "1")] == [0]


def test_consume_starts_at_the_log_start_offset_after_records_are_deleted(data, topic):
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0",
       input=lines_of(*({"value": f"v{i}", "timestamp": T0} for i in range(5))))
    ok("delete-records", "--data-dir", data, "--topic", topic, "--partition", "0", "--before-offset", "3")
    assert [r["offset"] for r in consume(data, topic)] == [3, 4]
    error = refused("consume", "--data-dir", data, "--topic", topic, "--from-offset", "1")
    assert error.startswith("error: OFFSET_OUT_OF_RANGE: ")


def test_bytes_that_are_not_utf8_come_out_as_base64_fields(data, topic):
    raw_key, raw_value = bytes(range(250, 256)), b"ok\xe9"  # latin-1, not UTF-8
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0", input=lines_of({
        "key_b64": base64.b64encode(raw_key).decode(), "value_b64": base64.b64encode(raw_value).decode(),
        "timestamp": T0, "headers": {"bin": {"b64": base64.b64encode(b"\xff").decode()}}}))
    [record] = consume(data, topic)
    assert "key" not in record and "value" not in record
    assert base64.b64decode(record["key_b64"]) == raw_key
    assert base64.b64decode(record["value_b64"]) == raw_value
    assert record["headers"] == {"bin": {"b64": base64.b64encode(b"\xff").decode()}}


def test_keyed_records_go_to_the_partition_kafkas_murmur2_partitioner_picks(data):
    partitions = 5
    ok("topics", "create", "--data-dir", data, "--topic", "keyed", "--partitions", str(partitions))
    keys = [f"customer-{i}" for i in range(60)] + ["", "ünïcødé", "a", "ab", "abc", "abcd", "abcde"]
    ok("produce", "--data-dir", data, "--topic", "keyed",
       input=lines_of(*({"key": k, "value": str(n), "timestamp": T0} for n, k in enumerate(keys))))
    placed = {}
    for partition in range(partitions):
        for record in consume(data, "keyed", "--partition", str(partition)):
            placed[record["key"]] = partition
    assert set(placed) == set(keys)
    for key in keys:
        expected = (kafka_python_murmur2(key.encode()) & 0x7FFFFFFF) % partitions
        assert placed[key] == expected, f"key {key!r}"
    assert len(set(placed.values())) == partitions  # the keys really spread


def test_records_of_one_key_keep_their_order_within_their_partition(data):
    ok("topics", "create", "--data-dir", data, "--topic", "keyed", "--partitions", "3")
    ok("produce", "--data-dir", data, "--topic", "keyed",
       input=lines_of(*({"key": f"k{i % 4}", "value": str(i), "timestamp": T0 + i} for i in range(40))))
    seen: dict[str, list[int]] = {}
    for partition in range(3):
        for record in consume(data, "keyed", "--partition", str(partition)):
            seen.setdefault(record["key"], []).append(int(record["value"]))
    assert seen == {f"k{k}": list(range(k, 40, 4)) for k in range(4)}


# -- refused input: exit 1, one clear error line, nothing changed on disk ----------------------

def _produce_refused(data: Path, topic: str, text: str, *extra: str) -> str:
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0",
       input=lines_of({"value": "already here", "timestamp": T0}))
    before = tree(data)
    error = refused("produce", "--data-dir", data, "--topic", topic, "--partition", "0", *extra, input=text)
    assert tree(data) == before
    assert [r["value"] for r in consume(data, topic)] == ["already here"]
    return error


def test_invalid_json_on_line_3_names_the_line_and_appends_nothing_from_lines_1_and_2(data, topic):
    text = lines_of({"value": "one", "timestamp": T0}, {"value": "two", "timestamp": T0}) + '{"value": "three",\n'
    error = _produce_refused(data, topic, text)
    assert error.startswith("error: INVALID_RECORD: ")
    assert "line 3" in error and "not valid JSON" in error


def test_an_unknown_field_is_refused_by_name(data, topic):
    error = _produce_refused(data, topic, lines_of({"value": "x", "timestamp": T0}, {"value": "x", "colour": "red"}))
    assert error.startswith("error: INVALID_RECORD: ")
    assert "line 2" in error and "colour" in error


def test_bad_base64_is_refused(data, topic):
    error = _produce_refused(data, topic, lines_of({"value_b64": "not base64!", "timestamp": T0}))
    assert error.startswith("error: INVALID_RECORD: ")
    assert "value_b64" in error and "base64" in error


def test_a_timestamp_too_far_in_the_future_on_line_3_appends_nothing_from_lines_1_and_2(data, topic):
    future = time.time_ns() // 1_000_000 + 2 * 3_600_000  # message.timestamp.after.max.ms is one hour
    text = lines_of({"value": "one", "timestamp": T0}, {"value": "two", "timestamp": T0},
                    {"value": "three", "timestamp": future})
    error = _produce_refused(data, topic, text, "--batch-records", "1")
    assert error.startswith("error: INVALID_TIMESTAMP: ")


def test_a_partition_that_does_not_exist_is_refused(data, topic):
    before = tree(data)
    error = refused("produce", "--data-dir", data, "--topic", topic, "--partition", "7",
                    input=lines_of({"value": "x", "timestamp": T0}))
    assert error.startswith("error: INVALID_PARTITIONS: ") and "7" in error
    assert tree(data) == before


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "with space", "x" * 250])
def test_an_illegal_topic_name_is_refused_and_creates_nothing(tmp_path, data, name):
    ok("topics", "create", "--data-dir", data, "--topic", "fine")
    before = tree(tmp_path)
    error = refused("topics", "create", "--data-dir", data, "--topic", name)
    assert error.startswith("error: INVALID_TOPIC_EXCEPTION: ")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("command", [
    ["produce", "--partition", "0"],
    ["consume"],
    ["topics", "describe"],
    ["topics", "alter", "--config", "retention.ms=1"],
    ["topics", "delete"],
])
def test_an_unknown_topic_is_refused(data, topic, command):
    before = tree(data)
    error = refused(*command, "--data-dir", data, "--topic", "missing", input=lines_of({"value": "x"}))
    assert error.startswith("error: UNKNOWN_TOPIC_OR_PARTITION: ") and "missing" in error
    assert tree(data) == before


@pytest.mark.parametrize("config", ["segment.bytes=abc", "segment.bytes=1", "retention.ms=-5",
                                    "cleanup.policy=sometimes", "no.such.setting=1", "novalue"])
def test_an_invalid_config_value_is_refused_on_create_and_alter(data, topic, config):
    before = tree(data)
    error = refused("topics", "create", "--data-dir", data, "--topic", "other", "--config", config)
    assert error.startswith("error: INVALID_CONFIG: ")
    error = refused("topics", "alter", "--data-dir", data, "--topic", topic, "--config", config)
    assert error.startswith("error: INVALID_CONFIG: ")
    assert tree(data) == before


HOLDER = textwrap.dedent("""
    import sys
    from stratalog.storage.log_manager import open_log_manager
    manager = open_log_manager([sys.argv[1]])
    print("ready", flush=True)
    sys.stdin.read()  # hold the directory until the test closes our stdin
    manager.close()
""")


@pytest.mark.parametrize("command", [
    ["topics", "list"],
    ["topics", "create", "--topic", "other"],
    ["produce", "--topic", "orders", "--partition", "0"],
    ["consume", "--topic", "orders"],
    ["checkpoint"],
])
def test_a_directory_held_by_another_process_is_refused_untouched(data, topic, command):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        before = tree(data)
        error = refused(*command, "--data-dir", data, input=lines_of({"value": "x", "timestamp": T0}))
        assert error.startswith(f"error: KAFKA_STORAGE_ERROR: data directory {data.resolve()} is in use")
        assert str(holder.pid) in error  # it says who holds the lock
        assert tree(data) == before
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=TIMEOUT)
    assert holder.returncode == 0


# -- checkpoints -----------------------------------------------------------------------------

def _checkpoint_entries(path: Path) -> tuple[list[str], set[str]]:
    text = path.read_bytes().decode("utf-8")
    assert text.endswith("\n") and "\r" not in text
    lines = text[:-1].split("\n")
    assert lines[0] == "0", "version line"
    assert lines[1] == str(len(lines) - 2), "entry-count line"
    return lines[:2], set(lines[2:])


def test_checkpoint_writes_kafkas_offset_checkpoint_files(data):
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "2")
    ok("topics", "create", "--data-dir", data, "--topic", "audit.log")
    ok("produce", "--data-dir", data, "--topic", "orders", "--partition", "0",
       input=lines_of(*({"value": str(i), "timestamp": T0} for i in range(5))))
    ok("produce", "--data-dir", data, "--topic", "audit.log", "--partition", "0",
       input=lines_of({"value": "x", "timestamp": T0}))
    ok("delete-records", "--data-dir", data, "--topic", "orders", "--partition", "0", "--before-offset", "2")
    out = json_lines(ok("checkpoint", "--data-dir", data))
    assert {(r["topic"], r["partition"], r["recoveryPoint"], r["logStartOffset"], r["highWatermark"]) for r in out} == {
        ("orders", 0, 5, 2, 5), ("orders", 1, 0, 0, 0), ("audit.log", 0, 1, 0, 1)}
    everything = {"orders 0 5", "orders 1 0", "audit.log 0 1"}
    assert _checkpoint_entries(data / "recovery-point-offset-checkpoint")[1] == everything
    assert _checkpoint_entries(data / "replication-offset-checkpoint")[1] == everything
    # Only partitions whose start offset is past their first segment's base offset (§2.12).
    assert _checkpoint_entries(data / "log-start-offset-checkpoint")[1] == {"orders 0 2"}
    assert (data / "cleaner-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert (data / "recovery-point-offset-checkpoint").read_bytes().startswith(b"0\n3\n")


# -- maintenance commands on a local directory ---------------------------------------------

def test_compact_on_a_directory_keeps_the_latest_value_per_key_and_reports_the_pass(data):
    ok("topics", "create", "--data-dir", data, "--topic", "c", "--config", "cleanup.policy=compact",
       "--config", "segment.bytes=300")
    ok("produce", "--data-dir", data, "--topic", "c", "--batch-records", "1",
       input=lines_of(*({"key": f"k{i % 3}", "value": f"value-{i}"} for i in range(30))))
    out = json_lines(ok("compact", "--data-dir", data, "--topic", "c", "--force"))
    report, summary = out[0], out[-1]
    assert summary == {"logsCleaned": 1}
    assert report["topic"] == "c" and report["recordsRemoved"] > 0 and report["dirtyRatioAfter"] == 0.0
    kept = {(r["key"], r["value"]) for r in consume(data, "c") if r["offset"] < report["cleanedUpTo"]}
    # Below the cleaned offset only the latest value of each key remains.
    latest = {f"k{i % 3}": f"value-{i}" for i in range(report["cleanedUpTo"])}
    assert kept == set(latest.items())


def test_retention_on_a_directory_deletes_expired_segments_and_says_why(data):
    ok("topics", "create", "--data-dir", data, "--topic", "r", "--config", "segment.bytes=200",
       "--config", "retention.ms=1000")
    old = int(time.time() * 1000) - 3_600_000
    ok("produce", "--data-dir", data, "--topic", "r", "--batch-records", "1",
       input=lines_of(*({"key": "k", "value": "x" * 50, "timestamp": old} for _ in range(6))))
    out = json_lines(ok("retention", "--data-dir", data, "--topic", "r"))
    deleted = [line for line in out if "reason" in line]
    assert deleted and all(line["reason"] == "retention time breach" for line in deleted)
    assert out[-1] == {"segmentsDeleted": len(deleted)}
    assert consume(data, "r") == []


def test_delete_records_moves_the_low_watermark_and_refuses_an_offset_past_the_end(data):
    ok("topics", "create", "--data-dir", data, "--topic", "d")
    ok("produce", "--data-dir", data, "--topic", "d", input=lines_of(*({"value": str(i)} for i in range(5))))
    out = json_lines(ok("delete-records", "--data-dir", data, "--topic", "d", "--partition", "0",
                        "--before-offset", "3"))
    assert out[0]["lowWatermark"] == 3
    assert [r["offset"] for r in consume(data, "d")] == [3, 4]
    before = tree(data)
    message = refused("delete-records", "--data-dir", data, "--topic", "d", "--partition", "0",
                      "--before-offset", "9")
    assert "OFFSET_OUT_OF_RANGE" in message and "high watermark 5" in message
    assert tree(data) == before


def test_the_operator_and_agent_commands_arrive_through_the_stratalog_commands_entry_point():
    # The engine never imports the operator: `stratalog operator` and `stratalog agent` exist because
    # the installed distribution registers stratalog_operator.cli:register in the group.
    from importlib.metadata import entry_points
    assert "stratalog_operator.cli:register" in {e.value for e in entry_points(group="stratalog.commands")}
    for command in ("operator", "agent"):
        result = cli(command, "--help")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: stratalog {command} ")


# -- bad arguments: one error line naming the argument, nothing on disk touched ---------------

@pytest.mark.parametrize("count", ["0", "-1", "100001"])
def test_a_partition_count_kafka_refuses_is_refused_before_anything_is_created(tmp_path, data, count):
    # The directory does not exist yet: `topics create` would create it, so the count is checked first.
    before = tree(tmp_path)
    error = refused("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", count)
    assert error == f"error: INVALID_PARTITIONS: topic 'orders': --partitions must be between 1 and 100000, got {count}"
    assert tree(tmp_path) == before and not data.exists()
    ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "2")
    before = tree(tmp_path)
    error = refused("topics", "alter", "--data-dir", data, "--topic", "orders", "--partitions", count)
    assert error == f"error: INVALID_PARTITIONS: topic 'orders': --partitions must be between 1 and 100000, got {count}"
    assert tree(tmp_path) == before
    assert describe(data, "orders")["partitionCount"] == 2


def test_the_broker_refuses_a_partition_count_below_one_for_every_transport(tmp_path):
    # TopicAdmin is what the CLI, the HTTP API and the Kubernetes agent all call.
    from stratalog.broker.topics import TopicAdmin
    from stratalog.common.errors import InvalidPartitionsError
    from stratalog.storage.log_manager import open_log_manager

    manager = open_log_manager([tmp_path / "data"], create_missing=True)
    try:
        admin = TopicAdmin(manager)
        with pytest.raises(InvalidPartitionsError, match=r"partitions must be between 1 and 100000, got 0"):
            admin.create_topic("orders", 0)
        assert manager.topics() == []
        admin.create_topic("orders", 1)
        with pytest.raises(InvalidPartitionsError, match=r"partitions must be between 1 and 100000, got 0"):
            admin.add_partitions("orders", 0)
        assert len(manager.describe_topic("orders").partitions) == 1
    finally:
        manager.close()


# (what is wrong with the path, how to make it, the operating system's reason)
FILE_PROBLEMS = [
    pytest.param(lambda p: p, "No such file or directory", id="missing"),
    pytest.param(lambda p: (p.mkdir(), p)[1], "Is a directory", id="a-directory"),
    pytest.param(lambda p: (p.write_bytes(b""), p / "inside")[1], "Not a directory", id="under-a-file"),
]

# Every file argument of every command: (its flag, the command with {} where the path goes).
FILE_ARGUMENTS = [
    pytest.param("--batch-file", ["produce", "--data-dir", "{data}", "--topic", "orders", "--partition", "0",
                                  "--batch-file", "{}"], id="produce--batch-file"),
    pytest.param("--input", ["produce", "--data-dir", "{data}", "--topic", "orders", "--input", "{}"],
                 id="produce--input"),
    pytest.param("--files", ["dump-log", "--files", "{}"], id="dump-log--files"),
    pytest.param("--plan", ["apply-compaction-plan", "--data-dir", "{data}", "--topic", "orders", "--partition", "0",
                            "--plan", "{}"], id="apply-compaction-plan--plan"),
]


@pytest.mark.parametrize("flag, command", FILE_ARGUMENTS)
@pytest.mark.parametrize("make, reason", FILE_PROBLEMS)
def test_a_file_argument_that_cannot_be_read_is_named_with_the_os_reason(tmp_path, data, topic, flag, command,
                                                                         make, reason):
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0",
       input=lines_of({"key": "k", "value": "already here", "timestamp": T0}))
    path = make(tmp_path / "00000000000000000000.log")
    before = tree(tmp_path)
    error = refused(*(part.replace("{data}", str(data)).replace("{}", str(path)) for part in command))
    assert error == f"error: INVALID_REQUEST: {flag} {path}: cannot read: {reason}"
    assert tree(tmp_path) == before
    assert [r["value"] for r in consume(data, topic)] == ["already here"]


def test_dump_log_names_the_missing_log_of_an_index(tmp_path):
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(b"")
    error = refused("dump-log", "--files", index)
    assert error == (f"error: INVALID_REQUEST: --files {index}: its log {tmp_path / '00000000000000000000.log'}: "
                     "cannot read: No such file or directory")


def test_a_plan_header_with_nan_is_refused_naming_the_field(tmp_path, data, topic):
    keep = tmp_path / "orders-0.keep"
    keep.write_bytes(b"")
    (tmp_path / "orders-0.keep.json").write_text('{"format": "stratalog-keep-v1", "topic": "orders", '
                                                 '"partition": 0, "highWatermark": Infinity, "count": 0, '
                                                 '"logStartOffset": 0}')
    before = tree(tmp_path)
    error = refused("apply-compaction-plan", "--data-dir", data, "--topic", topic, "--partition", "0", "--plan", keep)
    assert error == (f"error: INVALID_REQUEST: --plan {keep}: its header {keep}.json: field 'highWatermark': "
                     "Infinity is not valid JSON (JSON numbers are finite)")
    assert tree(tmp_path) == before


NOT_FINITE = "is not valid JSON (JSON numbers are finite)"


@pytest.mark.parametrize("line, where, message", [
    ('{"key": "k", "value": NaN}', "field 'value'", f"NaN {NOT_FINITE}"),
    ('{"value": "v", "headers": {"h": Infinity}}', "field 'headers.h'", f"Infinity {NOT_FINITE}"),
    ('{"key": -Infinity, "value": "v"}', "field 'key'", f"-Infinity {NOT_FINITE}"),
    ('{"value": "v", "headers": [["h", "1"], ["h", NaN]]}', "field 'headers[1][1]'", f"NaN {NOT_FINITE}"),
    ('{"value": "v", "timestamp": 1e999}', "field 'timestamp'",
     "1e999 is too large for a 64-bit floating-point number (JSON numbers here must be finite)"),
    ('NaN', "", f"NaN {NOT_FINITE}"),
])
def test_nan_and_infinity_are_refused_naming_the_line_and_field(data, topic, line, where, message):
    text = lines_of({"key": "k", "value": "fine", "timestamp": T0}) + line + "\n"
    error = _produce_refused(data, topic, text)
    at = f"standard input, line 2, {where}" if where else "standard input, line 2"
    assert error == f"error: INVALID_RECORD: {at}: {message}"


def test_nan_in_an_input_file_is_refused_naming_the_file(tmp_path, data, topic):
    path = tmp_path / "records.jsonl"
    path.write_text('{"key": "k", "value": 1.5}\n{"key": "k", "value": NaN}\n')
    error = _produce_refused(data, topic, "", "--input", str(path))
    assert error == f"error: INVALID_RECORD: {path}, line 2, field 'value': NaN {NOT_FINITE}"


def test_input_that_is_not_utf8_is_refused_naming_the_line(data, topic):
    ok("produce", "--data-dir", data, "--topic", topic, "--partition", "0",
       input=lines_of({"value": "already here", "timestamp": T0}))
    before = tree(data)
    result = subprocess.run([sys.executable, "-m", "stratalog.cli", "produce", "--data-dir", str(data), "--topic",
                             topic, "--partition", "0"], input=b'{"value": "ok"}\n{"value": "\xff"}\n',
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 1
    assert result.stderr.decode() == "error: INVALID_RECORD: standard input, line 2: not UTF-8 text (byte 11 of the line)\n"
    assert tree(data) == before


# -- --server: the commands the HTTP API serves, against a running `stratalog serve` -----------

@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    running = Server([tmp_path / "served"], "--no-schedule").start()
    yield running
    assert running.terminate() == 0, running.log()


def test_delete_records_and_checkpoint_work_through_a_running_server(served):
    url, data = served.base, served.data_dirs[0]
    ok("topics", "create", "--server", url, "--topic", "orders", "--partitions", "2")
    ok("produce", "--server", url, "--topic", "orders", "--partition", "0",
       input=lines_of(*({"key": f"k{i}", "value": f"v{i}", "timestamp": T0} for i in range(5))))
    # The server holds the directory's lock: the local mode is refused, hence --server.
    for command in (["delete-records", "--topic", "orders", "--partition", "0", "--before-offset", "3"],
                    ["checkpoint"]):
        error = refused(*command, "--data-dir", data)
        assert error.startswith(f"error: KAFKA_STORAGE_ERROR: data directory {data.resolve()} is in use")

    out = json_lines(ok("delete-records", "--server", url, "--topic", "orders", "--partition", "0",
                        "--before-offset", "3"))
    assert out == [{"topic": "orders", "partition": 0, "lowWatermark": 3, "segments": 1}]
    assert served.stats("orders", 0)["logStartOffset"] == 3
    assert [r["offset"] for r in json_lines(ok("consume", "--server", url, "--topic", "orders"))] == [3, 4]

    before = disk_state(data)
    error = refused("delete-records", "--server", url, "--topic", "orders", "--partition", "0", "--before-offset", "9")
    assert error == "error: OFFSET_OUT_OF_RANGE: orders-0: beforeOffset 9 is past the high watermark 5"
    error = refused("delete-records", "--server", url, "--topic", "orders", "--partition", "7", "--before-offset", "0")
    assert error.startswith("error: UNKNOWN_TOPIC_OR_PARTITION: ") and "orders-7" in error
    error = refused("topics", "create", "--server", url, "--topic", "other", "--partitions", "0")
    assert error == "error: INVALID_PARTITIONS: topic 'other': --partitions must be between 1 and 100000, got 0"
    error = refused("topics", "alter", "--server", url, "--topic", "orders", "--partitions", "0")
    assert error == "error: INVALID_PARTITIONS: topic 'orders': --partitions must be between 1 and 100000, got 0"
    assert disk_state(data) == before
    assert served.get("/v1/topics/other").status_code == 404

    out = json_lines(ok("checkpoint", "--server", url))
    assert out == [{"topic": "orders", "partition": 0, "recoveryPoint": 5, "logStartOffset": 3, "highWatermark": 5},
                   {"topic": "orders", "partition": 1, "recoveryPoint": 0, "logStartOffset": 0, "highWatermark": 0}]
    assert _checkpoint_entries(data / "log-start-offset-checkpoint")[1] == {"orders 0 3"}
    assert _checkpoint_entries(data / "recovery-point-offset-checkpoint")[1] == {"orders 0 5", "orders 1 0"}
    assert _checkpoint_entries(data / "replication-offset-checkpoint")[1] == {"orders 0 5", "orders 1 0"}

    unreachable = refused("delete-records", "--server", "http://127.0.0.1:9", "--topic", "orders", "--partition", "0",
                          "--before-offset", "0", "--wait-for-server", "0")
    assert unreachable.startswith("error: NETWORK_EXCEPTION: cannot reach http://127.0.0.1:9")
    assert refused("checkpoint", "--server", "http://127.0.0.1:9", "--wait-for-server", "0").startswith(
        "error: NETWORK_EXCEPTION: ")


@pytest.mark.parametrize("flag, value", [("--kafka-advertise", ":9092"), ("--kafka-advertise", "dir-a.ns.svc:0"),
                                         ("--kafka-listen", "nowhere"), ("--listen", "host:http")])
def test_an_agent_address_flag_that_is_not_host_and_port_is_refused_by_name(flag, value):
    result = cli("agent", "--logdir", "dir-a", "--namespace", "ns", flag, value)
    assert result.returncode == 2 and f"argument {flag}: {value!r}: expected HOST:PORT" in result.stderr, \
        result.stderr


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "86401"])
def test_a_server_wait_that_is_not_seconds_from_0_to_a_day_is_refused_by_name(value: str) -> None:
    result = cli("topics", "list", "--server", "http://127.0.0.1:9", "--wait-for-server", value)
    assert result.returncode == 2 and f"argument --wait-for-server: {value!r}: expected" in result.stderr, \
        result.stderr
