"""The data route over HTTP/1.1 answered directly (server/direct), aiohttp answering the rest.

A real ``stratalog serve`` and raw sockets, so that what a connection carries, and in what order,
is exactly what the test sends. Which path answered is told by aiohttp's ``Server`` field: aiohttp
writes it on every answer, the direct path does not.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import socket
import struct
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict
from yarl import URL

from server_harness import RECORD_BATCH, STRATALOG, Server, kafka_batch, kafka_parse
from stratalog.server.direct.framing import (
    LEAVE,
    MAX_FIELD_BYTES,
    WAIT,
    Head,
    HeadReader,
    answer_head,
    data_answer_head,
    data_target,
    head_verdict,
    parse_head,
)
from stratalog.server.direct.request import DirectRequest

TOPIC = "direct"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("direct")
    running = Server([root / "data"], "--no-schedule", "--create-topic", f"{TOPIC}:2").start()
    yield running
    assert running.terminate() == 0, running.log()


@dataclass
class Answer:
    status: int
    headers: CIMultiDict[str]
    body: bytes

    @property
    def by_aiohttp(self) -> bool:
        return "aiohttp" in self.headers.get("Server", "")

    def json(self) -> object:
        return json.loads(self.body)


class Connection:
    """One keep-alive connection: raw requests out, whole answers in, in order."""

    def __init__(self, server: Server, *, receive_buffer: int | None = None) -> None:
        host, port = server.base.removeprefix("http://").rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:   # before connecting: the window the server sees stays this small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(30)
        self.sock.connect((host, int(port)))
        self.reader = self.sock.makefile("rb")

    def send(self, *requests: bytes) -> None:
        self.sock.sendall(b"".join(requests))

    def answer(self) -> Answer:
        status_line = self.reader.readline()
        assert status_line.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")), status_line   # aiohttp refuses a bad head in 1.0
        headers: CIMultiDict[str] = CIMultiDict()
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers.add(name.strip(), value.strip())
        body = self.reader.read(int(headers.get("Content-Length", "0")))
        return Answer(int(status_line.split()[1]), headers, body)

    def closed_by_server(self) -> bool:
        return self.reader.read(1) == b""

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def produce(partition: int, body: bytes, *, extra: str = "", query: str = "") -> bytes:
    return (f"POST /v1/topics/{TOPIC}/partitions/{partition}/records{query} HTTP/1.1\r\nHost: x\r\n"
            f"Content-Type: {RECORD_BATCH}\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def fetch(partition: int, offset: int, *, query: str = "", version: str = "1.1", extra: str = "") -> bytes:
    return (f"GET /v1/topics/{TOPIC}/partitions/{partition}/records?offset={offset}{query} HTTP/{version}\r\n"
            f"Host: x\r\nAccept: {RECORD_BATCH}\r\n{extra}\r\n").encode()


def other(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def values(body: bytes) -> list[bytes]:
    return [record.value for _, record in kafka_parse(body)]


# -- which path answers ---------------------------------------------------------------------------
def test_a_connection_that_starts_on_the_data_route_is_answered_directly_until_another_route_comes(
        server: Server) -> None:
    connection = Connection(server)
    try:
        connection.send(produce(0, kafka_batch([(None, b"one")])))
        first = connection.answer()
        assert (first.status, first.by_aiohttp) == (200, False), first
        assert first.headers["Content-Type"] == "application/json; charset=utf-8" and "Date" in first.headers
        offset = first.json()["baseOffset"]  # type: ignore[index]
        connection.send(fetch(0, offset))
        read = connection.answer()
        assert (read.status, read.by_aiohttp, values(read.body)) == (200, False, [b"one"])
        assert read.headers["X-Next-Offset"] == str(offset + 1)
        connection.send(other(f"/v1/topics/{TOPIC}"))
        described = connection.answer()
        assert (described.status, described.by_aiohttp) == (200, True)
        # From there on the connection is aiohttp's, the data route included; answers stay correct.
        connection.send(produce(0, kafka_batch([(None, b"two")])))
        second = connection.answer()
        assert (second.status, second.by_aiohttp, second.json()["baseOffset"]) == (200, True, offset + 1)  # type: ignore[index]
    finally:
        connection.close()


def test_pipelined_requests_are_answered_in_order_across_the_hand_over(server: Server) -> None:
    connection = Connection(server)
    try:
        connection.send(produce(1, kafka_batch([(None, b"a")])), produce(1, kafka_batch([(None, b"b")])),
                        other("/healthz"), fetch(1, 0), other("/readyz"))
        answers = [connection.answer() for _ in range(5)]
        assert [a.status for a in answers] == [200] * 5
        assert [a.by_aiohttp for a in answers] == [False, False, True, True, True]
        first, second = (a.json()["baseOffset"] for a in answers[:2])  # type: ignore[index]
        assert second == first + 1
        assert answers[2].json() == {"status": "alive"} and answers[4].json() == {"status": "ready"}
        assert values(answers[3].body)[first:first + 2] == [b"a", b"b"]
    finally:
        connection.close()


def thread_names(server: Server) -> set[str]:
    assert server.proc is not None
    return {(task / "comm").read_text().strip() for task in Path(f"/proc/{server.proc.pid}/task").iterdir()}


def test_a_slow_readers_region_and_copied_answers_come_whole_from_the_writing_thread_before_aiohttps(
        server: Server) -> None:
    # Answers go to the socket from a thread of their own (server/socket_writes); a reader with a small
    # window leaves them queued there when the request for aiohttp comes, whose answer must follow them.
    # End to end on the real server: the bytes and their order. That the hand-over waits for the queue
    # is held by the in-process test below, which fails without the wait (here the writing thread wins
    # the race for the socket in practice even without it).
    assert "socket-writer" in thread_names(server)
    start = server.ok("GET", f"/v1/topics/{TOPIC}/partitions/1/offsets")["offset"]
    batch = kafka_batch([(None, os.urandom(1000)) for _ in range(48)])
    for _ in range(64):
        assert server.produce_raw(TOPIC, 1, batch).status_code == 200
    connection = Connection(server, receive_buffer=4096)
    try:
        connection.send(fetch(1, start, query=f"&maxBytes={3 << 20}"), fetch(1, start, query="&maxBytes=60000"),
                        other("/healthz"))
        time.sleep(0.5)
        # Read slowly: the queue drains a little at a time, and aiohttp's answer, were it written at once
        # on the hand-over, would land amid the fetches'.
        received = bytearray()
        connection.sock.settimeout(2)
        with contextlib.suppress(TimeoutError):
            while chunk := connection.sock.recv(2048):
                received += chunk
                time.sleep(0.0005)
        reader = io.BytesIO(received)
        answers = [Connection.answer(SimpleNamespace(reader=reader)) for _ in range(3)]  # type: ignore[arg-type]
        assert [(a.status, a.by_aiohttp) for a in answers] == [(200, False), (200, False), (200, True)]
        assert len(values(answers[0].body)) == 48 * 64 and len(values(answers[1].body)) == 48
        assert answers[2].json() == {"status": "alive"}
    finally:
        connection.close()


def test_a_request_that_arrives_a_byte_at_a_time_is_answered_directly(server: Server) -> None:
    connection = Connection(server)
    try:
        for byte in produce(0, kafka_batch([(b"k", b"slow")])):
            connection.send(bytes([byte]))
        answer = connection.answer()
        assert (answer.status, answer.by_aiohttp) == (200, False), answer
        connection.send(fetch(0, answer.json()["baseOffset"]))  # type: ignore[index]
        assert values(connection.answer().body) == [b"slow"]
    finally:
        connection.close()


@pytest.mark.parametrize("request_bytes", [
    fetch(0, 0, version="1.0") + other("/healthz"),            # HTTP/1.0 without keep-alive; the second never read
    fetch(0, 0, extra="Connection: close\r\n") + other("/healthz"),
], ids=["http/1.0", "connection: close"])
def test_a_request_without_keep_alive_is_answered_then_the_connection_closed(server: Server,
                                                                             request_bytes: bytes) -> None:
    connection = Connection(server)
    try:
        connection.send(request_bytes)
        answer = connection.answer()
        assert (answer.status, answer.by_aiohttp, answer.headers["Connection"]) == (200, False, "close")
        assert connection.closed_by_server()
    finally:
        connection.close()


# -- what is left to aiohttp ------------------------------------------------------------------------
def chunked(body: bytes) -> bytes:
    half = len(body) // 2
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:])) + b"0\r\n\r\n"


def test_unusual_data_requests_are_answered_by_aiohttp_as_before(server: Server) -> None:
    batch = kafka_batch([(None, b"chunked")])
    gzipped = gzip.compress(json.dumps({"records": [{"value": "zipped"}]}).encode())
    cases = {
        "no Host": fetch(0, 0).replace(b"Host: x\r\n", b""),
        "two Hosts": fetch(0, 0, extra="Host: y\r\n"),
        "two Content-Types": produce(0, batch, extra="Content-Type: text/plain\r\n"),
        "a gzipped JSON body": produce(0, gzipped, extra="Content-Encoding: gzip\r\n").replace(
            RECORD_BATCH.encode(), b"application/json"),
        "chunked body": (f"POST /v1/topics/{TOPIC}/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                         f"Content-Type: {RECORD_BATCH}\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunked(batch),
        "percent-encoded topic": fetch(0, 0).replace(f"/{TOPIC}/".encode(), b"/%64irect/"),
        "a long header": fetch(0, 0, extra=f"X-Long: {'x' * MAX_FIELD_BYTES}\r\n"),
        "a header longer than aiohttp takes": fetch(0, 0, extra=f"X-Long: {'x' * 2 * MAX_FIELD_BYTES}\r\n"),
    }
    for name, request in cases.items():
        connection = Connection(server)
        try:
            connection.send(request)
            answer = connection.answer()
            assert answer.by_aiohttp, name
            refused = ("a header longer than aiohttp takes", "no Host", "two Hosts", "two Content-Types")
            assert answer.status == (400 if name in refused else 200), (name, answer)
        finally:
            connection.close()


@pytest.mark.parametrize("request_bytes", [
    b"GET / HTTP/1.1\nHost: x\n\n",                                            # bare LFs, another route
    f"GET /v1/topics/{TOPIC}/partitions/0/records HTTP/1.1\nHost: x\n\n".encode(),  # bare LFs, the data route
    f"GET /v1/topics/{TOPIC}/partitions/0/records HTTP/1.1\r\nHost: x\n\n".encode(),
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64),                  # a TLS hello on the plaintext port
])
def test_a_head_that_can_never_be_the_data_routes_is_refused_at_once_not_waited_for(
        server: Server, request_bytes: bytes) -> None:
    connection = Connection(server)
    try:
        connection.send(request_bytes)
        answer = connection.answer()   # the socket's timeout would fail the test if it waited for more
        assert (answer.status, answer.by_aiohttp) == (400, True), answer
    finally:
        connection.close()


def test_a_client_that_sends_without_reading_is_stopped_not_buffered(server: Server) -> None:
    # A long poll keeps the connection's answers owed; the 1 MiB produces behind it (to no topic: nothing
    # is written) must wait in the socket, not in the server: the server stops reading (MAX_BUFFERED).
    end = server.ok("GET", f"/v1/topics/{TOPIC}/partitions/0/offsets")["offset"]
    body = b"\0" * (1 << 20)
    connection = Connection(server)
    try:
        connection.send(fetch(0, end, query="&maxWaitMs=3000"))
        connection.sock.setblocking(False)
        posts = b"".join(f"POST /v1/topics/nowhere/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                         f"Content-Type: {RECORD_BATCH}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
                         for _ in range(48))
        sent, deadline = 0, time.monotonic() + 1.5
        while sent < len(posts) and time.monotonic() < deadline:
            try:
                sent += connection.sock.send(posts[sent:sent + (1 << 20)])
            except BlockingIOError:
                time.sleep(0.01)
        # The kernel's buffers on both sides hold some MiB (tcp_rmem, tcp_wmem); the server's queue 64 KiB.
        assert sent < len(posts) // 2, f"the server took {sent} of {len(posts)} bytes while it owed an answer"
        connection.sock.setblocking(True)
        connection.sock.sendall(posts[sent:])
        assert connection.answer().status == 200   # the long poll, empty
        for _ in range(48):
            refused = connection.answer()
            assert (refused.status, refused.by_aiohttp) == (404, False), refused
    finally:
        connection.close()


def test_a_client_that_goes_away_amid_a_file_sent_fetch_leaves_no_error(server: Server) -> None:
    # 6 MiB in batches of about 48 KiB, fetched whole from the file: more than the server's socket
    # (tcp_wmem at most 4 MiB) takes at once from a reader with a small window, so the loop's sendfile
    # is still sending when the reader goes.
    batch = kafka_batch([(None, os.urandom(1000)) for _ in range(48)])
    start = server.ok("GET", f"/v1/topics/{TOPIC}/partitions/1/offsets")["offset"]
    for _ in range(128):
        assert server.produce_raw(TOPIC, 1, batch).status_code == 200
    for _ in range(3):
        connection = Connection(server, receive_buffer=4096)
        connection.send(fetch(1, start, query=f"&maxBytes={6 << 20}"))
        connection.reader.readline()
        # Closed with a reset (SO_LINGER 0), the answer part-sent.
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    assert server.ok("GET", "/healthz") == {"status": "alive"}
    time.sleep(0.5)
    log = server.log()
    assert "Task exception" not in log and "Traceback" not in log, log


def test_expect_100_continue_is_answered_by_aiohttp(server: Server) -> None:
    batch = kafka_batch([(None, b"continued")])
    connection = Connection(server)
    try:
        connection.send(produce(0, b"", extra="Expect: 100-continue\r\n").replace(
            b"Content-Length: 0", b"Content-Length: %d" % len(batch)))
        assert connection.reader.readline() == b"HTTP/1.1 100 Continue\r\n"
        assert connection.reader.readline() == b"\r\n"
        connection.send(batch)
        answer = connection.answer()
        assert (answer.status, answer.by_aiohttp) == (200, True), answer
    finally:
        connection.close()


def test_a_body_over_the_servers_limit_is_refused_with_413_before_it_is_read(server: Server) -> None:
    connection = Connection(server)
    try:
        # Twice max.message.bytes and some slack is the limit (ServerState.body_limit): 5 MiB is past it.
        connection.send(f"POST /v1/topics/{TOPIC}/partitions/0/records HTTP/1.1\r\nHost: x\r\n"
                        f"Content-Type: {RECORD_BATCH}\r\nContent-Length: {5 << 20}\r\n\r\n".encode())
        answer = connection.answer()
        assert (answer.status, answer.json()["error_code"]) == (413, "MESSAGE_TOO_LARGE")  # type: ignore[index]
    finally:
        connection.close()


# -- both paths answer alike ------------------------------------------------------------------------
ALIKE = {
    "a binary fetch": fetch(0, 0),
    "a JSON fetch": fetch(0, 0).replace(f"Accept: {RECORD_BATCH}".encode(), b"Accept: application/json"),
    "a read_committed fetch": fetch(0, 0, query="&isolation=read_committed"),
    "a negative offset": fetch(0, -1),
    "maxBytes that is no number": fetch(0, 0, query="&maxBytes=lots"),
    "an unknown isolation level": fetch(0, 0, query="&isolation=sometimes"),
    "an offset past the log end": fetch(0, 10**12),
    "an unknown partition": fetch(7, 0),
    "a bad topic name": fetch(0, 0).replace(f"/{TOPIC}/".encode(), b"/bad$name/"),
    "an unknown topic": fetch(0, 0).replace(f"/{TOPIC}/".encode(), b"/nowhere/"),
    "a produce of no bytes": produce(0, b""),
    "a produce of a torn batch": produce(0, kafka_batch([(None, b"torn")])[:-3]),
    "a produce of bad JSON": produce(0, b"{not json").replace(RECORD_BATCH.encode(), b"application/json"),
    "a produce of a media type not taken": produce(0, b"x").replace(RECORD_BATCH.encode(), b"text/plain"),
    "acks=0": produce(0, kafka_batch([(None, b"x")]), query="?acks=0"),
}


@pytest.mark.parametrize("name", sorted(ALIKE))
def test_the_direct_path_and_aiohttp_answer_alike(server: Server, name: str) -> None:
    server.produce_raw(TOPIC, 0, kafka_batch([(b"k", b"v"), (None, b"w")]))
    direct, by_aiohttp = Connection(server), Connection(server)
    try:
        direct.send(ALIKE[name])
        by_aiohttp.send(other("/healthz"))
        assert by_aiohttp.answer().by_aiohttp
        by_aiohttp.send(ALIKE[name])
        one, two = direct.answer(), by_aiohttp.answer()
    finally:
        direct.close()
        by_aiohttp.close()
    assert (one.by_aiohttp, two.by_aiohttp) == (False, True)
    assert (one.status, one.body) == (two.status, two.body), name
    shown = ("Content-Type", "WWW-Authenticate", "X-High-Watermark", "X-Log-Start-Offset", "X-Log-End-Offset",
             "X-Next-Offset", "X-Last-Stable-Offset", "X-Aborted-Transactions")
    assert [one.headers.getall(h, None) for h in shown] == [two.headers.getall(h, None) for h in shown], name


# -- the framing, without a server ----------------------------------------------------------------
@pytest.mark.parametrize("line, taken", [
    (b"GET /v1/topics/t/partitions/0/records HTTP/1.1", ("GET", "t", "0", "")),
    (b"POST /v1/topics/a.b-c_d/partitions/12/records?acks=all&x= HTTP/1.0", ("POST", "a.b-c_d", "12", "acks=all&x=")),
    (b"GET /v1/topics/t/partitions/0/records/ HTTP/1.1", None),          # aiohttp's 404
    (b"GET /v1/topics//partitions/0/records HTTP/1.1", None),
    (b"GET /v1/topics/t/partitions/0 HTTP/1.1", None),                   # another route
    (b"HEAD /v1/topics/t/partitions/0/records HTTP/1.1", None),
    (b"DELETE /v1/topics/t/partitions/0/records HTTP/1.1", None),
    (b"GET /v1/topics/%74/partitions/0/records HTTP/1.1", None),         # aiohttp decodes it
    (b"GET http://h/v1/topics/t/partitions/0/records HTTP/1.1", None),   # absolute form
    (b"GET /v1/topics/t/partitions/0/records HTTP/2.0", None),
    (b"GET /v1/topics/t/partitions/0/records#x HTTP/1.1", None),
    ("GET /v1/topics/é/partitions/0/records HTTP/1.1".encode(), None),
    (b"GET  /v1/topics/t/partitions/0/records HTTP/1.1", None),
])
def test_the_direct_path_takes_exactly_the_data_routes_plain_request_lines(line: bytes, taken: object) -> None:
    target = data_target(line)
    assert (None if target is None else (target[0], target[2], target[3], target[4])) == taken


def head(*fields: str, line: str = "POST /v1/topics/t/partitions/0/records HTTP/1.1", host: bool = True) -> bytes:
    return "\r\n".join([line, *(["Host: x"] if host else []), *fields, "", ""]).encode()


def test_a_plain_head_is_read_with_its_length_fields_and_keep_alive() -> None:
    parsed = parse_head(head("Content-Length: 12", "content-type: application/json", "X-A: 1", "X-A: 2"))
    assert parsed is not None
    assert (parsed.body_length, parsed.keep_alive, parsed.http10, parsed.headers["Content-Type"]) == \
        (12, True, False, "application/json")
    assert parsed.headers.getall("X-A") == ["1", "2"]
    closing = parse_head(head("Connection: close"))
    assert closing is not None and (closing.body_length, closing.keep_alive) == (0, False)
    old = parse_head(head(line="GET /v1/topics/t/partitions/0/records HTTP/1.0"))
    assert old is not None and (old.keep_alive, old.http10) == (False, True)


@pytest.mark.parametrize("fields", [
    ("Transfer-Encoding: chunked",),
    ("Content-Length: 5", "Transfer-Encoding: chunked"),
    ("Expect: 100-continue", "Content-Length: 5"),
    ("Connection: Upgrade", "Upgrade: websocket"),
    ("Content-Length: 5", "Content-Length: 6"),
    ("Content-Length: -1",),
    ("Content-Length: 1e3",),
    ("Bad Name: x",),
    ("X-Long: " + "x" * MAX_FIELD_BYTES,),
    ("X-Folded: a", " b"),
    ("Host: y",),
    ("Content-Type: a/b", "content-type: a/c"),
    ("Content-Encoding: gzip",),
    ("Sec-WebSocket-Key1: 1",),
    tuple(f"X-{i}: {i}" for i in range(128)),   # with Host, one more than aiohttp takes
])
def test_a_head_that_is_not_plain_is_left_to_aiohttp(fields: tuple[str, ...]) -> None:
    assert parse_head(head(*fields)) is None


def test_an_http_1_1_head_without_host_is_left_to_aiohttp_and_an_http_1_0_one_is_not() -> None:
    assert parse_head(head(host=False)) is None
    assert parse_head(head(host=False, line="GET /v1/topics/t/partitions/0/records HTTP/1.0")) is not None
    assert parse_head(head(*(f"X-{i}: {i}" for i in range(127)))) is not None   # 128 fields, Host included


@settings(max_examples=1000, deadline=None)
@given(method=st.sampled_from([b"GET", b"POST"]), version=st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]),
       fields=st.sampled_from([(), ("Content-Length: 3",), ("Accept: a/b", "Connection: close"),
                               ("Transfer-Encoding: chunked",), ("Connection: Upgrade", "Upgrade: x")]),
       topic=st.binary(max_size=4), query=st.binary(max_size=6), warm_fields=st.booleans())
def test_a_connection_reads_every_head_as_parse_head_does_when_its_fields_repeat_the_last_heads(
        method: bytes, version: bytes, fields: tuple[str, ...], topic: bytes, query: bytes, warm_fields: bool) -> None:
    """The fields remembered from the last head, the request line (any bytes in its target) is still
    taken or left exactly as llhttp's parse of the whole head decides."""
    field_lines = b"".join(f"{f}\r\n".encode() for f in ("Host: x", *fields))
    def whole(target: bytes) -> bytes:
        return method + b" " + target + b" " + version + b"\r\n" + field_lines + b"\r\n"
    reader = HeadReader()
    warm = whole(b"/v1/topics/t/partitions/0/records?offset=1")
    assert reader.read(warm) == parse_head(warm)
    if not warm_fields:   # a different head between: the fields are read again
        other = b"GET /v1/topics/t/partitions/0/records HTTP/1.1\r\nHost: y\r\n\r\n"
        assert reader.read(other) == parse_head(other)
    head = whole(b"/v1/topics/t" + topic + b"/partitions/0/records?offset=1" + query)
    assert reader.read(head) == parse_head(head)


@pytest.mark.parametrize("where", ["/v1/topics/t{}/partitions/0/records", "/v1/topics/t/partitions/0/records?o={}"])
def test_every_byte_in_a_target_is_taken_or_left_as_parse_head_decides_when_the_fields_repeat(where: str) -> None:
    """All 256 bytes, so that an httptools whose llhttp takes fewer (or more) bytes in a target than
    the remembered path checks fails here rather than on a client."""
    reader = HeadReader()
    fields = b"\r\nHost: x\r\n\r\n"
    warm = b"GET " + where.format("").encode() + b" HTTP/1.1" + fields
    assert reader.read(warm) is not None
    differ = []
    for byte in range(256):
        head = b"GET " + where.format("\x00").encode().replace(b"\x00", bytes([byte])) + b" HTTP/1.1" + fields
        if reader.read(head) != parse_head(head):
            differ.append(byte)
    assert differ == []


def test_a_long_head_is_read_but_not_remembered() -> None:
    reader = HeadReader()
    long_field = "X-Long: " + "x" * 5000
    long_head = head(long_field, line="GET /v1/topics/t/partitions/0/records?o=1 HTTP/1.1")
    assert reader.read(long_head) == parse_head(long_head) is not None
    assert reader._fields is None   # nothing kept of it
    short = head(line="GET /v1/topics/t/partitions/0/records?o=1 HTTP/1.1")
    assert reader.read(short) == parse_head(short) is not None and reader._fields is not None


def verdicts(data: bytes, pieces: int) -> list[int]:
    """head_verdict after each of ``pieces`` pieces of ``data``, carrying what it has seen as a connection does."""
    out, scanned, line_checked = [], 0, False
    step = max(1, len(data) // pieces)
    for cut in range(step, len(data) + step, step):
        verdict, line_checked = head_verdict(data[:cut], 0, scanned, line_checked)
        out.append(verdict)
        if verdict != WAIT:
            break
        scanned = min(cut, len(data))
    return out


def test_a_head_is_waited_for_while_it_may_be_the_data_routes_and_its_end_found_in_any_pieces() -> None:
    whole = head("Content-Length: 3") + b"abc"
    for pieces in (1, 2, 7, len(whole)):
        found = verdicts(whole, pieces)
        assert found[-1] == len(whole) - 3 and set(found[:-1]) <= {WAIT}, (pieces, found)


@pytest.mark.parametrize("data, decided_within", [
    (b"PUT /v1/topics/t/partitions/0/records HTTP/1.1\r\n\r\n", 2),    # "PU": neither GET nor POST
    (b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n\r\n", 25),               # the request line's end
    (b"GET /v1/topics/t/partitions/0/records HTTP/1.1\nHost: x\n\n", 48),
    (b"GET /v1/topics/t/partitions/0/records HTTP/1.1\r\nHost: x\n\n", 59),
])
def test_a_head_that_cannot_be_the_data_routes_is_left_as_soon_as_that_shows(data: bytes, decided_within: int) -> None:
    found = verdicts(data, len(data))
    assert found[-1] == LEAVE and len(found) <= decided_within, found


def test_an_answer_head_has_the_handlers_fields_then_length_date_and_connection() -> None:
    fields = [("Content-Type", "application/json"), ("Content-Length", "999"), ("X-Next-Offset", "7")]
    assert answer_head(200, "OK", fields, 12, "Sat, 28 Nov 2026 18:00:00 GMT", keep_alive=True, http10=False) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Next-Offset: 7\r\nContent-Length: 12\r\n"
        b"Date: Sat, 28 Nov 2026 18:00:00 GMT\r\n\r\n")
    assert answer_head(416, "Range Not Satisfiable", [], 0, "D", keep_alive=False, http10=False).endswith(
        b"Date: D\r\nConnection: close\r\n\r\n")
    assert answer_head(200, "OK", [], 0, "D", keep_alive=True, http10=True).endswith(
        b"Connection: keep-alive\r\n\r\n")


@pytest.mark.parametrize("keep_alive, http10", [(True, False), (False, False), (True, True), (False, True)])
@pytest.mark.parametrize("fields", [{}, {"X-Next-Offset": "7", "X-High-Watermark": "9"}])
def test_a_data_answers_head_is_the_answer_head_of_its_type_and_fields(fields: dict[str, str], keep_alive: bool,
                                                                       http10: bool) -> None:
    assert data_answer_head("application/json; charset=utf-8", fields, 12, "D", keep_alive=keep_alive,
                            http10=http10) == answer_head(
        200, "OK", [("Content-Type", "application/json; charset=utf-8"), *fields.items()], 12, "D",
        keep_alive=keep_alive, http10=http10)


def test_a_server_told_a_direct_path_setting_it_does_not_know_says_so_and_exits(tmp_path) -> None:
    ran = subprocess.run([*STRATALOG, "serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0"],
                         env={**os.environ, "STRATALOG_HTTP_DIRECT": "maybe"}, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 1, ran
    said = ran.stdout + ran.stderr
    assert "cannot listen: STRATALOG_HTTP_DIRECT='maybe': expected 1" in said and "Traceback" not in said, said


def test_the_server_log_names_no_errors(server: Server) -> None:
    log = server.log()
    assert "Traceback" not in log and " ERROR " not in log, log


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab=&%+;12F", max_size=16))
def test_a_query_reads_as_aiohttp_reads_it(query: str) -> None:
    ours = DirectRequest(Head("GET", "/", "t", "0", query, CIMultiDict(), 0, True, False), b"", None,  # type: ignore[arg-type]
                         None).query  # type: ignore[arg-type]
    aiohttps = URL("/p?" + query, encoded=True).query
    assert set(ours) == set(aiohttps)
    for name in aiohttps:   # each name's values, in order, as the handlers ask for them
        assert ours.getall(name, []) == aiohttps.getall(name), name


@contextlib.asynccontextmanager
async def direct_connection(tmp_path: Path, *, thread_writes: bool = False) -> AsyncIterator[tuple[Any, Any, socket.socket]]:
    """A direct connection of the real app on a real socket and loop, without a listener: (the
    connection, its transport, the client's end, non-blocking); its answers written by a writing
    thread of its own with ``thread_writes``."""
    import asyncio

    from aiohttp import web

    from stratalog.broker.engine import Engine
    from stratalog.server.app import create_app
    from stratalog.server.direct.connection import DirectConnection, DirectRoutes
    from stratalog.server.socket_writes import SocketWrites
    from stratalog.server.state import ServerState

    state = ServerState(Engine([tmp_path / "data"], schedule=False))
    app = create_app(state)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    assert runner.server is not None
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    writes = SocketWrites() if thread_writes else None
    connection = DirectConnection(DirectRoutes(app, state, {}, runner.server, writes=writes))
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, ours)
    try:
        yield connection, transport, theirs
    finally:
        transport.close()
        theirs.close()
        await runner.cleanup()
        if writes is not None:
            writes.close()


def test_a_connection_handed_to_aiohttp_while_its_writes_are_paused_is_handed_over_paused(tmp_path) -> None:
    """The transport tells only its current protocol when its buffer drains: a connection whose writes
    were paused (a region sent to a client that reads slowly, then a request for aiohttp) must tell
    aiohttp's protocol that they are, or aiohttp would write on as if the client read. The real app's
    aiohttp protocol on a real socket and loop; the transport's pause is the call it would make."""
    import asyncio

    async def scenario() -> tuple[bool, bool, bytes]:
        loop = asyncio.get_running_loop()
        async with direct_connection(tmp_path) as (connection, transport, theirs):
            connection.pause_writing()
            await loop.sock_sendall(theirs, b"GET /v1/no-such-route HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await asyncio.wait_for(loop.sock_recv(theirs, 65536), 10)
            handed = transport.get_protocol()
            return handed is not connection, handed.writing_paused, answer

    handed_over, paused, answer = asyncio.run(scenario())
    assert handed_over and paused
    assert answer.startswith(b"HTTP/1.1 404 ")   # aiohttp answers it: written, the transport buffering it meanwhile


def test_a_connection_whose_answers_the_writing_thread_still_holds_is_handed_over_once_they_are_written(
        tmp_path) -> None:
    """A request for aiohttp after answers that the writing thread (server/socket_writes) has not yet
    written: aiohttp gets the connection only once they are, so its answer comes after them. The
    real app and writer on a real socket, whose peer does not read at first."""
    import asyncio

    held = b"x" * (4 << 20)   # more than the socket takes: most of it waits in the writer

    async def scenario() -> tuple[bool, bool, bytes]:
        loop = asyncio.get_running_loop()
        async with direct_connection(tmp_path, thread_writes=True) as (connection, transport, theirs):
            assert connection._outlet is not None
            connection._outlet.write([held])
            await loop.sock_sendall(theirs, b"GET /v1/no-such-route HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.sleep(0.3)
            # Kept, and not reading meanwhile: a client sending on without reading is not buffered.
            kept_meanwhile = transport.get_protocol() is connection and not transport.is_reading()
            received = bytearray()
            while b"\r\n\r\n" not in received or len(received) <= len(held):   # aiohttp's head, wherever it is
                received += await asyncio.wait_for(loop.sock_recv(theirs, 1 << 20), 10)
            return kept_meanwhile, transport.get_protocol() is not connection, bytes(received)

    kept_meanwhile, handed_over, received = asyncio.run(scenario())
    assert kept_meanwhile and handed_over
    assert received[:len(held)] == held and received[len(held):].startswith(b"HTTP/1.1 404 ")
