"""The ``url`` store under a failover's conditions, against a real ``stratalog serve``.

A failover shows a reader two things: a listed engine that is down, and a new leader whose
high watermark trails offsets an earlier plan already counted on. Both are made here with one
real server: a dead address listed before it, and a read planned past its high watermark.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from stratalog.records import iter_batch_infos
from stratalog_spark.store import data_loss_handler
from stratalog_spark.store import http as http_store
from stratalog_spark.store.http import HttpStore, NoEngineAnsweredError, StalledReadError

from server_harness import Server, kafka_batch  # tests/ is on sys.path (its conftest)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("http-store") / "data"
    data.mkdir()
    running = Server([data]).start()
    try:
        yield running
    finally:
        running.terminate()


def dead_address() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def produce(server: Server, topic: str, values: list[bytes]) -> None:
    for value in values:
        assert server.produce_raw(topic, 0, kafka_batch([(b"k", value)])).status_code == 200


def offsets_read(store: HttpStore, topic: str, start: int, end: int) -> list[int]:
    out = []
    for batch in store.read_batches(topic, 0, start, end, data_loss_handler(True)):
        out += [o for info in iter_batch_infos(batch) for o in range(info.base_offset, info.last_offset + 1)]
    return out


def test_an_engine_listed_first_that_is_down_is_passed_over_for_the_next(server):
    server.create_topic("down", 1)
    produce(server, "down", [b"a", b"b", b"c"])
    store = HttpStore(f"{dead_address()},{server.base}")
    assert store.topics() == sorted(t["name"] for t in server.ok("GET", "/v1/topics")["topics"])
    assert store.partitions("down") == [0]
    assert store.offsets("down", 0).end == 3
    assert offsets_read(store, "down", 0, 3) == [0, 1, 2]


def test_a_read_planned_past_the_leaders_high_watermark_waits_for_it_instead_of_ending_early(server):
    server.create_topic("trailing", 1)
    produce(server, "trailing", [b"0", b"1", b"2"])
    # Offsets 3..5 were counted on by a plan (below some replica's high watermark) but this
    # leader has yet to reach them, as a new leader just after a failover.
    late = threading.Timer(1.5, produce, (server, "trailing", [b"3", b"4", b"5"]))
    late.start()
    try:
        assert offsets_read(HttpStore(server.base), "trailing", 0, 6) == [0, 1, 2, 3, 4, 5]
    finally:
        late.join()


def test_a_read_whose_offsets_never_come_fails_naming_them_after_the_poll_timeout(server, monkeypatch):
    server.create_topic("never", 1)
    produce(server, "never", [b"0"])
    monkeypatch.setattr(http_store, "READ_STALL_TIMEOUT_S", 1.0)
    began = time.monotonic()
    with pytest.raises(StalledReadError, match=r"never-0: offsets 1\.\.4 were below the high watermark"):
        offsets_read(HttpStore(server.base), "never", 0, 5)
    assert time.monotonic() - began >= 1.0


def test_a_produce_to_an_engine_that_is_down_goes_to_the_next_listed(server):
    server.create_topic("produced", 1)
    store = HttpStore(f"{dead_address()},{server.base}")
    with store.appender() as append:
        assert append("produced", 0, kafka_batch([(b"k", b"v")])) == (0, 0)
    assert server.stats("produced", 0)["logEndOffset"] == 1


def test_when_no_listed_engine_answers_the_error_names_the_request_and_the_engines(monkeypatch):
    monkeypatch.setattr(http_store, "FIND_LEADER_TIMEOUT_S", 0.5)
    first, second = dead_address(), dead_address()
    with pytest.raises(NoEngineAnsweredError) as caught:
        HttpStore(f"{first},{second}").offsets("gone", 0)
    message = str(caught.value)
    assert message.startswith("GET /v1/topics/gone/partitions/0: no engine of ")
    assert first in message and second in message and "Connection refused" in message
