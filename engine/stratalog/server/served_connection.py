"""What both listeners' connections share (``server/direct`` for HTTP, ``server/kafka`` for Kafka's
protocol): one worker task per connection that waits for the next request rather than ending with
each (a task per request cost more than the wake-up, bench/README.md, "Service path"), and answers
that wait while the transport's buffer is above its high-water mark."""

from __future__ import annotations

import asyncio


class ServedConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self._worker: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None       # the worker waits for requests
        self._lost = False
        self._writing_paused = False
        self._writable: asyncio.Future[None] | None = None   # an answer waits for the buffer to drain

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake_writer()
        self._wake_worker()

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
        if idle is not None and not idle.done():
            idle.set_result(None)

    async def _writable_again(self) -> None:
        while self._writing_paused and not self._lost:
            self._writable = asyncio.get_running_loop().create_future()
            await self._writable

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def worker(self) -> asyncio.Task[None] | None:
        return self._worker
