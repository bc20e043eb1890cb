"""``stratalog serve`` over real HTTP: a subprocess on loopback, driven as clients would drive it.

Raw batches come from kafka-python (an independent implementation of the v2
format) and fetched batches are parsed by it; JSON records go through the
shared JSON form. Every error code a client can provoke is provoked, and each
refused request is shown to leave the data directory byte-for-byte unchanged.
Restarts after SIGTERM (clean: recovery skipped) and SIGKILL (recovery, with
every fsync-acknowledged record present) are checked through ``/v1/status``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from kafka.partitioner.default import murmur2 as kafka_murmur2
from kafka.record.default_records import DefaultRecordBatchBuilder
from prometheus_client.parser import text_string_to_metric_families

from server_harness import RECORD_BATCH, STRATALOG, Server, disk_state, kafka_batch, kafka_parse
from stratalog.server.app import ROUTES

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    running = Server([root / "data"], "--no-schedule", "--create-topic", "demo:2").start()
    yield running
    assert running.terminate() == 0, running.log()


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def server_on_each_loop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on each event loop stratalog serve runs on (uvloop is the default where installed)."""
    root = tmp_path_factory.mktemp(f"serve-{request.param}")
    running = Server([root / "data"], "--no-schedule", "--event-loop", request.param).start()
    assert f"event loop {request.param})" in running.log()
    yield running
    assert running.terminate() == 0, running.log()


def metric_samples(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = server.get("/metrics").text
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


# -- the document ---------------------------------------------------------------------------------
def test_openapi_document_names_exactly_the_served_routes(server: Server) -> None:
    document = server.ok("GET", "/v1/openapi.json")
    assert document["openapi"].startswith("3.")
    documented = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item if method in ("get", "post", "patch", "delete", "put")}
    assert documented == {(method, path) for method, path, _, _ in ROUTES}
    # Access control is off here: no operation asks for a credential.
    assert "securitySchemes" not in document["components"]
    assert not any("security" in item[method] for item in document["paths"].values() for method in item
                   if method != "parameters")


def test_health_ready_and_status(server: Server) -> None:
    assert server.ok("GET", "/healthz") == {"status": "alive"}
    assert server.ok("GET", "/readyz") == {"status": "ready"}
    status = server.ok("GET", "/v1/status")
    assert status["ready"] is True and status["schedule"] is False
    assert status["dataDirs"][0]["hadCleanShutdown"] is False  # a fresh directory
    assert status["limits"]["maxFetchWaitMs"] == 30_000


def test_before_the_engine_is_open_v1_answers_503_but_health_and_status_answer(tmp_path: Path) -> None:
    # In-process: an app whose engine has not been started is exactly the state during a long recovery.
    from aiohttp.test_utils import TestClient, TestServer

    from stratalog.server.app import create_app
    from stratalog.server.state import ServerState
    from stratalog.broker.engine import Engine

    async def scenario() -> dict[str, tuple[int, Any]]:
        state = ServerState(Engine([tmp_path / "data"], schedule=False))
        try:
            async with TestClient(TestServer(create_app(state))) as client:
                out = {}
                for path in ("/v1/topics", "/v1/topics/demo/partitions/0/records", "/healthz", "/readyz",
                             "/v1/status", "/v1/openapi.json"):
                    reply = await client.get(path)
                    out[path] = (reply.status, await reply.json())
                return out
        finally:
            state.shutdown_pools()

    answers = asyncio.run(scenario())
    for path in ("/v1/topics", "/v1/topics/demo/partitions/0/records", "/readyz"):
        assert answers[path][0] == 503 and answers[path][1]["error_code"] == "BROKER_NOT_AVAILABLE", answers[path]
    assert answers["/healthz"] == (200, {"status": "alive"})
    assert answers["/v1/status"][0] == 200 and answers["/v1/status"][1]["ready"] is False
    assert answers["/v1/openapi.json"][0] == 200


def test_a_directory_held_by_another_server_is_refused(server: Server) -> None:
    second = Server(server.data_dirs, "--no-schedule").start(wait_ready=False)
    assert second.proc is not None
    assert second.proc.wait(timeout=60) == 1
    assert "cannot start: KAFKA_STORAGE_ERROR" in second.log()
    assert server.ok("GET", "/readyz")  # the first one is unaffected


# -- produce and fetch ----------------------------------------------------------------------------
@pytest.mark.parametrize("marks", [(0, 0, -1, 1, 1, 0), (2**63 - 1, 2**63 - 1, 2**63 - 1, 2**31 - 1, 9, 2**63 - 1),
                                   (12, 40, 1_700_000_000_000, 29, 2, 7)])
def test_a_produces_answer_is_the_json_of_its_fields(marks: tuple[int, ...]) -> None:
    """Every produce is answered from a byte template, not a dict encoded: the same JSON."""
    from stratalog.broker.produce import ProduceResult
    from stratalog.server.records import _append_answer, _append_result
    result = ProduceResult(*marks[:5], 100, marks[5])
    assert _append_answer(result) == json.dumps(_append_result(result)).encode()


@pytest.mark.parametrize("codec", list(CODECS))
def test_raw_kafka_python_batches_round_trip(server: Server, codec: str) -> None:
    topic = f"raw-{codec}"
    server.create_topic(topic)
    sent = []
    for b in range(3):
        records = [(f"k{b}-{i}".encode(), f"value {b}-{i}".encode() * 20) for i in range(5)]
        records.append((None, None))  # a keyless tombstone, legal on a delete topic
        reply = server.produce_raw(topic, 0, kafka_batch(records, compression=CODECS[codec],
                                                         headers=[("h", b"\x00\xff")]))
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body == {"baseOffset": b * 6, "lastOffset": b * 6 + 5, "logAppendTime": -1, "recordCount": 6,
                        "batches": 1, "logStartOffset": 0}
        assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
        sent.extend(records)

    raw = server.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0},
                     headers={"Accept": RECORD_BATCH})
    assert raw.status_code == 200 and raw.headers["Content-Type"].startswith(RECORD_BATCH)
    assert raw.headers["X-High-Watermark"] == "18" and raw.headers["X-Next-Offset"] == "18"
    assert raw.headers["X-Log-Start-Offset"] == "0"
    parsed = list(kafka_parse(raw.content))
    assert [(r.key, r.value) for _, r in parsed] == sent
    assert [r.offset for _, r in parsed] == list(range(18))
    assert {batch.compression_type for batch, _ in parsed} == {CODECS[codec]}
    assert all(r.headers == [("h", b"\x00\xff")] for _, r in parsed)

    as_json = server.fetch_json(topic, 0, 0)
    assert [r["offset"] for r in as_json["records"]] == list(range(18))
    assert as_json["records"][0]["key"] == "k0-0" and as_json["records"][5]["value"] is None
    assert as_json["records"][0]["headers"] == {"h": {"b64": base64.b64encode(b"\x00\xff").decode()}}
    assert as_json["highWatermark"] == 18 and as_json["nextOffset"] == 18


def test_several_batches_in_one_body_are_appended_contiguously(server: Server) -> None:
    server.create_topic("multi")
    body = kafka_batch([(b"a", b"1"), (b"b", b"2")]) + kafka_batch([(b"c", b"3")])
    reply = server.produce_raw("multi", 0, body).json()
    assert (reply["baseOffset"], reply["lastOffset"], reply["recordCount"], reply["batches"]) == (0, 2, 3, 2)
    assert [r["value"] for r in server.read_all("multi", 0)] == ["1", "2", "3"]


def test_a_body_sent_in_chunks_that_split_batches_is_appended_whole(server: Server) -> None:
    server.create_topic("chunked")
    body = kafka_batch([(b"a", b"1" * 3000), (b"b", b"2")]) + kafka_batch([(b"c", b"3" * 5000)])
    cuts = [0, 7, 61, 2900, len(body) - 1, len(body)]   # inside the first header, mid-record, before the end

    def pieces() -> Iterator[bytes]:   # a generator: requests sends it chunked; the pauses keep the chunks apart
        for a, b in zip(cuts, cuts[1:]):
            yield body[a:b]
            time.sleep(0.05)

    reply = server.post("/v1/topics/chunked/partitions/0/records", data=pieces(),
                        headers={"Content-Type": RECORD_BATCH})
    assert reply.status_code == 200, reply.text
    assert reply.json()["recordCount"] == 3
    assert [r["value"] for r in server.read_all("chunked", 0)] == ["1" * 3000, "2", "3" * 5000]


def test_json_records_round_trip_through_kafka_python(server: Server) -> None:
    server.create_topic("json-in")
    records = [
        {"key": "text-key", "value": "text value", "timestamp": 1_700_000_000_000, "headers": {"a": "b"}},
        {"key_b64": base64.b64encode(b"\xfe\x01").decode(), "value_b64": base64.b64encode(b"\xff").decode()},
        {"key": "k", "value": None},
        {"value": {"nested": [1, 2]}, "headers": [["x", "1"], ["x", {"b64": "/w=="}]]},
    ]
    reply = server.produce_json("json-in", 0, records, compression="zstd")
    assert reply.status_code == 200, reply.text
    assert reply.json()["recordCount"] == 4
    raw = server.get("/v1/topics/json-in/partitions/0/records", params={"format": "binary"})
    parsed = [r for _, r in kafka_parse(raw.content)]
    assert [(r.key, r.value) for r in parsed] == [
        (b"text-key", b"text value"), (b"\xfe\x01", b"\xff"), (b"k", None), (None, b'{"nested": [1, 2]}')]
    assert parsed[0].timestamp == 1_700_000_000_000
    assert parsed[3].headers == [("x", b"1"), ("x", b"\xff")]
    back = server.fetch_json("json-in", 0, 0)["records"]
    assert back[1]["key_b64"] == "/gE=" and back[1]["value_b64"] == "/w=="
    assert back[3]["headers"] == [["x", "1"], ["x", {"b64": "/w=="}]]


def test_topic_level_produce_partitions_by_kafkas_murmur2_and_round_robin(server: Server) -> None:
    server.create_topic("keyed", 4)
    keys = [f"user-{i}" for i in range(40)]
    reply = server.ok("POST", "/v1/topics/keyed/records", json={"records": [{"key": k, "value": k} for k in keys]})
    assert reply["recordCount"] == 40
    for partition in range(4):
        for record in server.read_all("keyed", partition):
            # kafka-python's murmur2, toPositive, mod partitions: where a Java producer puts the key
            assert (kafka_murmur2(record["key"].encode()) & 0x7FFFFFFF) % 4 == partition
    server.ok("POST", "/v1/topics/keyed/records", json={"records": [{"value": str(i)} for i in range(8)]})
    keyless = [sum(1 for r in server.read_all("keyed", p) if r["key"] is None) for p in range(4)]
    assert keyless == [2, 2, 2, 2]
    explicit = server.ok("POST", "/v1/topics/keyed/records", json={"records": [{"key": "x", "partition": 3}]})
    assert [p["partition"] for p in explicit["partitions"]] == [3]


def test_fetch_is_batch_granular_in_binary_and_exact_in_json(server: Server) -> None:
    server.create_topic("granular")
    for b in range(4):
        server.produce_raw("granular", 0, kafka_batch([(b"k", f"{b}-{i}".encode() * 50) for i in range(10)]))
    raw = server.get("/v1/topics/granular/partitions/0/records", params={"offset": 15, "maxBytes": 1},
                     headers={"Accept": RECORD_BATCH})
    offsets = [r.offset for _, r in kafka_parse(raw.content)]
    assert offsets == list(range(10, 20))  # one whole batch (at least one is served), starting below 15
    assert raw.headers["X-Next-Offset"] == "20"
    as_json = server.fetch_json("granular", 0, 15, maxBytes=1)
    assert [r["offset"] for r in as_json["records"]] == list(range(15, 20)) and as_json["nextOffset"] == 20
    everything = server.fetch_json("granular", 0, 0, maxBytes=10_000_000)
    assert len(everything["records"]) == 40
    at_end = server.fetch_json("granular", 0, 40)
    assert at_end["records"] == [] and at_end["nextOffset"] == 40


def test_binary_fetches_send_whole_batches_large_from_the_segment_file_small_copied_and_keep_no_descriptor_open(
        server_on_each_loop: Server) -> None:
    from stratalog.records import iter_batch_infos
    from stratalog.server.records import SENDFILE_ABOVE_BYTES

    server = server_on_each_loop
    server.create_topic("sendfile")
    for b in range(6):   # batches of about 24 KiB
        server.produce_raw("sendfile", 0, kafka_batch([(b"k", f"{b}-{i}".encode() * 2000) for i in range(4)]))
    # Taken before any fetch: an answer's descriptor is closed just after its last byte went, so a look
    # right after one may still see it.
    files = server.open_files()
    whole = server.get("/v1/topics/sendfile/partitions/0/records", params={"offset": 0, "maxBytes": 1 << 20},
                       headers={"Accept": RECORD_BATCH}).content
    ends = [info.position + info.size for info in iter_batch_infos(whole)]
    assert len(ends) == 6
    # One maxBytes inside the second batch, small enough to be copied; one inside the fourth, sent
    # from the file (the region narrowed to its whole batches).
    assert ends[0] + 1 <= SENDFILE_ABOVE_BYTES < ends[3] - 1
    for _ in range(3):
        for max_bytes, kept, next_offset in ((ends[0] + 1, ends[0], "4"), (ends[3] - 1, ends[2], "12")):
            reply = server.get("/v1/topics/sendfile/partitions/0/records",
                               params={"offset": 0, "maxBytes": max_bytes}, headers={"Accept": RECORD_BATCH})
            assert reply.content == whole[:kept] and reply.headers["Content-Length"] == str(kept)
            assert reply.headers["X-Next-Offset"] == next_offset
        # From inside the fifth batch, the rest: that batch whole, then the sixth.
        reply = server.get("/v1/topics/sendfile/partitions/0/records", params={"offset": 17, "format": "binary"})
        assert reply.content == whole[ends[3]:]
    assert server.open_files(settle_to=files) == files


def long_poll_endings(server: Server) -> dict[str, float]:
    samples = metric_samples(server)
    return {how: samples.get(("stratalog_fetch_long_polls_total", (("outcome", how),)), 0.0)
            for how in ("woken", "expired")}


def test_long_poll_answers_as_soon_as_data_arrives(server: Server) -> None:
    server.create_topic("tail")
    server.produce_json("tail", 0, [{"value": "first"}])
    result: dict[str, Any] = {}
    before = long_poll_endings(server)

    def poll() -> None:
        reply = requests.get(server.url("/v1/topics/tail/partitions/0/records"),
                             params={"offset": 1, "maxWaitMs": 30_000}, timeout=120)
        result["reply"] = reply.json()

    waiting = threading.Thread(target=poll)
    waiting.start()
    # Produce only once the fetch is parked at the high watermark (the server counts waiting polls).
    wait_until(lambda: metric_samples(server).get(("stratalog_fetch_long_polls_waiting", ()), 0) >= 1)
    server.produce_json("tail", 0, [{"value": "second"}])
    waiting.join()
    assert [r["value"] for r in result["reply"]["records"]] == ["second"]
    assert result["reply"]["nextOffset"] == 2
    # The append woke the waiting fetch: it did not run out its 30 s and read again.
    after = long_poll_endings(server)
    assert (after["woken"] - before["woken"], after["expired"] - before["expired"]) == (1, 0)


def test_long_poll_without_data_answers_empty_at_the_same_offset(server: Server) -> None:
    server.create_topic("quiet")
    reply = server.fetch_json("quiet", 0, 0, maxWaitMs=50)
    assert reply["records"] == [] and reply["nextOffset"] == 0 and reply["highWatermark"] == 0


def wait_until(condition: Callable[[], bool], bound: float = 30.0) -> None:
    """Poll until ``condition`` holds; the bound only turns a hang into a failure."""
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_list_offsets_follows_kafkas_list_offsets(server: Server) -> None:
    server.create_topic("times")
    base = 1_700_000_000_000
    server.produce_json("times", 0, [{"value": str(i), "timestamp": base + 1000 * i} for i in range(5)])
    server.produce_json("times", 0, [{"value": "late", "timestamp": base + 500}])

    def query(ts: int) -> tuple[int, int]:
        reply = server.ok("GET", "/v1/topics/times/partitions/0/offsets", params={"timestamp": ts})
        return reply["offset"], reply["timestamp"]

    assert query(-1) == (6, -1)
    assert query(-2) == (0, -1)
    assert query(-3) == (4, base + 4000)
    assert query(base + 1500) == (2, base + 2000)
    assert query(base) == (0, base)
    assert query(base + 10_000) == (-1, -1)


def test_delete_records_moves_the_start_and_older_offsets_become_out_of_range(server: Server) -> None:
    server.create_topic("trim")
    server.produce_json("trim", 0, [{"value": str(i)} for i in range(10)])
    reply = server.ok("POST", "/v1/topics/trim/partitions/0/delete-records", json={"beforeOffset": 4})
    assert reply["lowWatermark"] == 4
    gone = server.get("/v1/topics/trim/partitions/0/records", params={"offset": 3})
    assert gone.status_code == 416 and gone.json()["error_code"] == "OFFSET_OUT_OF_RANGE"
    assert [r["value"] for r in server.read_all("trim", 0)] == [str(i) for i in range(4, 10)]
    to_end = server.ok("POST", "/v1/topics/trim/partitions/0/delete-records", json={"beforeOffset": -1})
    assert to_end["lowWatermark"] == 10


def test_topic_admin(server: Server) -> None:
    created = server.create_topic("admin", 2, retention_ms=1000)
    assert created["partitionCount"] == 2 and created["configs"] == {"retention.ms": "1000"}
    assert {"name": "admin", "partitionCount": 2} in server.ok("GET", "/v1/topics")["topics"]
    altered = server.ok("PATCH", "/v1/topics/admin/configs",
                        json={"set": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.1},
                              "delete": ["retention.ms"]})
    assert altered["configs"] == {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}
    grown = server.ok("POST", "/v1/topics/admin/partitions", json={"count": 3})
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2]
    stats = server.stats("admin", 2)
    assert stats["compacted"] is True and stats["dirtyRatio"] == 0.0 and stats["segments"] == 1
    deleted = server.ok("DELETE", "/v1/topics/admin")
    assert deleted["partitions"] == 3 and all(p.endswith("-delete") for p in deleted["renamedTo"])
    assert server.get("/v1/topics/admin").status_code == 404


# -- every error a request can cause, and the disk untouched ----------------------------------------
def _corrupt(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF  # inside the records: the CRC no longer matches
    return bytes(damaged)


def _log_append_time_batch() -> bytes:
    batch = bytearray(kafka_batch([(b"k", b"v")]))
    batch[22] |= 0x08  # attributes bit 3: LogAppendTime, which only a broker may set
    from stratalog.records import compute_crc  # re-sign, so only the timestamp type is wrong

    batch[17:21] = compute_crc(bytes(batch), 0, len(batch)).to_bytes(4, "big")
    return bytes(batch)


def _transactional_batch() -> bytes:
    """kafka-python's transactional batch, as a Kafka producer inside a transaction sends it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=41,
                                        producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


BIG = 2000

NOT_FINITE = "is not valid JSON (JSON numbers are finite)"


def _post_json(server: Server, path: str, text: str, *, method: str = "POST") -> requests.Response:
    """A JSON body sent as written: requests' json= would refuse or rewrite what is under test."""
    return server.request(method, path, data=text.encode(), headers={"Content-Type": "application/json"})


ERROR_CASES: list[tuple[str, Callable[[Server], requests.Response], int, str, str]] = [
    ("bad topic name", lambda s: s.get("/v1/topics/bad!name"), 400, "INVALID_TOPIC_EXCEPTION", "illegal"),
    ("bad topic name on create", lambda s: s.post("/v1/topics", json={"name": "a/b"}), 400,
     "INVALID_TOPIC_EXCEPTION", "'/'"),
    ("colliding topic name", lambda s: s.post("/v1/topics", json={"name": "err_base"}), 400,
     "INVALID_TOPIC_EXCEPTION", "collides"),
    ("unknown topic", lambda s: s.produce_json("nope", 0, [{"value": "x"}]), 404, "UNKNOWN_TOPIC_OR_PARTITION",
     "nope"),
    ("unknown partition", lambda s: s.get("/v1/topics/err.base/partitions/7/records"), 404,
     "UNKNOWN_TOPIC_OR_PARTITION", "err.base-7"),
    ("offset past the end", lambda s: s.get("/v1/topics/err.base/partitions/0/records", params={"offset": 99}),
     416, "OFFSET_OUT_OF_RANGE", "out of range"),
    ("delete-records past the high watermark",
     lambda s: s.post("/v1/topics/err.base/partitions/0/delete-records", json={"beforeOffset": 99}), 416,
     "OFFSET_OUT_OF_RANGE", "high watermark"),
    ("corrupt batch", lambda s: s.produce_raw("err.base", 0, _corrupt(kafka_batch([(b"k", b"v" * 100)]))), 400,
     "CORRUPT_MESSAGE", "crc"),
    ("truncated batch", lambda s: s.produce_raw("err.base", 0, kafka_batch([(b"k", b"v")])[:-3]), 400,
     "CORRUPT_MESSAGE", "trailing bytes"),
    ("good batch then a corrupt one",
     lambda s: s.produce_raw("err.base", 0, kafka_batch([(b"k", b"v")]) + _corrupt(kafka_batch([(b"k", b"w")]))),
     400, "CORRUPT_MESSAGE", "batch 2 of 2"),
    ("batch over max.message.bytes", lambda s: s.produce_raw("err.small-msg", 0, kafka_batch([(b"k", b"v" * BIG)])),
     400, "MESSAGE_TOO_LARGE", "max.message.bytes"),
    ("batch over segment.bytes", lambda s: s.produce_raw("err.small-seg", 0, kafka_batch([(b"k", b"v" * BIG)])),
     400, "RECORD_LIST_TOO_LARGE", "segment.bytes"),
    ("body over the server limit",
     lambda s: s.produce_raw("err.base", 0, b"\0" * (5 * 1024 * 1024)), 413, "MESSAGE_TOO_LARGE", "limit"),
    ("bad config value", lambda s: s.post("/v1/topics", json={"name": "err.new", "configs": {"cleanup.policy": "x"}}),
     400, "INVALID_CONFIG", "cleanup.policy"),
    ("unknown config", lambda s: s.request("PATCH", "/v1/topics/err.base/configs", json={"set": {"retention.mss": 1}}),
     400, "INVALID_CONFIG", "retention.mss"),
    ("keyless record on a compacted topic (JSON)", lambda s: s.produce_json("err.compact", 0, [{"value": "v"}]),
     400, "INVALID_RECORD", "key"),
    ("keyless record on a compacted topic (raw)",
     lambda s: s.produce_raw("err.compact", 0, kafka_batch([(b"k", b"v"), (None, b"v")])), 400, "INVALID_RECORD",
     "record 1"),
    ("bad base64", lambda s: s.produce_json("err.base", 0, [{"value_b64": "###"}]), 400, "INVALID_RECORD",
     "records[0]"),
    ("topic exists", lambda s: s.post("/v1/topics", json={"name": "err.base"}), 409, "TOPIC_ALREADY_EXISTS",
     "err.base"),
    ("zero partitions", lambda s: s.post("/v1/topics", json={"name": "err.new", "partitions": 0}), 400,
     "INVALID_PARTITIONS", "partitions"),
    ("shrinking partitions", lambda s: s.post("/v1/topics/err.base/partitions", json={"count": 1}), 400,
     "INVALID_PARTITIONS", "only grow"),
    ("timestamp outside the topic's window",
     lambda s: s.produce_json("err.window", 0, [{"value": "old", "timestamp": 1000}]), 400, "INVALID_TIMESTAMP",
     "message.timestamp.before.max.ms"),
    ("producer-set LogAppendTime", lambda s: s.produce_raw("err.base", 0, _log_append_time_batch()), 400,
     "INVALID_TIMESTAMP", "LogAppendTime"),
    ("transactional batch (no coordinator here)", lambda s: s.produce_raw("err.base", 0, _transactional_batch()),
     400, "INVALID_TXN_STATE", "producer id 41 is transactional"),
    ("unknown isolation level", lambda s: s.get("/v1/topics/err.base/partitions/0/records",
                                                params={"isolation": "committed"}), 400, "INVALID_REQUEST",
     "'isolation'"),
    ("bad acks", lambda s: s.produce_json("err.base", 0, [{"value": "x"}], acks="2"), 400,
     "INVALID_REQUIRED_ACKS", "acks"),
    ("bad JSON", lambda s: s.post("/v1/topics/err.base/partitions/0/records", data=b"{nope",
                                  headers={"Content-Type": "application/json"}), 400, "INVALID_REQUEST", "JSON"),
    ("wrong field type", lambda s: s.post("/v1/topics", json={"name": "err.new", "partitions": "3"}), 400,
     "INVALID_REQUEST", "'partitions'"),
    ("unknown body field", lambda s: s.post("/v1/topics", json={"name": "err.new", "replicas": 3}), 400,
     "INVALID_REQUEST", "replicas"),
    ("empty records", lambda s: s.produce_json("err.base", 0, []), 400, "INVALID_REQUEST", "'records'"),
    ("bad partition in the path", lambda s: s.get("/v1/topics/err.base/partitions/x1/records"), 400,
     "INVALID_REQUEST", "'partition'"),
    ("negative maxBytes", lambda s: s.get("/v1/topics/err.base/partitions/0/records", params={"maxBytes": -1}),
     400, "INVALID_REQUEST", "'maxBytes'"),
    ("long poll over the server's bound",
     lambda s: s.get("/v1/topics/err.base/partitions/0/records", params={"maxWaitMs": 10**9}), 400,
     "INVALID_REQUEST", "'maxWaitMs'"),
    ("unsupported media type", lambda s: s.post("/v1/topics/err.base/partitions/0/records", data=b"x",
                                                headers={"Content-Type": "text/plain"}), 415, "INVALID_REQUEST",
     "text/plain"),
    ("zero partitions added", lambda s: s.post("/v1/topics/err.base/partitions", json={"count": 0}), 400,
     "INVALID_PARTITIONS", "topic 'err.base': the partition count must be between 1 and"),
    ("negative partitions", lambda s: s.post("/v1/topics", json={"name": "err.new", "partitions": -1}), 400,
     "INVALID_PARTITIONS", "topic 'err.new': partitions must be between 1 and"),
    # NaN, Infinity and -Infinity are not JSON (Python's json takes them): each refused naming its field.
    ("NaN record value", lambda s: _post_json(s, "/v1/topics/err.base/partitions/0/records",
                                              '{"records": [{"key": "k", "value": "ok"}, {"key": "k", "value": NaN}]}'),
     400, "INVALID_REQUEST", f"body field 'records[1].value': NaN {NOT_FINITE}"),
    ("Infinity header on the topic route",
     lambda s: _post_json(s, "/v1/topics/err.base/records", '{"records": [{"value": "v", "headers": {"h": Infinity}}]}'),
     400, "INVALID_REQUEST", f"body field 'records[0].headers.h': Infinity {NOT_FINITE}"),
    ("-Infinity timestamp", lambda s: _post_json(s, "/v1/topics/err.base/partitions/0/records",
                                                 '{"records": [{"value": "v", "timestamp": -Infinity}]}'),
     400, "INVALID_REQUEST", f"body field 'records[0].timestamp': -Infinity {NOT_FINITE}"),
    ("number overflowing a double", lambda s: _post_json(s, "/v1/topics/err.base/partitions/0/records",
                                                         '{"records": [{"value": 1e999}]}'),
     400, "INVALID_REQUEST", "body field 'records[0].value': 1e999 is too large for a 64-bit floating-point number"),
    ("NaN body", lambda s: _post_json(s, "/v1/topics/err.base/partitions/0/records", "NaN"),
     400, "INVALID_REQUEST", f"body: NaN {NOT_FINITE}"),
    ("NaN topic config", lambda s: _post_json(s, "/v1/topics", '{"name": "err.new", "configs": {"retention.ms": NaN}}'),
     400, "INVALID_REQUEST", f"body field 'configs[\"retention.ms\"]': NaN {NOT_FINITE}"),
    ("Infinity config change", lambda s: _post_json(s, "/v1/topics/err.base/configs",
                                                    '{"set": {"retention.ms": Infinity}}', method="PATCH"),
     400, "INVALID_REQUEST", f"body field 'set[\"retention.ms\"]': Infinity {NOT_FINITE}"),
    ("NaN partition count", lambda s: _post_json(s, "/v1/topics/err.base/partitions", '{"count": NaN}'),
     400, "INVALID_REQUEST", f"body field 'count': NaN {NOT_FINITE}"),
    ("NaN beforeOffset", lambda s: _post_json(s, "/v1/topics/err.base/partitions/0/delete-records",
                                              '{"beforeOffset": NaN}'),
     400, "INVALID_REQUEST", f"body field 'beforeOffset': NaN {NOT_FINITE}"),
    ("unknown route", lambda s: s.get("/v1/nothing-here"), 404, "INVALID_REQUEST", "not found"),
    ("wrong method", lambda s: s.request("PUT", "/v1/topics"), 405, "INVALID_REQUEST", "not allowed"),
]


@pytest.fixture(scope="module")
def error_topics(server: Server) -> Server:
    small = {"segment_index_bytes": 4096}  # small index files: the snapshot hashes every byte
    server.create_topic("err.base", 2, **small)
    server.produce_json("err.base", 0, [{"key": "k", "value": str(i)} for i in range(3)])
    server.create_topic("err.compact", cleanup_policy="compact", **small)
    server.create_topic("err.small-msg", max_message_bytes=1024, **small)
    server.create_topic("err.small-seg", segment_bytes=1024, **small)
    server.create_topic("err.window", message_timestamp_before_max_ms=3_600_000, **small)
    return server


@pytest.mark.parametrize("name, send, status, code, mention", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_bad_request_gets_its_kafka_error_and_changes_nothing(
        error_topics: Server, name: str, send: Callable[[Server], requests.Response], status: int, code: str,
        mention: str) -> None:
    server = error_topics
    before = disk_state(server.data_dirs[0], "err")
    offsets_before = [server.stats("err.base", p)["logEndOffset"] for p in (0, 1)]
    reply = send(server)
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["error_code"] == code
    assert mention in body["message"], body["message"]
    assert disk_state(server.data_dirs[0], "err") == before
    assert [server.stats("err.base", p)["logEndOffset"] for p in (0, 1)] == offsets_before
    assert server.ok("GET", "/readyz")  # still serving
    assert metric_samples(server)[("stratalog_errors_total", (("code", code),))] >= 1


# -- shutdown and restart -------------------------------------------------------------------------
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_sigterm_drains_then_restart_skips_recovery(tmp_path: Path, loop: str) -> None:
    data = tmp_path / "data"
    server = Server([data], "--no-schedule", "--create-topic", "acked:3", "--event-loop", loop).start()
    acked: list[tuple[int, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def producer(number: int) -> None:
        session = requests.Session()
        sequence = 0
        while not stop.is_set():
            value = f"{number}-{sequence}"
            try:
                reply = session.post(server.url(f"/v1/topics/acked/partitions/{number}/records"),
                                     json={"records": [{"key": "k", "value": value}]}, timeout=60)
            except requests.ConnectionError:
                return  # the listener closed: nothing more is accepted
            if reply.status_code == 200:
                with lock:
                    acked.append((number, value))
            elif reply.status_code == 503:
                return  # draining
            else:
                raise AssertionError(reply.text)
            sequence += 1

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(acked) >= 60)
    assert server.terminate(signal.SIGTERM) == 0, server.log()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert "stopped cleanly" in server.log()
    assert (data / ".kafka_cleanshutdown").exists()

    restarted = Server([data], "--no-schedule", log_path=server.log_path).start()
    try:
        status = restarted.ok("GET", "/v1/status")
        assert status["dataDirs"][0]["hadCleanShutdown"] is True
        assert status["recovery"]["recoveredSegments"] == 0
        for partition in range(3):
            stored = [r["value"] for r in restarted.read_all("acked", partition)]
            # every acknowledged append is there, in order, exactly once
            assert [v for p, v in acked if p == partition] == stored[: len([1 for p, _ in acked if p == partition])]
            assert len(stored) == len(set(stored))
    finally:
        assert restarted.terminate() == 0


def test_sigkill_then_restart_recovers_and_keeps_every_fsynced_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server([data], "--no-schedule", "--create-topic", "durable").start()
    fsynced = []
    for i in range(30):
        records = [{"key": f"k{i}", "value": f"fsync-{i}-{j}"} for j in range(5)]
        assert server.produce_json("durable", 0, records, acks="all").status_code == 200
        fsynced.extend(r["value"] for r in records)
    for i in range(10):
        assert server.produce_json("durable", 0, [{"value": f"cache-{i}"}], fsync="false").status_code == 200
    assert server.kill() == -signal.SIGKILL
    assert not (data / ".kafka_cleanshutdown").exists()

    restarted = Server([data], "--no-schedule", log_path=server.log_path).start()
    try:
        status = restarted.ok("GET", "/v1/status")
        assert status["dataDirs"][0]["hadCleanShutdown"] is False
        assert status["recovery"]["recoveredSegments"] >= 1  # the unflushed tail was checked
        values = [r["value"] for r in restarted.read_all("durable", 0)]
        assert values[: len(fsynced)] == fsynced
        offsets = [r["offset"] for r in restarted.read_all("durable", 0)]
        assert offsets == list(range(len(offsets)))
    finally:
        assert restarted.terminate() == 0


# -- maintenance ----------------------------------------------------------------------------------
def test_retention_endpoint_deletes_segments_past_retention_bytes(server: Server) -> None:
    server.create_topic("ret", segment_bytes=2048, retention_bytes=4096, file_delete_delay_ms=0)
    for i in range(20):
        server.produce_raw("ret", 0, kafka_batch([(b"k", b"x" * 600)]))
    before = server.stats("ret", 0)
    assert before["segments"] >= 5
    done = server.ok("POST", "/v1/maintenance/retention", params={"topic": "ret"})
    assert done["segmentsDeleted"] >= 1 and {d["reason"] for d in done["deletions"]} == {"retention size breach"}
    after = server.stats("ret", 0)
    assert after["logStartOffset"] > 0 and after["size"] <= 4096 + 2048
    assert after["logStartOffset"] == done["deletions"][-1]["logStartOffset"]
    assert server.read_all("ret", 0)[0]["offset"] == after["logStartOffset"]
    removed = server.ok("POST", "/v1/maintenance/deletions")
    assert removed["segmentFiles"] == done["segmentsDeleted"]
    assert not list(server.data_dirs[0].glob("ret-0/*.deleted"))


def test_clean_endpoint_compacts_and_keeps_the_latest_value_per_key(server: Server) -> None:
    server.create_topic("cmp", cleanup_policy="compact", segment_bytes=1024)
    for round_ in range(10):
        server.produce_json("cmp", 0, [{"key": f"key{k}", "value": f"{round_}"} for k in range(5)])
    before = server.stats("cmp", 0)
    assert before["dirtyRatio"] > 0 and before["lastCleanMs"] is None
    done = server.ok("POST", "/v1/maintenance/clean", params={"force": "true", "topic": "cmp"})
    assert done["logsCleaned"] == 1
    report = done["reports"][0]
    assert report["topic"] == "cmp" and report["recordsRemoved"] > 0 and report["bytesWritten"] < report["bytesRead"]
    after = server.stats("cmp", 0)
    assert after["lastCleanMs"] is not None and after["cleanerPasses"] == 1
    latest: dict[str, str] = {}
    for record in server.read_all("cmp", 0):
        latest[record["key"]] = record["value"]
    assert latest == {f"key{k}": "9" for k in range(5)}
    samples = metric_samples(server)
    labels = (("partition", "0"), ("topic", "cmp"))
    assert samples[("stratalog_cleaner_records_removed_total", labels)] == report["recordsRemoved"]
    assert samples[("stratalog_cleaner_bytes_read_total", labels)] == report["bytesRead"]


def test_flush_and_checkpoint_endpoints(server: Server) -> None:
    server.create_topic("fl")
    server.produce_json("fl", 0, [{"value": str(i)} for i in range(7)])
    assert server.stats("fl", 0)["unflushedMessages"] == 7
    flushed = server.ok("POST", "/v1/maintenance/flush", params={"all": "true"})
    assert {"topic": "fl", "partition": 0} in flushed["flushed"]
    assert server.stats("fl", 0)["recoveryPoint"] == 7
    written = server.ok("POST", "/v1/maintenance/checkpoints")
    assert written["partitions"] >= 1
    checkpoint = (server.data_dirs[0] / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert "fl 0 7" in checkpoint
    assert "fl 0 7" in (server.data_dirs[0] / "replication-offset-checkpoint").read_text().split("\n")


def test_deletions_endpoint_removes_deleted_topic_directories(server: Server) -> None:
    server.create_topic("doomed")
    server.ok("DELETE", "/v1/topics/doomed")
    assert list(server.data_dirs[0].glob("doomed-0.*-delete"))
    removed = server.ok("POST", "/v1/maintenance/deletions")
    assert removed["directories"] >= 1
    assert not list(server.data_dirs[0].glob("doomed-0.*-delete"))


def test_maintenance_with_unknown_topic_is_404(server: Server) -> None:
    reply = server.post("/v1/maintenance/clean", params={"topic": "no-such"})
    assert reply.status_code == 404 and reply.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_metrics_have_per_partition_series(server: Server) -> None:
    server.create_topic("metered", 2)
    server.produce_json("metered", 1, [{"value": "x" * 100} for _ in range(4)])
    server.fetch_json("metered", 1, 0)
    stats = server.stats("metered", 1)
    samples = metric_samples(server)
    labels = (("partition", "1"), ("topic", "metered"))
    assert samples[("stratalog_log_end_offset", labels)] == 4
    assert samples[("stratalog_log_high_watermark", labels)] == 4
    assert samples[("stratalog_log_start_offset", labels)] == 0
    assert samples[("stratalog_log_size_bytes", labels)] == stats["size"] > 0
    assert samples[("stratalog_log_segments", labels)] == 1
    assert samples[("stratalog_log_end_offset", (("partition", "0"), ("topic", "metered")))] == 0
    assert samples[("stratalog_append_records_total", labels)] == 4
    assert samples[("stratalog_append_bytes_total", labels)] == stats["size"]
    assert samples[("stratalog_fetch_bytes_total", labels)] == stats["size"]
    assert samples[("stratalog_append_latency_seconds_count", (("acks", "1"),))] >= 1
    assert samples[("stratalog_engine_ready", ())] == 1
    assert ("stratalog_retention_deleted_segments_total", ()) in samples
    dirs = [key for key in samples if key[0] == "stratalog_checkpoint_age_seconds"]
    assert dirs, "checkpoint files exist from the start and have an age"


def test_a_partition_has_the_series_of_what_was_done_to_it_only(server: Server) -> None:
    server.create_topic("written-only", 1)
    server.create_topic("read-only", 1)
    server.produce_json("written-only", 0, [{"value": "x"}])
    server.fetch_json("read-only", 0, 0)
    samples = metric_samples(server)
    written = {name for name, labels in samples if ("topic", "written-only") in labels}
    read = {name for name, labels in samples if ("topic", "read-only") in labels}
    assert {"stratalog_append_bytes_total", "stratalog_append_records_total"} <= written
    assert "stratalog_fetch_bytes_total" not in written
    assert "stratalog_fetch_bytes_total" in read
    assert not {"stratalog_append_bytes_total", "stratalog_append_records_total"} & read


def test_a_deleted_topics_series_go_and_a_topic_recreated_under_its_name_counts_from_zero(server: Server) -> None:
    labels = (("partition", "0"), ("topic", "reborn"))
    server.create_topic("reborn", 1)
    server.produce_json("reborn", 0, [{"value": "x"} for _ in range(3)])
    server.fetch_json("reborn", 0, 0)
    assert metric_samples(server)[("stratalog_append_records_total", labels)] == 3
    server.ok("DELETE", "/v1/topics/reborn")
    gone = metric_samples(server)
    assert ("stratalog_append_records_total", labels) not in gone
    assert ("stratalog_fetch_bytes_total", labels) not in gone
    server.create_topic("reborn", 1)
    server.produce_json("reborn", 0, [{"value": "y"}])
    assert metric_samples(server)[("stratalog_append_records_total", labels)] == 1


def test_requests_are_counted_by_route_and_final_status_errors_included(server: Server) -> None:
    route = "/v1/topics/{topic}/partitions/{partition}/records"
    keys = {("POST", route, "200"): 1, ("GET", route, "404"): 1, ("PUT", "unmatched", "405"): 1}

    def counts() -> dict[tuple[str, str, str], float]:
        samples = metric_samples(server)
        return {key: samples.get(("stratalog_http_requests_total", (("method", key[0]), ("route", key[1]),
                                                                     ("status", key[2]))), 0.0) for key in keys}

    server.create_topic("counted", 1)
    before = counts()
    server.produce_json("counted", 0, [{"value": "x"}])
    assert server.get("/v1/topics/counted/partitions/7/records").status_code == 404
    assert server.request("PUT", "/v1/topics").status_code == 405
    after = counts()
    assert {key: after[key] - before[key] for key in keys} == keys


# -- the CLI against the server -------------------------------------------------------------------
def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STRATALOG, *args], input=input, capture_output=True,
                          text=True, timeout=120)


def test_cli_commands_with_server(server: Server) -> None:
    url = server.base
    created = cli("topics", "create", "--server", url, "--topic", "via-cli", "--partitions", "2",
                  "--config", "cleanup.policy=compact", "--config", "segment.bytes=256")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic via-cli.\n"
    lines = "".join(json.dumps({"key": f"k{i % 3}", "value": f"v{i}"}) + "\n" for i in range(30))
    produced = cli("produce", "--server", url, "--topic", "via-cli", "--partition", "1", "--flush",
                   "--batch-records", "5", input=lines)
    assert produced.returncode == 0, produced.stderr
    replies = [json.loads(line) for line in produced.stdout.splitlines()]
    assert [r["baseOffset"] for r in replies] == [0, 5, 10, 15, 20, 25]
    consumed = cli("consume", "--server", url, "--topic", "via-cli", "--partition", "1")
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [r["value"] for r in records] == [f"v{i}" for i in range(30)]
    assert consumed.stdout.splitlines()[0] == json.dumps(server.fetch_json("via-cli", 1, 0)["records"][0],
                                                         ensure_ascii=False)
    limited = cli("consume", "--server", url, "--topic", "via-cli", "--partition", "1", "--from-offset", "28")
    assert [json.loads(line)["offset"] for line in limited.stdout.splitlines()] == [28, 29]

    described = cli("topics", "describe", "--server", url, "--topic", "via-cli", "--json")
    assert json.loads(described.stdout)["configs"] == {"cleanup.policy": "compact", "segment.bytes": "256"}
    assert "via-cli" in cli("topics", "list", "--server", url).stdout.split()
    compacted = cli("compact", "--server", url, "--topic", "via-cli", "--force")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout.splitlines()[-1]) == {"logsCleaned": 1}
    retention = cli("retention", "--server", url, "--topic", "via-cli")
    assert json.loads(retention.stdout.splitlines()[-1])["segmentsDeleted"] >= 0
    missing = cli("consume", "--server", url, "--topic", "no-such-topic")
    assert missing.returncode == 1 and missing.stderr.startswith("error: UNKNOWN_TOPIC_OR_PARTITION:")
    both = cli("consume", "--server", url, "--data-dir", "x", "--topic", "t")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    unreachable = cli("topics", "list", "--server", "http://127.0.0.1:9", "--wait-for-server", "0")
    assert unreachable.returncode == 1 and unreachable.stderr == \
        "error: NETWORK_EXCEPTION: cannot reach http://127.0.0.1:9: the connection was refused\n"
    deleted = cli("topics", "delete", "--server", url, "--topic", "via-cli")
    assert deleted.returncode == 0 and server.get("/v1/topics/via-cli").status_code == 404


def test_a_cli_command_tries_a_refused_server_again_until_it_has_waited_long_enough(tmp_path: Path) -> None:
    with socket.socket() as probe:   # a port nothing listens on, for the server to take later
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    gave_up = cli("topics", "list", "--server", url, "--wait-for-server", "0.5")
    assert gave_up.returncode == 1
    assert gave_up.stderr == (f"stratalog: {url} refused the connection; trying again for up to 0.5 s "
                              f"(--wait-for-server)\nerror: NETWORK_EXCEPTION: cannot reach {url}: the connection "
                              "was refused (waited 0.5 s: --wait-for-server)\n")

    waiting = subprocess.Popen([*STRATALOG, "topics", "create", "--server", url, "--topic", "late", "--partitions", "1",
                                "--wait-for-server", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    serving = None
    try:
        time.sleep(1.0)   # the command is refused at least once before the server starts
        assert waiting.poll() is None, waiting.communicate()
        serving = subprocess.Popen([*STRATALOG, "serve", "--data-dir", str(tmp_path / "data"), "--listen",
                                    f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out, err = waiting.communicate(timeout=90)
        assert waiting.returncode == 0, err
        assert out == "Created topic late.\n"
        assert err.startswith(f"stratalog: {url} refused the connection; trying again")
        listed = cli("topics", "list", "--server", url)
        assert listed.returncode == 0 and "late" in listed.stdout, listed
    finally:
        waiting.kill()
        if serving is not None:
            serving.terminate()
            serving.wait(timeout=60)


def test_a_cli_command_waits_for_a_server_still_opening_its_directories_then_is_answered(tmp_path: Path) -> None:
    """The real app on a real port with its engine not yet opened -- the state during a long recovery,
    answered 503 BROKER_NOT_AVAILABLE -- opened while the command waits."""
    from aiohttp import web

    from stratalog.broker.engine import Engine
    from stratalog.cli.remote import Client
    from stratalog.server.app import create_app
    from stratalog.server.run import _start_engine
    from stratalog.server.state import ServerState

    async def scenario() -> tuple[list[str], str]:
        state = ServerState(Engine([tmp_path / "data"], schedule=False))
        runner = web.AppRunner(create_app(state))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        loop = asyncio.get_running_loop()
        try:
            early = await loop.run_in_executor(None, lambda: _error_of(Client(url).json, "GET", "/v1/topics"))
            waiting = loop.run_in_executor(None, lambda: Client(url, wait_for_server=60).json("GET", "/v1/topics"))
            await asyncio.sleep(1.0)   # refused with 503 at least once meanwhile
            assert not waiting.done()
            await loop.run_in_executor(None, _start_engine, state.engine, [("opened", 1)])
            state.started = True
            topics = await waiting
            return early, [t["name"] for t in topics["topics"]]
        finally:
            await runner.cleanup()
            state.engine.stop()
            state.shutdown_pools()

    early, names = asyncio.run(scenario())
    assert early == ["BROKER_NOT_AVAILABLE", "the engine is still opening its data directories (recovery); "
                     "retry shortly"]   # without a wait: the server's own answer, at once
    assert names == ["opened"]


def _error_of(call: Callable[..., object], *args: object) -> list[str]:
    from stratalog.cli.remote import RemoteError

    with pytest.raises(RemoteError) as raised:
        call(*args)
    return [raised.value.code, str(raised.value)]


def test_cli_consume_follow_tails_until_interrupted(server: Server) -> None:
    server.create_topic("followed")
    server.produce_json("followed", 0, [{"value": "before"}])
    # SIGINT at its default, as a terminal's foreground job has it: a test run started in a shell's
    # background inherits it ignored, and Python then installs no KeyboardInterrupt for it.
    process = subprocess.Popen([*STRATALOG, "consume", "--server", server.base,
                                "--topic", "followed", "--follow"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stdout is not None
        assert json.loads(_readline(process))["value"] == "before"
        server.produce_json("followed", 0, [{"value": "after"}])
        assert json.loads(_readline(process))["value"] == "after"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130


def _readline(process: subprocess.Popen[str], bound: float = 60.0) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], bound)
    assert ready, "no line from the following consumer"
    return process.stdout.readline()
