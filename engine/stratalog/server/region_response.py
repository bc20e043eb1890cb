"""An HTTP response whose body is a region of a segment file, sent with ``sendfile``.

A binary fetch's batches go from the file to the socket without becoming Python bytes, as
aiohttp's ``FileResponse`` sends a file and Kafka's ``transferTo`` a fetch. Only plaintext
connections get one (TLS must encrypt the bytes in memory). The region is closed once sent (one
dropped unsent closes with its file object). A file that lost bytes since the read (a truncation)
cannot fill the length the headers announced: the connection is then closed, not left with
a short body.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.web_request import BaseRequest

from stratalog.broker.fetch import FileRegion

logger = logging.getLogger(__name__)


class RegionResponse(web.StreamResponse):
    def __init__(self, region: FileRegion, *, content_type: str, headers: dict[str, str]) -> None:
        super().__init__(headers=headers)
        self.content_type = content_type
        self.content_length = region.size
        self._region = region

    async def prepare(self, request: BaseRequest) -> AbstractStreamWriter | None:
        if self.prepared:
            return await super().prepare(request)
        region = self._region
        try:
            writer = await super().prepare(request)   # the headers go now (a StreamResponse's way)
            transport = request.transport
            if transport is None or transport.is_closing():
                raise ConnectionResetError("the connection closed before the records were sent")
            sent = await asyncio.get_running_loop().sendfile(transport, region.file, region.position, region.size)
            if sent != region.size:
                transport.close()
                why = (f"{region.source}: {sent} of {region.size} bytes at {region.position} could be sent, the file "
                       "is shorter now")
                logger.warning("closing a connection amid a fetch answer: %s", why)
                raise ConnectionResetError(why)
            await super().write_eof()
            return writer
        finally:
            region.close()
