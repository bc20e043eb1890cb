"""Sending a file region on a connection, for both transports (the Kafka listener and HTTP).

When nothing written before waits in the transport's buffer, the region goes straight from its
file to the socket with ``os.sendfile``, for as much as the socket takes at once: a consumer's or
follower's fetch is usually sent whole that way. ``loop.sendfile``, which waits for what was
written before to go and then for the socket to take the rest, costs an ``fstat``, two ``lseek``,
two ``epoll_ctl`` calls and a task per region besides; it sends what the socket did not take at
once, and all of a region on a TLS connection (through the encryption: the callers send regions
on plaintext connections only, where sendfile is zero-copy). uvloop has no ``loop.sendfile``: there
the rest is read and written in pieces, each after the transport's buffer drained (``drain``).

A region whose file lost bytes since the read cannot fill the length its frame or headers
already announced: the connection is closed, with a warning naming the file, rather than let
the client read the next answer's bytes as these records.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from stratalog.broker.fetch import FileRegion

logger = logging.getLogger(__name__)

# A fetch asking for more than this goes from the segment file to the socket (sendfile); a smaller
# one is read and sent with its headers or frame in one write, on both listeners. Below it the
# copy costs less than sendfile's own work: a duplicated descriptor, a send of its own for the
# fields (corked around them on the HTTP listener, or else a segment of their own for the client
# to wake for). Server CPU per 16 KiB HTTP fetch, copied against sent from the file: about 300
# against 330 us. As any fetch that is read (JSON, TLS), one whose first batch is larger than it
# asked for reads that batch whole (Kafka's min_one_message): up to max.message.bytes.
SENDFILE_ABOVE_BYTES = 64 * 1024

# Where the loop cannot send from a file (uvloop), the rest of a region goes in copies of this size.
COPY_PIECE_BYTES = 256 * 1024


async def send_region(transport: asyncio.WriteTransport, region: FileRegion,
                      drain: Callable[[], Awaitable[None]]) -> None:
    """Send ``region`` whole, or close the connection and raise ``ConnectionResetError``. ``drain``
    waits until the transport's buffer is below its high-water mark (the connection's own wait)."""
    if transport.is_closing():
        raise ConnectionResetError("the connection closed before the records were sent")
    sent = _send_at_once(transport, region)
    if sent < region.size:
        try:
            sent += await asyncio.get_running_loop().sendfile(transport, region.file, region.position + sent,
                                                              region.size - sent)
        except NotImplementedError:   # uvloop's loop
            sent = await _copy_rest(transport, region, sent, drain)
    if sent != region.size:
        transport.close()
        why = f"{region.source}: {sent} of {region.size} bytes at {region.position} could be sent, the file is " \
              "shorter now"
        logger.warning("closing a connection amid a fetch answer: %s", why)
        raise ConnectionResetError(why)


def _send_at_once(transport: asyncio.WriteTransport, region: FileRegion) -> int:
    """What the socket takes of the region now, without waiting; 0 when bytes written before still
    wait in the transport (they go first), or when the transport encrypts (TLS): the socket beneath
    it must carry records, not the file's bytes (``loop.sendfile`` copies through the encryption)."""
    if transport.get_write_buffer_size() or transport.get_extra_info("sslcontext") is not None:
        return 0
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    out_fd, in_fd = sock.fileno(), region.file.fileno()
    sent = 0
    while sent < region.size:
        try:
            n = os.sendfile(out_fd, in_fd, region.position + sent, region.size - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:   # the file ends before the region does: loop.sendfile finds the same and says so
            break
        sent += n
    return sent


async def _copy_rest(transport: asyncio.WriteTransport, region: FileRegion, sent: int,
                     drain: Callable[[], Awaitable[None]]) -> int:
    """The region from ``sent`` on, read and written a piece at a time; where it was sent up to
    (short of the region's end if the file is)."""
    fd = region.file.fileno()
    while sent < region.size:
        await drain()
        if transport.is_closing():
            raise ConnectionResetError("the connection closed before the records were sent")
        piece = os.pread(fd, min(COPY_PIECE_BYTES, region.size - sent), region.position + sent)
        if not piece:
            break
        transport.write(piece)
        sent += len(piece)
    return sent
