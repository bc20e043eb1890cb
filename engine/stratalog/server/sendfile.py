"""Sending a file region on a connection, for both transports (the Kafka listener and HTTP).

``loop.sendfile`` sends it once what was written before has gone (natively on plaintext TCP).
A region whose file lost bytes since the read cannot fill the length its frame or headers
already announced: the connection is closed, with a warning naming the file, rather than let
the client read the next answer's bytes as these records.
"""

from __future__ import annotations

import asyncio
import logging

from stratalog.broker.fetch import FileRegion

logger = logging.getLogger(__name__)


async def send_region(transport: asyncio.WriteTransport, region: FileRegion) -> None:
    """Send ``region`` whole, or close the connection and raise ``ConnectionResetError``."""
    if transport.is_closing():
        raise ConnectionResetError("the connection closed before the records were sent")
    sent = await asyncio.get_running_loop().sendfile(transport, region.file, region.position, region.size)
    if sent != region.size:
        transport.close()
        why = f"{region.source}: {sent} of {region.size} bytes at {region.position} could be sent, the file is " \
              "shorter now"
        logger.warning("closing a connection amid a fetch answer: %s", why)
        raise ConnectionResetError(why)
