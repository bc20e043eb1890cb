"""A follower's many-partition fetch client meets an answer that is not the leader's framing.

The leader side is a stand-in here on purpose: a real engine always frames its answer, and what is
tested is the client's reaction to a broken middlebox (a proxy's error page with 200, a cut
body). It must raise OSError, which the fetcher treats as "leader unreachable, back off", and
never an exception that would end the fetcher's thread.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stratalog.broker.partition import ReplicaFetch
from stratalog.common.names import TopicPartition
from stratalog.server.replication import LeaderSession

FETCH = [(TopicPartition("t", 0), ReplicaFetch(1, 0, -1, 0, 1 << 20))]


@pytest.fixture
def answering() -> Iterator[dict[str, bytes]]:
    reply = {"body": b""}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply["body"])))
            self.end_headers()
            self.wfile.write(reply["body"])

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    reply["url"] = f"http://127.0.0.1:{server.server_address[1]}".encode()
    try:
        yield reply
    finally:
        server.shutdown()


def framed(header: object, data: bytes = b"") -> bytes:
    encoded = json.dumps(header).encode()
    return struct.pack(">I", len(encoded)) + encoded + data


@pytest.mark.parametrize("body, why", [
    (b"<html>502 Bad Gateway</html>", "malformed answer"),
    (b"\x00\x00", "malformed answer"),
    (framed([]), "0 answers for 1 partitions"),
    (framed([{"topic": "t", "partition": 0, "highWatermark": 0, "logStartOffset": 0, "logEndOffset": 9,
              "size": 100}], b"x" * 10), "t-0: 100 bytes announced, 10 left"),
])
def test_a_garbled_fetch_answer_is_an_oserror_naming_the_leader(answering, body, why):
    answering["body"] = body
    session = LeaderSession(answering["url"].decode())
    with pytest.raises(OSError, match=why) as caught:
        session(FETCH, 0, 1, 1 << 20)
    assert "replica fetch from 127.0.0.1:" in str(caught.value)
