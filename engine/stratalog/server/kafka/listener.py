"""The Kafka-protocol listener: size-prefixed frames over TCP, answered in order per connection.

Like Kafka's broker, a connection's requests are handled one at a time and answered in the
order they came (a client may send several before reading); a long-polling fetch therefore
holds only its own connection. A frame larger than ``socket.request.max.bytes``, one that
does not parse, or a request for an API or version not offered in ApiVersions closes the
connection, as Kafka does; nothing of such a request is written. ApiVersions of a version
this listener does not know is answered in version 0 with UNSUPPORTED_VERSION and the
versions it does know, so that the client can retry with one of them (KIP-511).

A listener may serve replication only (``replication_only``, Kafka's inter-broker listener): a
follower's Fetch and ListOffsets (replica id >= 0), ApiVersions and SASL; anything else closes
the connection. ``stratalog serve --broker-id`` runs it so, since a Kafka client there would be
told of this engine alone, not of the cluster.

Each connection cuts and answers its own frames (``connection.py``); a frame becomes its answer
in ``dispatch.py``.
"""

from __future__ import annotations

import asyncio
from ssl import SSLContext

from stratalog.server.kafka.connection import SOCKET_REQUEST_MAX_BYTES, KafkaConnection, ListenerScope
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.socket_writes import SocketWrites, thread_writes_enabled


class KafkaListener:
    def __init__(self, ctx: KafkaContext, *, max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
                 replication_only: bool = False) -> None:
        self.ctx = ctx
        self._scope = ListenerScope(ctx, max_request_bytes, replication_only)
        self.server: asyncio.Server | None = None

    @property
    def replication_only(self) -> bool:
        return self._scope.replication_only

    @property
    def closed_for_bad_frames(self) -> int:
        """Connections closed for a frame that is not a request this listener takes."""
        return self._scope.closed_for_bad_frames

    async def start(self, host: str, port: int, ssl: SSLContext | None = None) -> list[tuple[str, int]]:
        scope = self._scope
        if ssl is None and thread_writes_enabled():
            scope.writes = SocketWrites()
        try:
            self.server = await asyncio.get_running_loop().create_server(
                lambda: KafkaConnection(scope), host, port, ssl=ssl)
        except BaseException:
            if scope.writes is not None:
                scope.writes.close()
            raise
        return [sock.getsockname()[:2] for sock in self.server.sockets]

    async def close(self, grace_s: float = 10.0) -> None:
        """Stop accepting; idle connections close now, busy ones after answering (at most ``grace_s``)."""
        scope = self._scope
        scope.closing = True
        if self.server is not None:
            self.server.close()
        await self.ctx.groups.close()   # waiting joins and syncs answer now, so their connections can close
        busy: dict[asyncio.Task[None], KafkaConnection] = {}
        for connection in list(scope.connections):
            if connection.worker is None or not connection.busy:
                connection.close()
            else:
                busy[connection.worker] = connection
        if busy:
            _, late = await asyncio.wait(busy, timeout=grace_s)
            for task in late:
                busy[task].abort()
            await asyncio.gather(*late, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()
        if scope.writes is not None:
            await scope.writes.close_when_written(grace_s)
