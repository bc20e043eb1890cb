"""Answers written to plaintext sockets by the native kernel's writing thread, off the event loop.

A busy server is bound by its event loop's one thread, and about a sixth of that thread's time went
to the send(2) of answers (bench/README.md, "Service path"); Kafka's broker, too, writes answers on
network threads apart from the threads that handle requests. ``SocketWrites`` (one per listener)
gives each plaintext connection an ``Outlet``: the answers go to the native ``SocketWriter``, which
writes them in order to its own duplicate of the socket with the interpreter lock free. While a
connection has an outlet, its transport writes nothing, so the two cannot overtake each other; an
outlet is released (its queue still written, then its duplicate closed) before anything else may
write on the connection (aiohttp, once a connection is handed to it).

What the loop must hear of comes back as events on an eventfd the loop reads: a queue fell below the
level a paused connection waits for; a write failed (the client went: the connection is aborted); a
segment file ended before the region sent from it did (the writer shut the connection down, as
``sendfile.send_region`` closes it: the answer's head promised bytes that will not come).

Without the native kernel, or with ``STRATALOG_SOCKET_WRITES=loop``, answers are written by the
transports on the loop, as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Sequence
from typing import Protocol

from stratalog.records.native import kernel
from stratalog.broker.fetch import FileRegion

logger = logging.getLogger(__name__)

# A connection stops answering past this many bytes queued and goes on below the low mark, as an
# asyncio transport's default write-buffer limits do.
HIGH_WATER = 64 * 1024
LOW_WATER = 16 * 1024
_CHOICES = ("thread", "loop")


class Writable(Protocol):
    """What an outlet tells its connection: stop and go on answering, and that the connection failed."""

    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...
    def writes_failed(self) -> None: ...


def thread_writes_enabled() -> bool:
    """Whether answers go to the writing thread: the native kernel is there, and
    ``STRATALOG_SOCKET_WRITES`` is ``thread`` (the default) rather than ``loop``."""
    choice = os.environ.get("STRATALOG_SOCKET_WRITES", "thread")
    if choice not in _CHOICES:
        raise ValueError(f"STRATALOG_SOCKET_WRITES={choice!r}: expected thread (answers written by the native "
                         "kernel's writing thread) or loop (by the event loop's transports)")
    return choice == "thread" and kernel is not None and hasattr(kernel, "SocketWriter")


class SocketWrites:
    """One writing thread and the outlets of a listener's connections, on the running loop."""

    def __init__(self) -> None:
        assert kernel is not None
        self._loop = asyncio.get_running_loop()
        self._writer = kernel.SocketWriter()
        self._outlets: dict[int, Outlet] = {}
        self._loop.add_reader(self._writer.events_fd, self._on_events)
        self._closed = False

    def outlet(self, transport: asyncio.BaseTransport, connection: Writable) -> Outlet | None:
        """An outlet for a new connection; None where answers must go through the transport: TLS
        (the transport encrypts them), no socket beneath it, or writes closed."""
        if self._closed or transport.get_extra_info("sslcontext") is not None:
            return None
        sock = transport.get_extra_info("socket")
        if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            return None
        try:
            fd = os.dup(sock.fileno())
        except OSError as error:   # out of descriptors: this connection's answers go on the loop
            logger.warning("answers of a connection written on the loop: %s", error)
            return None
        try:
            self._writer.attach(fd)
        except BaseException:
            os.close(fd)
            raise
        outlet = Outlet(self, fd, connection)
        self._outlets[fd] = outlet
        return outlet

    async def close_when_written(self, timeout: float) -> None:
        """``close`` once the connections released are written and closed, or after ``timeout``
        seconds (a client that does not read loses the rest then): a server stopping gracefully
        finishes the answers it gave, as it did when the loop wrote them."""
        deadline = self._loop.time() + timeout
        while not self._closed and self._writer.held() and self._loop.time() < deadline:
            await asyncio.sleep(0.01)
        self.close()

    def close(self) -> None:
        """Write what the sockets take now, close what is held, and end the thread (the listener's
        connections are closed by then)."""
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._writer.events_fd)
        self._writer.close()
        for outlet in list(self._outlets.values()):
            outlet._gone()

    def _on_events(self) -> None:
        for fd, code in self._writer.take_events():
            outlet = self._outlets.get(fd)
            if outlet is not None:
                try:
                    outlet._event(code)
                except Exception:   # a fault of ours, in one connection: the others still hear theirs
                    logger.exception("a connection's answers: handling event %d failed", code)


class Outlet:
    """One connection's way to the writing thread: its answers in order."""

    __slots__ = ("_writes", "_writer", "fd", "_connection", "_paused", "_emptied", "_released")

    def __init__(self, writes: SocketWrites, fd: int, connection: Writable) -> None:
        self._writes = writes
        self._writer = writes._writer
        self.fd = fd
        self._connection = connection
        self._paused = False
        self._emptied: asyncio.Future[None] | None = None
        self._released = False

    def write(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        if not self._released:
            self._check(self._writer.send(self.fd, buffers))

    def send_region(self, head: Sequence[bytes | bytearray | memoryview], region: FileRegion) -> None:
        """``head``, then ``region`` from its file, in one segment where the socket takes both. The
        region is closed here (the writer sends from a duplicate of its descriptor)."""
        try:
            if self._released:
                return
            file_fd = os.dup(region.file.fileno())
            try:
                queued = self._writer.send_file(self.fd, head, file_fd, region.position, region.size)
            except BaseException:
                os.close(file_fd)
                raise
            self._check(queued)
        finally:
            region.close()

    def write_pieces(self, pieces: Sequence[bytes | bytearray | memoryview | FileRegion]) -> None:
        """Buffers and file regions in order, the buffers before a region sent as its head. The
        regions are closed here, sent or not."""
        buffers: list[bytes | bytearray | memoryview] = []
        done = 0
        try:
            for piece in pieces:
                done += 1
                if isinstance(piece, FileRegion):
                    self.send_region(buffers, piece)
                    buffers = []
                else:
                    buffers.append(piece)
            if buffers:
                self.write(buffers)
        finally:
            for piece in pieces[done:]:
                if isinstance(piece, FileRegion):
                    piece.close()

    async def written(self) -> bool:
        """Until every answer queued is taken by the socket: True; False when the writes failed (or
        the outlet was released meanwhile)."""
        while not self._released:
            if self._writer.report_below(self.fd, 0):   # (which takes the place of a pause's level)
                self._wake()
                return not self._writer.failed(self.fd)
            if self._emptied is None:
                self._emptied = self._writes._loop.create_future()
            await self._emptied
        return False

    def release(self, *, discard: bool = False) -> None:
        """Nothing more goes through this outlet: what it queued is still written (not with
        ``discard``), then the writer's duplicate of the socket is closed."""
        if self._released:
            return
        self._writer.release(self.fd, discard)
        self._gone()

    def _gone(self) -> None:
        self._released = True
        self._writes._outlets.pop(self.fd, None)
        self._wake()

    @property
    def idle(self) -> bool:
        """Nothing queued is still waiting for the socket."""
        return self._released or self._writer.queued(self.fd) == 0

    def _check(self, queued: int) -> None:
        if queued > HIGH_WATER and not self._paused and not self._writer.report_below(self.fd, LOW_WATER):
            self._paused = True
            self._connection.pause_writing()

    def _event(self, code: int) -> None:
        if code < 0:
            logger.warning("closing a connection amid an answer: a segment file is shorter now than the region "
                           "its answer announced")
        if code != 0:   # the client went, or the connection was cut
            self._connection.writes_failed()
        self._wake()

    def _wake(self) -> None:
        emptied, self._emptied = self._emptied, None
        if emptied is not None and not emptied.done():
            emptied.set_result(None)
        if self._paused:
            self._paused = False
            self._connection.resume_writing()
