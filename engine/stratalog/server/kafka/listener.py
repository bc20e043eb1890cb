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
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from ssl import SSLContext
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from stratalog.server.access.model import ANONYMOUS
from stratalog.server.kafka import (
    admin,
    api_versions,
    fetch,
    group_offsets,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offsets_for_leader_epoch,
    produce,
)
from stratalog.broker.fetch import FileRegion
from stratalog.server.kafka.codec import CloseConnection, MalformedFrame, Piece, Request, read_request, write_response
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.sasl import SaslSession
from stratalog.server.kafka.sasl import authenticate as sasl_authenticate
from stratalog.server.sendfile import send_region
from stratalog.server.kafka.sasl import handshake as sasl_handshake

logger = logging.getLogger(__name__)

SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024   # Kafka's socket.request.max.bytes
SASL_SERVER_MAX_RECEIVE_SIZE = 512 * 1024      # Kafka's bound on a frame before authentication

Handler = Callable[[KafkaContext, Request], Awaitable["dict[str, Any] | None"]]


async def _api_versions(ctx: KafkaContext, request: Request) -> dict[str, Any]:
    return api_versions.api_versions_response(sasl=ctx.access.enabled)


HANDLERS: dict[int, Handler] = {
    api_versions.API_VERSIONS: _api_versions,
    api_versions.METADATA: metadata.handle,
    api_versions.PRODUCE: produce.handle,
    api_versions.FETCH: fetch.handle,
    api_versions.LIST_OFFSETS: list_offsets.handle,
    api_versions.OFFSET_FOR_LEADER_EPOCH: offsets_for_leader_epoch.handle,
    api_versions.INIT_PRODUCER_ID: init_producer_id.handle,
    api_versions.FIND_COORDINATOR: groups.find_coordinator,
    api_versions.JOIN_GROUP: groups.join_group,
    api_versions.SYNC_GROUP: groups.sync_group,
    api_versions.HEARTBEAT: groups.heartbeat,
    api_versions.LEAVE_GROUP: groups.leave_group,
    api_versions.LIST_GROUPS: groups.list_groups,
    api_versions.DESCRIBE_GROUPS: groups.describe_groups,
    api_versions.OFFSET_COMMIT: group_offsets.offset_commit,
    api_versions.OFFSET_FETCH: group_offsets.offset_fetch,
    api_versions.CREATE_TOPICS: admin.create_topics,
    api_versions.DELETE_TOPICS: admin.delete_topics,
    api_versions.CREATE_PARTITIONS: admin.create_partitions,
    api_versions.DESCRIBE_CONFIGS: admin.describe_configs,
    api_versions.INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
    api_versions.DESCRIBE_CLUSTER: admin.describe_cluster,
}


class KafkaListener:
    def __init__(self, ctx: KafkaContext, *, max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
                 replication_only: bool = False) -> None:
        self.ctx = ctx
        self.replication_only = replication_only
        self.max_request_bytes = max_request_bytes
        self.server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._busy: set[asyncio.Task[None]] = set()   # handling a request: let it answer before closing
        self._closing = False
        self.closed_for_bad_frames = 0

    async def start(self, host: str, port: int, ssl: SSLContext | None = None) -> list[tuple[str, int]]:
        self.server = await asyncio.start_server(self._serve, host, port, ssl=ssl)
        return [sock.getsockname()[:2] for sock in self.server.sockets]

    async def close(self, grace_s: float = 10.0) -> None:
        """Stop accepting; idle connections close now, busy ones after answering (at most ``grace_s``)."""
        self._closing = True
        if self.server is not None:
            self.server.close()
        await self.ctx.groups.close()   # waiting joins and syncs answer now, so their connections can close
        for task, writer in list(self._connections.items()):
            if task not in self._busy:
                writer.close()
        tasks = list(self._connections)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        peer = writer.get_extra_info("peername")
        client_host = _host_of(peer)
        session = SaslSession()
        # sendfile needs the bytes to go to the socket as they are in the file: not through TLS
        zero_copy = writer.get_extra_info("sslcontext") is None
        try:
            while not self._closing:
                try:
                    size_bytes = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return   # the client closed, or we are closing
                (size,) = struct.unpack(">i", size_bytes)
                if not 8 <= size <= self.max_request_bytes:
                    self._refuse(peer, f"a request of {size} bytes (the limit is socket.request.max.bytes="
                                       f"{self.max_request_bytes}, a request header needs 8)")
                    return
                if self._unauthenticated(session) and size > SASL_SERVER_MAX_RECEIVE_SIZE:
                    self._refuse(peer, f"a request of {size} bytes before authentication (the limit is "
                                       f"sasl.server.max.receive.size={SASL_SERVER_MAX_RECEIVE_SIZE})")
                    return
                frame = await reader.readexactly(size)
                self._busy.add(task)
                try:
                    answer = await self._answer(frame, peer, client_host, session, zero_copy)
                    if answer is None:
                        return
                    if answer:
                        await _send(writer, answer)
                    if session.close_after_answer:
                        return
                finally:
                    self._busy.discard(task)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        except asyncio.CancelledError:
            # Only ``close`` cancels, after its grace: end quietly (asyncio would log a cancelled
            # connection task as an error).
            return
        finally:
            self._connections.pop(task, None)
            writer.close()

    def _unauthenticated(self, session: SaslSession) -> bool:
        return self.ctx.access.enabled and session.principal is None

    async def _answer(self, frame: bytes, peer: object, client_host: str, session: SaslSession, zero_copy: bool
                      ) -> list[Piece] | None:
        """The response frame's pieces; empty when none is due (acks=0); None to close the connection."""
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        sasl = self.ctx.access.enabled
        if not api_versions.supported(api_key, version, sasl=sasl):
            if api_key == api_versions.API_VERSIONS:
                return _unsupported_api_versions(correlation_id, sasl)
            self._refuse(peer, f"API key {api_key} version {version} is not offered in ApiVersions")
            return None
        if self._unauthenticated(session) and api_key not in api_versions.BEFORE_AUTHENTICATION:
            self._refuse(peer, f"API key {api_key} before SASL authentication")
            return None
        try:
            request = read_request(frame, client_host=client_host, principal=session.principal or ANONYMOUS,
                                   zero_copy=zero_copy)
        except MalformedFrame as error:
            self._refuse(peer, str(error))
            return None
        if self.replication_only and not _is_replication(request):
            self._refuse(peer, f"API key {api_key}: this listener serves followers' replication only "
                               "(Fetch and ListOffsets with a replica id)")
            return None
        try:
            if api_key == api_versions.SASL_HANDSHAKE:
                return write_response(request, sasl_handshake(session, request))
            if api_key == api_versions.SASL_AUTHENTICATE:
                return write_response(request, await sasl_authenticate(self.ctx, session, request))
            values = await HANDLERS[api_key](self.ctx, request)
            if values is None:
                return []
            return write_response(request, values)
        except CloseConnection as reason:
            logger.info("Kafka listener: closing the connection from %s: %s", peer, reason)
            return None
        except Exception as error:   # noqa: BLE001 - a bug of ours: this request fails, the listener goes on
            logger.error("Kafka listener: a request (API key %d version %d from %s) failed unexpectedly: %s: %s; "
                         "the connection is closed", api_key, version, peer, type(error).__name__, error)
            return None

    def _refuse(self, peer: object, why: str) -> None:
        self.closed_for_bad_frames += 1
        logger.warning("Kafka listener: closing the connection from %s: %s", peer, why)


async def _send(writer: asyncio.StreamWriter, pieces: list[Piece]) -> None:
    """A response frame's pieces in order, each as it is: the buffers between regions written at
    once, file regions sent from their files (``send_region``). The regions are closed here, sent or
    not."""
    try:
        buffers: list[bytes | bytearray | memoryview] = []
        for piece in pieces:
            if isinstance(piece, FileRegion):
                if buffers:
                    writer.writelines(buffers)
                    buffers = []
                await send_region(writer.transport, piece)
            else:
                buffers.append(piece)
        if buffers:
            # One write for the buffers in a row: each write is a send(2) when the transport is idle,
            # and on loopback the sender's CPU pays for the receiver's TCP processing of every segment.
            writer.writelines(buffers)
        await writer.drain()
    finally:
        for piece in pieces:
            if isinstance(piece, FileRegion):
                piece.close()


def _is_replication(request: Request) -> bool:
    if request.api_key in api_versions.BEFORE_AUTHENTICATION:
        return True
    return (request.api_key in (api_versions.FETCH, api_versions.LIST_OFFSETS)
            and getattr(request.body, "replica_id", -1) >= 0)


def _host_of(peer: object) -> str:
    """Kafka's form of a client's address in DescribeGroups: ``/127.0.0.1``."""
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""


def _unsupported_api_versions(correlation_id: int, sasl: bool) -> list[Piece]:
    request = Request(api_versions.API_VERSIONS, 0, correlation_id, None, ApiVersionsRequestV0(),
                      ApiVersionsResponseV0, ApiVersionsResponseV0.__header_schema__)
    return write_response(request, api_versions.api_versions_response(api_versions.UNSUPPORTED_VERSION, sasl=sasl))
