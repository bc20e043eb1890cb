"""Raw Kafka frames for the listener's tests: requests written and responses read with kio.

Not a test module. Real clients (kafka-python, aiokafka, librdkafka) cover the ordinary paths;
this is for what they never send: refused versions, broken frames, requests that must fail.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer


def request_frame(body: Any, correlation_id: int = 1, client_id: str | None = "tests") -> bytes:
    header_class = body.__header_schema__
    out = io.BytesIO()
    entity_writer(header_class)(out, header_class(request_api_key=body.__api_key__,
                                                  request_api_version=body.__version__,
                                                  correlation_id=correlation_id, client_id=client_id))
    entity_writer(type(body))(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def connect(address: str, timeout: float = 10.0) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame without its size, or None when the server closed the connection."""
    size = _read_exactly(sock, 4)
    if size is None:
        return None
    body = _read_exactly(sock, struct.unpack(">i", size)[0])
    if body is None:
        raise AssertionError("the server closed the connection in the middle of a response")
    return body


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = b""
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            if chunks:
                raise AssertionError(f"the server closed the connection after {len(chunks)} of {n} bytes")
            return None
        chunks += chunk
    return chunks


def call(address: str, body: Any, response_class: Any) -> tuple[int, Any]:
    """Send one request, read its response: (correlation id, the kio response entity)."""
    with connect(address) as sock:
        sock.sendall(request_frame(body, correlation_id=42))
        frame = read_frame(sock)
    assert frame is not None, "the server closed the connection instead of answering"
    header, used = entity_reader(response_class.__header_schema__)(frame, 0)
    response, size = entity_reader(response_class)(frame, used)
    assert used + size == len(frame)
    return header.correlation_id, response


def closed_without_answer(sock: socket.socket) -> bool:
    try:
        return read_frame(sock) is None
    except ConnectionResetError:
        return True
