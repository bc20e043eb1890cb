"""A minimal HTTP/1.1 client: the benchmarks' driver of ``stratalog serve``'s HTTP API.

bench/replication.py's producer, bench/service.py's API side and bench/compare.py's HTTP rows
with minimal drivers: it writes the request line and headers, reads the status line and headers,
reads the body by its Content-Length, and decodes a JSON answer where asked -- what any client
must do, and nothing more, as ``bench/kafka_wire.py`` does with Kafka's frames. On this machine
the load generator shares two cores with what it measures: aiohttp's ClientSession spent about
350 µs of CPU per produce in bench.replication, as much as a third of the leader's, and in
bench.compare about 110 µs a 16 KiB produce, a whole core of its own (bench.compare's rows with
library clients keep it, beside Kafka driven with kafka-python's protocol classes).

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
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                 timeout_s: float | None = 300.0) -> None:
        """``timeout_s``: for each answer (aiohttp's default total timeout), so that a stuck server
        ends the run with an error rather than hanging it; None for none, where the caller bounds the
        whole run instead (bench/service_drivers.py: ``asyncio.timeout`` costs about 8 µs of CPU a
        request, a tenth of this client's, which ``KafkaWire`` does not pay)."""
        self.reader, self.writer, self.host, self.timeout_s = reader, writer, host, timeout_s

    @classmethod
    async def connect(cls, base: str, timeout_s: float | None = 300.0) -> HttpWire:
        """A connection to ``base`` (``http://host:port``)."""
        url = urlsplit(base)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise ValueError(f"{base}: the benchmarks' HTTP client speaks plaintext http://host:port only")
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        return cls(reader, writer, f"{host}:{url.port}", timeout_s)

    async def request(self, method: str, target: str, body: bytes = b"", content_type: str | None = None,
                      accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body) of one request on this connection."""
        head = f"{method} {target} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        if accept is not None:
            head += f"Accept: {accept}\r\n"
        self.writer.write((head + "\r\n").encode("latin-1") + body)
        try:
            if self.timeout_s is None:
                return await self._answer(method, target)
            async with asyncio.timeout(self.timeout_s):
                return await self._answer(method, target)
        except asyncio.IncompleteReadError as error:
            raise ConnectionError(f"{method} {target}: the server closed the connection amid its answer "
                                  f"({len(error.partial)} bytes of it)") from error
        except TimeoutError:
            raise ConnectionError(f"{method} {target}: no whole answer within {self.timeout_s:g} s") from None

    async def _answer(self, method: str, target: str) -> tuple[int, dict[str, str], bytes]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
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
        """(status, decoded JSON body) of one request; a body that is not JSON is an error naming both."""
        status, _, data = await self.request(method, target, body, content_type)
        try:
            return status, json.loads(data)
        except ValueError:
            raise ConnectionError(f"{method} {target}: answer {status} is not JSON: {data[:200]!r}") from None

    def close(self) -> None:
        self.writer.close()
