"""What both listeners' connections share (``server/direct`` for HTTP, ``server/kafka`` for Kafka's
protocol): one worker task per connection that waits for the next request rather than ending with
each (a task per request cost more than the wake-up, bench/README.md, "Service path"), and answers
that wait while the transport's buffer is above its high-water mark; and the write of an answer's
buffers in one go (``write_buffers``)."""

from __future__ import annotations

import asyncio
from collections.abc import MutableSet, Sequence
from typing import Any

from stratalog.server.socket_writes import Outlet


class ServedConnection(asyncio.Protocol):
    def __init__(self, connections: MutableSet[Any]) -> None:
        """``connections``: the listener's open connections, which its close waits for; this one is in
        it from ``connection_made`` until it is lost and its worker has ended."""
        self._connections = connections
        self._worker: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None       # the worker waits for requests
        self._lost = False
        self._writing_paused = False
        self._writable: asyncio.Future[None] | None = None   # an answer waits for the buffer to drain
        self._transport: asyncio.Transport | None = None
        self._outlet: Outlet | None = None   # the writing thread's way to the socket (socket_writes), or none

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._worker is None:   # else at the worker's end (``_worker_ended``): a close waits for it meanwhile
            self._connections.discard(self)
        self._wake_writer()
        self._wake_worker()
        if self._outlet is not None:   # what it queued is still written (unless the connection broke)
            self._outlet.release(discard=exc is not None)

    def writes_failed(self) -> None:
        """The outlet's write failed (the client went) or cut the connection (a file shorter than its
        region): no answer can follow."""
        self._lost = True
        self._wake_worker()
        self._cut_off()

    def _write(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        """An answer's buffers, in one go: to the writing thread where the connection has an outlet,
        else to the transport."""
        if self._outlet is not None:
            self._outlet.write(buffers)
        elif self._transport is not None:
            write_buffers(self._transport, buffers)

    def _cut_off(self) -> None:
        """Abort the connection, the answers the outlet still holds dropped."""
        if self._outlet is not None:
            self._outlet.release(discard=True)
        if self._transport is not None:
            self._transport.abort()

    def _worker_ended(self) -> None:
        """The worker's last step, however it ends."""
        self._worker = self._idle = None
        if self._lost:
            self._connections.discard(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    async def _until_woken(self) -> None:
        """The worker's wait for requests (or for the connection's end): until ``_wake_worker``."""
        self._idle = asyncio.get_running_loop().create_future()
        await self._idle

    def _wake_worker(self) -> None:
        idle, self._idle = self._idle, None
        _resolve(idle)

    async def _writable_again(self) -> None:
        while self._writing_paused and not self._lost:
            self._writable = asyncio.get_running_loop().create_future()
            await self._writable

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        _resolve(waiter)

    @property
    def worker(self) -> asyncio.Task[None] | None:
        return self._worker


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def write_buffers(transport: asyncio.WriteTransport, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
    """``buffers`` in one write. uvloop's ``writelines`` is one writev, the buffers not copied first.
    asyncio's joins them on 3.11, and on CPython 3.12.0-3.12.8 and 3.13.0-3.13.1 never tells the
    protocol to pause writing (gh-127655), so a client that does not read would be buffered without
    bound: there they are joined here and written once."""
    if type(transport).__module__.startswith("uvloop"):
        transport.writelines(buffers)
    else:
        transport.write(b"".join(buffers))
