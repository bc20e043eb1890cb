"""An HTTP response whose body is a region of a segment file, sent with ``sendfile``.

A binary fetch's batches go from the file to the socket without becoming Python bytes, as
aiohttp's ``FileResponse`` sends a file and Kafka's ``transferTo`` a fetch. Only plaintext
connections get one (TLS must encrypt the bytes in memory). The region is closed once sent (one
dropped unsent closes with its file object); a short one closes the connection (``send_region``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

from aiohttp import hdrs, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.web_request import BaseRequest

from stratalog.broker.fetch import FileRegion
from stratalog.server.sendfile import send_region


_OWN_HEADERS = frozenset((hdrs.CONTENT_TYPE.lower(), hdrs.CONTENT_LENGTH.lower()))


class RegionResponse(web.StreamResponse):
    def __init__(self, region: FileRegion, *, content_type: str, headers: dict[str, str]) -> None:
        # Set as plain headers: the content_type and content_length setters parse and rebuild them,
        # a cost on every fetch. As the setters do, they replace any given, whatever its case.
        given = {name: value for name, value in headers.items() if name.lower() not in _OWN_HEADERS}
        super().__init__(headers={**given, hdrs.CONTENT_TYPE: content_type, hdrs.CONTENT_LENGTH: str(region.size)})
        self._region = region

    @property
    def region(self) -> FileRegion:
        return self._region

    async def prepare(self, request: BaseRequest) -> AbstractStreamWriter | None:
        if self.prepared:
            return await super().prepare(request)
        region = self._region
        try:
            with corked(request.transport):
                writer = await super().prepare(request)   # the headers go now (a StreamResponse's way)
                if request.transport is None or writer is None:
                    raise ConnectionResetError("the connection closed before the records were sent")
                await send_region(request.transport, region, writer.drain)
            await super().write_eof()
            return writer
        finally:
            region.close()


@contextlib.contextmanager
def corked(transport: asyncio.BaseTransport | None) -> Iterator[None]:
    """The connection corked (``cork``) for what is written within: a head and the region after it."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    held = cork(sock, True)
    try:
        yield
    finally:
        if held:
            cork(sock, False)


_TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)   # Linux's; elsewhere the two segments stay two


def cork(sock: socket.socket | None, on: bool) -> bool:
    """Hold (``on``) or release the connection's partial segments (TCP_CORK), so that the headers and
    the records leave in one segment rather than two; the receiver then wakes and parses once. False
    where there is nothing to hold: no TCP_CORK here, no socket, a socket that is not TCP (the kernel
    refuses the option), or one closed meanwhile."""
    if _TCP_CORK is None or sock is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 1 if on else 0)
    except (OSError, ValueError):   # closed: EBADF on asyncio's socket, ValueError on uvloop's PseudoSocket
        return False
    return True
