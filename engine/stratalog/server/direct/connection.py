"""One client connection on the direct path: its requests framed as they come, answered one after
another in order (HTTP/1.1), or the connection handed to aiohttp.

Each request passes the gate's four jobs by the gate's own ``through_gate`` (``server/gate.py``):
the request counted by method, route and status; errors as the API's JSON answers; the bearer
token and the route's verb (``access.http.admit_to``); 503 when not ready. Handlers keep running
when the client goes away (aiohttp's default too): an accepted produce completes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from aiohttp import web

from stratalog.broker.fetch import FileRegion

from stratalog.server.access.http import admit_to
from stratalog.server.access.permissions import Need
from stratalog.server.data_answer import DataAnswer, DataHandler
from stratalog.server.direct.framing import (
    DATA_ROUTE,
    LEAVE,
    WAIT,
    Head,
    HeadReader,
    HttpDate,
    answer_head,
    data_answer_head,
    head_verdict,
)
from stratalog.server.direct.request import DirectRequest
from stratalog.server.gate import through_gate
from stratalog.server.region_response import corked
from stratalog.server.sendfile import send_region
from stratalog.server.served_connection import ServedConnection
from stratalog.server.socket_writes import Outlet, SocketWrites
from stratalog.server.state import ServerState

logger = logging.getLogger(__name__)

# Requests framed and waiting past this many, or bytes past this many (a client pipelining without
# reading the answers), stop the reading until the answers are out.
MAX_QUEUED = 16
MAX_BUFFERED = 64 * 1024


@dataclass
class DirectRoutes:
    """What every direct connection shares: the data routes' handlers and needs by method, the app and
    its state, and aiohttp's protocol for the connections handed over."""

    app: web.Application
    state: ServerState
    handlers: Mapping[str, tuple[DataHandler, Need]]
    fallback: Callable[[], asyncio.Protocol]
    date: HttpDate = field(default_factory=HttpDate)
    connections: set[DirectConnection] = field(default_factory=set)
    writes: SocketWrites | None = None   # answers written off the loop (socket_writes), where it can


class DirectConnection(ServedConnection):
    def __init__(self, routes: DirectRoutes) -> None:
        super().__init__(routes.connections)
        self._routes = routes
        self._loop = asyncio.get_running_loop()
        self._pending = bytearray()    # received, not yet framed (a head or body still coming, or handed over)
        self._need = 0                 # a body is coming: framing waits until ``_pending`` holds this many bytes
        self._scanned = 0              # a head is coming: how much of it ``head_verdict`` has looked at
        self._line_checked = False     # ... and whether its request line was whole and a data route's
        self._heads = HeadReader()
        self._queue: deque[tuple[Head, bytes]] = deque()
        self._queued_bytes = 0
        self._answering = False        # a request is being answered
        self._handing_off = False      # a request for aiohttp came: it gets the connection once the queue is answered
        self._last = False             # a request without keep-alive came: nothing after it is read
        self._eof = False
        self._reading_paused = False
        self._handoff: asyncio.Task[None] | None = None   # waits for the outlet's answers to be written
        self.last_active = self._loop.time()

    # -- asyncio's protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)   # uvloop's transports are not asyncio.Transport subclasses
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:   # answers are single writes: nothing to gain from Nagle, a delayed ACK to lose (aiohttp does the same)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._routes.connections.add(self)
        writes = self._routes.writes
        if writes is not None:
            self._outlet = writes.outlet(transport, self)

    def data_received(self, data: bytes) -> None:
        if self._last or self._lost:
            return
        self.last_active = self._loop.time()
        pending = self._pending
        if pending or self._handing_off:
            pending += data
            if self._handing_off or len(pending) < self._need:
                self._throttle()
                return
            del pending[:self._frame(pending)]
        else:   # most requests come whole in one piece: framed from it, without a copy first
            taken = self._frame(data)
            if taken < len(data):
                pending += memoryview(data)[taken:]
        if self._worker is None:
            if self._queue:
                self._worker = self._loop.create_task(self._serve())
            elif self._handing_off:
                self._hand_off()
                return
        elif self._queue or self._handing_off:
            self._wake_worker()
        self._throttle()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake_worker()
        if self._worker is None and self._handing_off:
            return self._hand_off()
        busy = self._worker is not None
        # Keep the sending half open for the answers still owed (TLS cannot: it closes either way).
        return True if busy and self._transport is not None and \
            self._transport.get_extra_info("sslcontext") is None else None

    # -- framing -----------------------------------------------------------------------------------
    def _frame(self, buf: bytes | bytearray) -> int:
        """Queue each whole request at the start of ``buf``; how many bytes they took. Stops at a request
        still coming (``_need``, ``_scanned``) or at the first one that is aiohttp's (``_handing_off``)."""
        self._need = 0
        pos, size = 0, len(buf)
        limit = self._routes.state.body_limit()
        view = memoryview(buf)
        while pos < size:
            end, self._line_checked = head_verdict(buf, pos, self._scanned, self._line_checked)
            if end == WAIT:
                self._scanned = size - pos
                break
            self._scanned, self._line_checked = 0, False
            head = None if end == LEAVE else self._heads.read(bytes(view[pos:end]))
            if head is None or head.body_length > limit:
                self._handing_off = True
                break
            stop = end + head.body_length
            if stop > size:
                self._need = stop - pos
                # Its head is whole: found again at once (the search starts 3 bytes before what was scanned).
                self._scanned, self._line_checked = end - pos - 4, True
                break
            body = bytes(view[end:stop])
            self._queue.append((head, body))
            self._queued_bytes += len(body)
            pos = stop
            if not head.keep_alive:
                self._last = True
                return size
        return pos

    def _throttle(self) -> None:
        """Stop reading while answers are owed and a client keeps sending (pipelining, or a request
        for aiohttp waiting for the queue): at most ``MAX_QUEUED`` requests and ``MAX_BUFFERED`` bytes
        wait besides a body still coming. ``_serve`` reads again once they are answered."""
        if self._reading_paused or self._transport is None or self.idle:
            return
        if self._handing_off or len(self._queue) > MAX_QUEUED or \
                self._queued_bytes + len(self._pending) > MAX_BUFFERED:
            self._transport.pause_reading()
            self._reading_paused = True

    # -- answering ---------------------------------------------------------------------------------
    async def _serve(self) -> None:
        """Answer the queue as it fills, until the connection ends or is handed over (waiting, not ending,
        when it is empty: a task per request would cost more than the wake-up)."""
        transport = self._transport
        assert transport is not None
        loop = self._loop
        state = self._routes.state
        try:
            while not self._lost:
                if not self._queue:
                    if self._handing_off or self._last or self._eof or state.draining:
                        break
                    if self._reading_paused:
                        self._reading_paused = False
                        transport.resume_reading()
                    self.last_active = loop.time()
                    await self._until_woken()
                    continue
                head, body = self._queue.popleft()
                self._queued_bytes -= len(body)
                self._answering = True
                try:
                    await self._answer(head, body)
                finally:
                    self._answering = False
                if state.draining:   # its answer said that the connection closes: nothing after it is answered
                    self._queue.clear()
                    self._handing_off = False
                    break
        except Exception:   # a fault of the server's own, not the request's (those are answers): no answer can follow
            logger.exception("closing a connection: answering %s failed", self._peer())
            self._lost = True
            self._cut_off()
            return
        finally:
            self._worker_ended()
            self.last_active = loop.time()
        if self._lost:
            return
        if self._handing_off:
            self._hand_off()
        else:   # the last request, the end of the input, or the server stopping
            transport.close()

    async def _answer(self, head: Head, body: bytes) -> None:
        routes = self._routes
        state = routes.state
        transport = self._transport
        assert transport is not None
        handler, need = routes.handlers[head.method]
        request = DirectRequest(head, body, transport, routes.app)
        access = state.access
        response = await through_gate(state, request, handler, DATA_ROUTE, (lambda: admit_to(
            access, need, f"{head.method} {DATA_ROUTE}", head.headers.get("Authorization"), head.topic))
            if access.enabled else None, True)
        keep_alive = head.keep_alive and not state.draining   # a draining server closes after the answer
        date = routes.date.at(time.time())
        if isinstance(response, DataAnswer):
            region = response.region
            answer = data_answer_head(response.content_type, response.headers, response.size, date,
                                      keep_alive=keep_alive, http10=head.http10)
            if region is not None:
                await self._send_region(region, answer)
                return
            if transport.is_closing():
                return
            self._write((answer, response.body))
            if self._writing_paused:
                await self._writable_again()
            return
        # An error's answer (``through_gate``): aiohttp's ``Response``.
        payload = response.body if isinstance(response, web.Response) else None
        if not isinstance(payload, bytes):
            raise TypeError(f"a data route answered with {type(response).__name__} whose body is "
                            f"{type(payload).__name__}, not bytes")
        if transport.is_closing():
            return
        answer = answer_head(response.status, response.reason, response.headers.items(), len(payload), date,
                             keep_alive=keep_alive, http10=head.http10)
        self._write((answer, payload))
        if self._writing_paused:
            await self._writable_again()

    async def _send_region(self, region: FileRegion, head: bytes) -> None:
        """The fields, then the region from its file, in one segment where the kernel can (TCP_CORK)."""
        transport = self._transport
        assert transport is not None
        outlet = self._outlet
        if outlet is not None:   # its writer sends the head with MSG_MORE, then the region: one segment
            if transport.is_closing():
                region.close()
                return
            outlet.send_region((head,), region)
            if self._writing_paused:
                await self._writable_again()
            return
        try:
            if transport.is_closing():
                return
            await self._writable_again()
            with corked(transport):
                transport.write(head)
                await send_region(transport, region, self._writable_again)
        except ConnectionError:
            # The client went, or send_region closed the connection: the file had lost bytes its fields promised.
            self._lost = True
        except RuntimeError:
            if not transport.is_closing():
                raise   # a fault of ours: ``_serve`` logs it and cuts the connection
            self._lost = True   # asyncio's sendfile says that the client went with a RuntimeError
        finally:
            region.close()

    # -- handing over and closing -----------------------------------------------------------------
    def _hand_off(self) -> bool | None:
        """Give the connection, and every byte from the request that is aiohttp's, to aiohttp's protocol:
        once the outlet's answers are written (aiohttp's must come after them), and its writes are done."""
        outlet = self._outlet
        if self._handoff is not None:
            return True   # waiting for the outlet already
        if outlet is not None and not outlet.idle:
            self._handoff = self._loop.create_task(self._hand_off_when_written(outlet))
            if self._transport is not None and not self._reading_paused:   # nothing piles up meanwhile
                self._transport.pause_reading()
                self._reading_paused = True
            return True   # the connection stays open meanwhile, its end of input included
        return self._hand_over()

    async def _hand_off_when_written(self, outlet: Outlet) -> None:
        if not await outlet.written():
            self.writes_failed()   # the client went: nothing to hand over
            return
        if self._lost:
            return
        if not self._hand_over() and self._eof and self._transport is not None:
            self._transport.close()   # what the transport does when eof_received says so

    def _hand_over(self) -> bool | None:
        if self._outlet is not None:
            self._outlet.release()
            self._outlet = None
        self._routes.connections.discard(self)
        transport = self._transport
        if transport is None or transport.is_closing():
            return None
        protocol = self._routes.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._writing_paused:   # the transport will tell the new protocol, not this one, when it drained
            protocol.pause_writing()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        data = bytes(self._pending)
        self._pending.clear()
        if data:
            protocol.data_received(data)
        return protocol.eof_received() if self._eof else None

    def _peer(self) -> object:
        return self._transport.get_extra_info("peername") if self._transport is not None else None

    @property
    def idle(self) -> bool:
        """Nothing being answered or waiting to be (a head or body may be half-way: a client that stops
        sending one is idle as well)."""
        return not self._answering and not self._queue

    def close(self, *, now: bool = False) -> None:
        self._wake_worker()
        if self._transport is None:
            return
        if now:
            self._cut_off()
        else:
            self._transport.close()
