"""A minimal HTTP/1.1 client for the benchmarks: one keep-alive connection, one request in flight.

bench/compare.py drives Kafka's broker with raw protocol frames (kafka-python's classes encode and
decode them) rather than kafka-python's KafkaProducer, so that the client's own machinery is not
what gets measured. This is the HTTP counterpart of that driver: it writes the request line and
headers, reads the status line and headers, reads the body by its Content-Length, and decodes a
JSON answer -- what any client must do, and nothing more. aiohttp's ClientSession, which drove
``stratalog serve`` before, spent about 1.5 times the CPU of Kafka's driver per request, CPU the
two cores this machine shares between client and server then did not have for the server.

It speaks what ``stratalog serve`` answers on the routes the benchmarks use: bodies with a
Content-Length, plaintext. Anything else (a chunked body, a closed connection) is an error that
says so.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit


class HttpWire:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def connect(cls, base: str) -> HttpWire:
        """A connection to ``base`` (``http://host:port``)."""
        url = urlsplit(base)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise ValueError(f"{base}: the benchmarks' HTTP client speaks plaintext http://host:port only")
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        return cls(reader, writer, f"{url.hostname}:{url.port}")

    async def request(self, method: str, target: str, body: bytes = b"", content_type: str | None = None,
                      accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body) of one request on this connection."""
        head = f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        if accept is not None:
            head += f"Accept: {accept}\r\n"
        self.writer.write((head + "\r\n").encode("latin-1") + body if body else (head + "\r\n").encode("latin-1"))
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as error:
            raise ConnectionError(f"{method} {target}: the server closed the connection before answering") \
                from error
        lines = raw[:-4].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise ConnectionError(f"{method} {target}: answer {status} has no Content-Length "
                                  f"(transfer-encoding {headers.get('transfer-encoding')!r}), which this client "
                                  "does not read")
        return status, headers, await self.reader.readexactly(int(headers["content-length"]))

    async def json(self, method: str, target: str, body: bytes = b"", content_type: str | None = None
                   ) -> tuple[int, Any]:
        """(status, decoded JSON body) of one request."""
        status, _, data = await self.request(method, target, body, content_type)
        return status, json.loads(data)

    def close(self) -> None:
        self.writer.close()
