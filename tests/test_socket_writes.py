"""The native socket writer (native/src/socket_writer.rs) and its outlets (server/socket_writes.py):
answers written by a thread of their own, in order per connection, on real sockets."""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import stratalog_native

from server_harness import STRATALOG
from stratalog.broker.fetch import FileRegion
from stratalog.server.socket_writes import HIGH_WATER, SocketWrites

MIB = 1 << 20


@pytest.fixture
def writer() -> Iterator[stratalog_native.SocketWriter]:
    made = stratalog_native.SocketWriter()
    yield made
    made.close()


def pair(writer: stratalog_native.SocketWriter) -> tuple[int, socket.socket]:
    """A connection: the writer's descriptor for one end, and the other end to read from."""
    ours, theirs = socket.socketpair()
    fd = os.dup(ours.fileno())
    ours.close()
    writer.attach(fd)
    theirs.settimeout(20)
    return fd, theirs


def read_all(sock: socket.socket) -> bytes:
    """Everything until the writer closes its end."""
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"the connection ended after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def next_events(writer: stratalog_native.SocketWriter) -> list[tuple[int, int]]:
    readable, _, _ = select.select([writer.events_fd], [], [], 20)
    assert readable, "no event came within 20 s"
    return writer.take_events()


def test_answers_arrive_whole_and_in_the_order_they_were_queued_whatever_their_buffers(writer) -> None:
    fd, peer = pair(writer)
    sent = []
    for i in range(200):
        piece = os.urandom(i * 97 % 5000 + 1)
        kind = (bytes, bytearray, memoryview)[i % 3]
        writer.send(fd, [b"<%d>" % i, kind(piece), b""])
        sent.append(b"<%d>" % i + piece)
    writer.release(fd)
    assert read_all(peer) == b"".join(sent)


def test_a_peer_that_does_not_read_holds_up_its_own_connection_only(writer) -> None:
    stuck_fd, stuck_peer = pair(writer)
    fd, peer = pair(writer)
    writer.send(stuck_fd, [b"x" * (16 * MIB)])   # far more than a socket buffer: the writer waits on it
    data = os.urandom(4 * MIB)
    writer.send(fd, [data])
    assert read_exactly(peer, len(data)) == data
    assert writer.queued(stuck_fd) > 0
    writer.release(stuck_fd, discard=True)
    writer.release(fd)


def test_a_released_connection_is_closed_once_its_queue_is_written_and_a_discarded_one_at_once(writer) -> None:
    kept_fd, kept_peer = pair(writer)
    dropped_fd, dropped_peer = pair(writer)
    data = os.urandom(8 * MIB)
    for fd in (kept_fd, dropped_fd):
        writer.send(fd, [data])
        writer.release(fd, discard=fd == dropped_fd)
    assert read_all(kept_peer) == data
    assert len(read_all(dropped_peer)) < len(data)


def test_a_writer_tells_when_the_queue_fell_to_the_level_asked_for(writer) -> None:
    fd, peer = pair(writer)
    writer.send(fd, [b"y" * (4 * MIB)])
    assert not writer.report_below(fd, 1024)
    assert writer.take_events() == []
    got = read_exactly(peer, 4 * MIB - 512)
    assert next_events(writer) == [(fd, 0)]
    assert writer.queued(fd) <= 1024
    assert writer.report_below(fd, 1024)
    assert got == b"y" * len(got)
    writer.release(fd)


def test_a_peer_that_went_is_reported_with_the_errno_of_the_failed_write_and_the_rest_dropped(writer) -> None:
    fd, peer = pair(writer)
    peer.close()
    writer.send(fd, [b"z" * MIB])
    assert next_events(writer) == [(fd, errno.EPIPE)]
    assert writer.queued(fd) == 0
    assert writer.send(fd, [b"more"]) == 0
    writer.release(fd)


def test_a_file_region_follows_its_head_and_a_file_shorter_than_its_region_cuts_the_connection(
        writer, tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    content = os.urandom(3 * MIB)
    path.write_bytes(content)
    fd, peer = pair(writer)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(read_all(peer)))
    reader.start()
    with open(path, "rb") as file:
        writer.send_file(fd, [b"head:"], os.dup(file.fileno()), 1000, MIB)
        writer.send(fd, [b":tail"])
        writer.send_file(fd, [b"short:"], os.dup(file.fileno()), len(content) - 10, 100)
    writer.send(fd, [b"never"])
    assert next_events(writer) == [(fd, -1)]
    reader.join(20)   # the writer shut the connection down: the peer sees its end before the release
    assert received == [b"head:" + content[1000:1000 + MIB] + b":tail" + b"short:" + content[-10:]]
    writer.release(fd)


def test_a_closed_writer_refuses_new_connections_and_forgets_released_ones_quietly(writer) -> None:
    fd, peer = pair(writer)
    writer.close()
    assert read_all(peer) == b""   # its descriptor was closed with the writer
    writer.release(fd)
    refused = os.dup(peer.fileno())
    with pytest.raises(ValueError, match="closed"):
        writer.attach(refused)
    os.close(refused)


def test_a_connection_released_before_its_events_were_taken_has_them_dropped(writer) -> None:
    # Its number may be a new connection's by the time the loop reads them: they must not reach that one.
    fd, peer = pair(writer)
    peer.close()
    writer.send(fd, [b"z" * MIB])
    readable, _, _ = select.select([writer.events_fd], [], [], 20)
    assert readable   # the failure's event waits
    writer.release(fd)
    assert writer.take_events() == []


def test_a_released_connection_is_held_until_its_queue_is_written(writer) -> None:
    fd, peer = pair(writer)
    writer.send(fd, [b"h" * (4 * MIB)])
    writer.release(fd)
    assert writer.held() == 1
    assert read_all(peer) == b"h" * (4 * MIB)
    assert writer.held() == 0   # forgotten before its descriptor was closed, which the end of input says


def test_a_file_descriptor_stays_the_callers_when_its_send_is_refused(writer, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    file_fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="not a connection"):
            writer.send_file(1 << 20, [b"head"], file_fd, 0, 10)
        assert os.pread(file_fd, 4, 0) == b"0123"   # still open: the caller closes it
    finally:
        os.close(file_fd)


class Recorder:
    """A connection's side of an outlet: what it was told."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def pause_writing(self) -> None:
        self.told.append("pause")

    def resume_writing(self) -> None:
        self.told.append("resume")

    def writes_failed(self) -> None:
        self.told.append("failed")


async def _outlet_run(tmp_path: Path) -> tuple[list[str], bytes, bytes]:
    loop = asyncio.get_running_loop()
    server_sock, client = socket.socketpair()
    client.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, server_sock)
    writes = SocketWrites()
    recorder = Recorder()
    outlet = writes.outlet(transport, recorder)
    assert outlet is not None
    path = tmp_path / "f"
    path.write_bytes(os.urandom(MIB))
    opened = os.open(path, os.O_RDONLY)
    region = FileRegion.of(opened, 0, MIB, str(path))
    os.close(opened)
    outlet.write_pieces([b"a" * HIGH_WATER, region, b"end"])
    assert recorder.told == ["pause"] and region.file.closed
    received = bytearray()
    while len(received) < HIGH_WATER + MIB + 3:
        received += await asyncio.wait_for(loop.sock_recv(client, 1 << 20), 20)
    assert await asyncio.wait_for(outlet.written(), 20)
    assert recorder.told == ["pause", "resume"]
    client.close()
    outlet.write([b"b" * 100])
    async def failed() -> None:
        while "failed" not in recorder.told:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(failed(), 20)
    outlet.release()
    transport.close()
    writes.close()
    return recorder.told, bytes(received), path.read_bytes()


def test_an_outlet_pauses_its_connection_past_the_high_mark_resumes_it_and_says_when_writes_fail(
        tmp_path: Path) -> None:
    told, received, file = asyncio.run(_outlet_run(tmp_path))
    assert told == ["pause", "resume", "failed"]
    assert received == b"a" * HIGH_WATER + file + b"end"


def test_a_server_told_a_socket_writes_setting_it_does_not_know_says_so_and_exits(tmp_path: Path) -> None:
    ran = subprocess.run([*STRATALOG, "serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0"],
                         env={**os.environ, "STRATALOG_SOCKET_WRITES": "threads"}, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 1, ran
    said = ran.stdout + ran.stderr
    assert "cannot listen: STRATALOG_SOCKET_WRITES='threads': expected thread" in said and "Traceback" not in said, \
        said


async def _stopping_run() -> bytes:
    loop = asyncio.get_running_loop()
    server_sock, client = socket.socketpair()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, server_sock)
    writes = SocketWrites()
    outlet = writes.outlet(transport, Recorder())
    assert outlet is not None
    outlet.write([b"s" * (8 * MIB)])
    outlet.release()
    transport.close()
    client.settimeout(20)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(read_all(client)))
    reader.start()   # a reader slower than the writer: most of the 8 MiB is still queued when the close begins
    await writes.close_when_written(20)
    await loop.run_in_executor(None, reader.join, 20)
    client.close()
    return received[0] if received else b""


def test_a_writer_closed_when_written_finishes_the_answers_of_connections_already_closed() -> None:
    assert asyncio.run(_stopping_run()) == b"s" * (8 * MIB)
