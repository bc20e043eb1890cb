"""A file region sent on a connection arrives as the file holds it, over plaintext and over TLS, on
asyncio's event loop and on uvloop.

Real sockets on loopback, a real file, real TLS (certificates made by openssl): the region's bytes
must reach the client as they are, and on a TLS connection they must go through the encryption,
never by sendfile straight onto the socket beneath it. uvloop cannot send from a file
(``loop.sendfile``): what the socket did not take at once is copied there.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from certificates import Authority
from stratalog.broker.fetch import FileRegion
from stratalog.server import event_loop, sendfile
from stratalog.server.records import SENDFILE_ABOVE_BYTES, sends_from_file
from stratalog.server.sendfile import send_region


async def serve_region_and_read(path: Path, position: int, size: int, server_tls: ssl.SSLContext | None,
                                client_tls: ssl.SSLContext | None, *, written_before: bytes = b"head",
                                refusals: list[ConnectionResetError] | None = None) -> bytes:
    """What a client reads of ``written_before`` and then the region; ``refusals`` gets the server's
    ConnectionResetError, where the region could not be sent whole."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A small send buffer: the socket takes a part of the region at once, the rest must follow.
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        with open(path, "rb") as file:
            region = FileRegion.of(file.fileno(), position, size, str(path))
        try:
            writer.write(written_before)   # what was written before the region goes first
            await send_region(writer.transport, region, writer.drain)
            await writer.drain()
        except ConnectionResetError as refusal:
            if refusals is None:
                raise
            refusals.append(refusal)
        finally:
            region.close()
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls,
                                                       server_hostname="localhost" if client_tls else None)
        received = await reader.read()
        writer.close()
    return received


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
@pytest.mark.parametrize("before", [b"head", bytes(range(7, 256)) * 4096], ids=["head-before", "1-MiB-before"])
def test_a_region_arrives_as_the_file_holds_it_after_what_was_written_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: bool, loop: str, before: bytes):
    """Where 1 MiB was written before the region, most of it still waits in the transport's buffer
    when the region comes: the region must go after it, not straight onto the socket ahead of it."""
    path = tmp_path / "segment"
    content = bytes(range(256)) * 4096   # 1 MiB: more than a socket takes at once
    path.write_bytes(content)
    server_tls = client_tls = None
    if tls:
        authority = Authority.create(tmp_path / "ca")
        cert, key = authority.issue(tmp_path / "server", "server", serial=1)
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(cert, key)
        client_tls = ssl.create_default_context(cafile=str(authority.cert))
    at_once: list[int] = []   # what the socket took of the region before the loop sent the rest
    send_at_once = sendfile._send_at_once
    monkeypatch.setattr(sendfile, "_send_at_once", lambda *args: at_once.append(send_at_once(*args)) or at_once[-1])
    received = event_loop.run(serve_region_and_read(path, 100, len(content) - 200, server_tls, client_tls,
                                                    written_before=before), event_loop.chosen(loop))
    assert received == before + content[100:-100]
    # Plaintext after a short head: the socket took a part from the file at once, and the loop sent
    # (or uvloop's case copied) the rest. After what waits in the buffer, or with TLS: nothing
    # straight from the file at once.
    [taken] = at_once
    assert (0 < taken < len(content) - 200) if not tls and len(before) == 4 else taken == 0


def test_a_region_longer_than_its_file_closes_the_connection_short_of_its_length(tmp_path: Path):
    """The frame or headers announced the region's length; the file does not hold it all (it lost
    bytes since the read). The client gets what there is and then the end of the connection, never a
    wrong byte in its place."""
    path = tmp_path / "segment"
    content = bytes(range(256)) * 2048   # 512 KiB
    path.write_bytes(content)
    refusals: list[ConnectionResetError] = []
    received = asyncio.run(serve_region_and_read(path, 0, len(content) + 4096, None, None, written_before=b"",
                                                 refusals=refusals))
    assert received == content
    assert [str(r) for r in refusals] == [f"{path}: {len(content)} of {len(content) + 4096} bytes at 0 could be "
                                          "sent, the file is shorter now"]


@pytest.mark.parametrize("cork", [True, False], ids=["with-tcp-cork", "platform-without-tcp-cork"])
def test_a_fetch_answer_corks_its_connection_and_uncorks_it_or_does_neither_where_the_platform_has_no_cork(
        monkeypatch: pytest.MonkeyPatch, cork: bool):
    from stratalog.server import region_response

    if not cork:   # as on macOS and the BSDs, whose socket module has no TCP_CORK
        monkeypatch.setattr(region_response, "_TCP_CORK", None)

    async def corked_states() -> list[bool | int]:
        states: list[bool | int] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            states.append(region_response.cork(sock, True))
            states.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
            states.append(region_response.cork(sock, False))
            states.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
            await reader.read()
            writer.close()
        return states

    # (corked?, TCP_CORK after, released?, TCP_CORK after)
    assert asyncio.run(corked_states()) == ([True, 1, True, 0] if cork else [False, 0, False, 0])


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_connection_closed_meanwhile_is_left_uncorked_on_either_loop(loop: str):
    """A client that left while its answer waited for the buffer: its socket, as the transport gave
    it, refuses the option (EBADF on asyncio's, ValueError on uvloop's), and the answer ends quietly."""
    from stratalog.server import region_response

    async def cork_after_close() -> bool:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
            sock = writer.get_extra_info("socket")
            writer.close()
            await writer.wait_closed()
            return region_response.cork(sock, True)

    assert event_loop.run(cork_after_close(), loop) is False


def test_a_connection_that_is_not_tcp_is_left_uncorked_and_so_is_one_without_a_socket():
    from stratalog.server import region_response

    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert region_response.cork(left, True) is False   # the kernel refuses TCP_CORK on it
    assert region_response.cork(None, True) is False


def test_a_region_answer_announces_its_own_type_and_length_over_any_given_whatever_their_case(tmp_path: Path):
    from stratalog.server.region_response import RegionResponse

    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100)
    with open(path, "rb") as file:
        region = FileRegion.of(file.fileno(), 10, 80, str(path))
    answer = RegionResponse(region, content_type="application/vnd.kafka.record-batch",
                            headers={"content-type": "text/plain", "CONTENT-LENGTH": "1", "X-Next-Offset": "7"})
    region.close()
    assert answer.headers.getall("Content-Type") == ["application/vnd.kafka.record-batch"]
    assert answer.headers.getall("Content-Length") == ["80"]
    assert answer.headers["X-Next-Offset"] == "7"


def test_only_a_large_binary_fetch_on_a_plaintext_connection_is_sent_from_the_file():
    assert sends_from_file(True, SENDFILE_ABOVE_BYTES + 1, tls=False)
    assert not sends_from_file(True, SENDFILE_ABOVE_BYTES, tls=False)   # small: read and sent with its headers
    assert not sends_from_file(True, 1 << 20, tls=True)                 # TLS encrypts the bytes in memory
    assert not sends_from_file(False, 1 << 20, tls=False)               # JSON is made from the records


def test_a_kafka_fetch_is_sent_from_the_files_only_where_its_answer_may_pass_the_same_size():
    from stratalog.server.kafka.fetch import sends_from_file as kafka_sends_from_file

    big = SENDFILE_ABOVE_BYTES + 1
    assert kafka_sends_from_file(1 << 20, [1 << 20])                        # a Kafka client's defaults
    assert kafka_sends_from_file(big, [big // 2, big // 2 + 1])             # partitions' limits add up
    assert not kafka_sends_from_file(1 << 20, [SENDFILE_ABOVE_BYTES])       # small: read, framed, one write
    assert not kafka_sends_from_file(SENDFILE_ABOVE_BYTES, [1 << 20])       # the request's own bound
    assert not kafka_sends_from_file(1 << 20, [])                           # nothing asked
    # A partition's negative limit reads nothing and does not lower the bound for the others.
    assert kafka_sends_from_file(1 << 20, [10 << 20, -(10 << 20) + 1])
