"""One Kafka client connection: size-prefixed frames cut from the bytes as they come, answered one
at a time in the order they came.

A client may send several requests before reading (librdkafka keeps up to five in flight); a
long-polling fetch holds only its own connection. The connection is an asyncio ``Protocol``
rather than a pair of streams, as the HTTP API's data route is (``server/direct``), and one task
per connection answers its requests, waiting for the next rather than ending with each: a stream
reader copies each frame twice and wakes a future for each of its two reads, and a task per
request costs about as much again (bench/README.md, "Service path", stop 47).

A frame's size is checked as it is cut: more than ``socket.request.max.bytes`` (or, before SASL
authentication, than ``sasl.server.max.receive.size``), or less than a request header, closes the
connection once the requests before it are answered, as Kafka does; nothing of it is read on.
Before authentication, frames are cut one at a time, each once the one before is answered, so
that the limit a frame meets is the one its connection's state gives it then.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from stratalog.broker.fetch import FileRegion
from stratalog.server.kafka.codec import Piece
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.dispatch import Peer, answer_frame
from stratalog.server.kafka.sasl import SaslSession
from stratalog.server.sendfile import send_region
from stratalog.server.served_connection import ServedConnection, write_buffers
from stratalog.server.socket_writes import SocketWrites

logger = logging.getLogger(__name__)

SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes
SASL_SERVER_MAX_RECEIVE_SIZE = 512 * 1024      # Kafka's bound on a frame before authentication
# Requests cut and waiting past this many, or bytes past this many besides a frame still coming
# (a client sending without reading the answers), stop the reading until the answers are out.
MAX_QUEUED = 16
MAX_BUFFERED = 1024 * 1024


@dataclass
class ListenerScope:
    """What every connection of a listener shares."""

    ctx: KafkaContext
    max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES
    replication_only: bool = False
    closing: bool = False
    closed_for_bad_frames: int = 0
    connections: set[KafkaConnection] = field(default_factory=set)
    writes: SocketWrites | None = None   # answers written off the loop (socket_writes), where it can


class KafkaConnection(ServedConnection):
    def __init__(self, scope: ListenerScope) -> None:
        super().__init__(scope.connections)
        self._scope = scope
        self._peer = Peer(None, "", False, SaslSession())
        self._pending = bytearray()     # received, not yet cut into frames
        self._queue: deque[bytes | str] = deque()   # frames; a str: why the connection closes there
        self._queued_bytes = 0
        self._answering = False         # a request is being answered (its answer not yet written)
        self._stopped = False           # nothing more is cut: a refused frame, or closing
        self._eof = False
        self._reading_paused = False

    # -- asyncio's protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)   # uvloop's transports are not asyncio.Transport subclasses
        self._transport = transport
        address = transport.get_extra_info("peername")
        # sendfile needs the bytes to go to the socket as they are in the file: not through TLS
        self._peer = Peer(address, _host_of(address), transport.get_extra_info("sslcontext") is None,
                          SaslSession())
        self._scope.connections.add(self)
        if self._scope.closing:
            transport.close()
        elif self._scope.writes is not None:
            self._outlet = self._scope.writes.outlet(transport, self)

    def data_received(self, data: bytes) -> None:
        if self._stopped or self._lost:
            return
        pending = self._pending
        if pending:
            pending += data
            del pending[:self._cut(pending)]
        else:   # most reads hold whole frames: cut from them, without a copy first
            taken = self._cut(data)
            if taken < len(data):
                pending += memoryview(data)[taken:]
        self._start_worker()
        self._throttle()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake_worker()
        # Keep the sending half open for the answers still owed (TLS cannot: it closes either way).
        return True if self._worker is not None and self._transport is not None and \
            self._transport.get_extra_info("sslcontext") is None else None

    # -- cutting frames ----------------------------------------------------------------------------
    def _cut(self, buf: bytes | bytearray) -> int:
        """Queue each whole frame at the start of ``buf`` (without its size); how many bytes they took."""
        pos, size = 0, len(buf)
        scope = self._scope
        while size - pos >= 4 and not self._stopped:
            unauthenticated = scope.ctx.access.enabled and self._peer.session.principal is None
            if unauthenticated and (self._queue or self._answering):
                break   # cut once the requests before it are answered (SASL may have authenticated it)
            length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            refusal = None
            if not 8 <= length <= scope.max_request_bytes:
                refusal = (f"a request of {length} bytes (the limit is socket.request.max.bytes="
                           f"{scope.max_request_bytes}, a request header needs 8)")
            elif unauthenticated and length > SASL_SERVER_MAX_RECEIVE_SIZE:
                refusal = (f"a request of {length} bytes before authentication (the limit is "
                           f"sasl.server.max.receive.size={SASL_SERVER_MAX_RECEIVE_SIZE})")
            if refusal is not None:
                self._queue.append(refusal)
                self._stopped = True
                return size
            stop = pos + 4 + length
            if stop > size:
                break
            frame = bytes(buf[pos + 4:stop])
            self._queue.append(frame)
            self._queued_bytes += length
            pos = stop
        return pos

    def _start_worker(self) -> None:
        if not self._queue or self._transport is None:
            return
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._serve())
        else:
            self._wake_worker()

    def _throttle(self) -> None:
        """Stop reading while answers are owed and a client keeps sending: at most ``MAX_QUEUED``
        requests and ``MAX_BUFFERED`` bytes wait besides a frame still coming. ``_serve`` reads
        again once they are answered."""
        if self._reading_paused or self._transport is None or not (self._answering or self._queue):
            return
        if len(self._queue) > MAX_QUEUED or self._queued_bytes + len(self._pending) > MAX_BUFFERED:
            self._transport.pause_reading()
            self._reading_paused = True

    # -- answering ---------------------------------------------------------------------------------
    async def _serve(self) -> None:
        """Answer the queue as it fills, until the connection ends (waiting, not ending, when it is empty:
        a task per request would cost more than the wake-up)."""
        transport = self._transport
        assert transport is not None
        scope = self._scope
        try:
            while not self._lost and not scope.closing:
                if not self._queue:
                    if self._eof or self._stopped:
                        break
                    if self._reading_paused:
                        self._reading_paused = False
                        transport.resume_reading()
                    await self._until_woken()
                    continue
                frame = self._queue.popleft()
                if isinstance(frame, str):
                    self._refuse(frame)
                    break
                self._queued_bytes -= len(frame)
                self._answering = True
                try:
                    pieces = await answer_frame(scope.ctx, frame, self._peer, scope.replication_only, self._refuse)
                    if pieces is None:
                        break
                    if self._lost:   # the client went while it was answered: an accepted produce still completed
                        _release(pieces)
                        break
                    if pieces and self._outlet is not None:
                        self._outlet.write_pieces(pieces)
                        await self._writable_again()
                    elif pieces:
                        await send_pieces(transport, pieces, self._writable_again)
                        await self._writable_again()
                finally:
                    self._answering = False
                if self._peer.session.close_after_answer:
                    break
                if not self._queue and self._pending and not self._stopped:
                    del self._pending[:self._cut(self._pending)]   # frames left uncut until this answer
        except ConnectionError:
            self._lost = True   # the client went amid an answer, or a short region closed the connection
        except Exception:   # noqa: BLE001 - asyncio's sendfile says that the client went with a RuntimeError
            if not transport.is_closing():   # else a fault of ours: no answer can follow
                logger.exception("Kafka listener: closing the connection from %s: sending an answer failed",
                                 self._peer.address)
            self._lost = True
        finally:
            self._worker_ended()
        if self._lost:
            self._cut_off()
        else:   # a refusal, the end of the input, the listener closing: what was written goes first
            self._stopped = True
            transport.close()

    def _refuse(self, why: str) -> None:
        self._scope.closed_for_bad_frames += 1
        logger.warning("Kafka listener: closing the connection from %s: %s", self._peer.address, why)

    # -- closing -----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A request is being answered, or waits to be."""
        return self._answering or bool(self._queue)

    def close(self) -> None:
        """Stop reading, and close once what was written has gone."""
        self._stopped = True
        self._wake_worker()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._cut_off()


def _release(pieces: Sequence[Piece]) -> None:
    for piece in pieces:
        if isinstance(piece, FileRegion):
            piece.close()


async def send_pieces(transport: asyncio.WriteTransport, pieces: Sequence[Piece],
                      drain: Callable[[], Awaitable[None]]) -> None:
    """A response frame's pieces in order, each as it is: the buffers between regions written at
    once, file regions sent from their files (``send_region``). The regions are closed here, sent or
    not; raises ``ConnectionError`` when the connection is gone (or was closed for a short region)."""
    try:
        buffers: list[bytes | bytearray | memoryview] = []
        for piece in pieces:
            if isinstance(piece, FileRegion):
                if buffers:
                    write_buffers(transport, buffers)
                    buffers = []
                await send_region(transport, piece, drain)
            else:
                buffers.append(piece)
        if buffers:
            # One write for the buffers in a row: each write is a send(2) when the transport is idle,
            # and on loopback the sender's CPU pays for the receiver's TCP processing of every segment.
            write_buffers(transport, buffers)
    finally:
        _release(pieces)


def _host_of(peer: object) -> str:
    """Kafka's form of a client's address in DescribeGroups: ``/127.0.0.1``."""
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""
