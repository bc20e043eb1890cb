"""One request frame to its answer: the API's handler chosen, the connection's SASL state and the
listener's scope enforced, and the response frame written in the request's version.

What is refused here closes the connection, as Kafka's broker does: an API or version not
offered in ApiVersions (but ApiVersions itself, answered in version 0 with UNSUPPORTED_VERSION so
that the client can retry, KIP-511), a frame that does not parse, an API other than SASL's
before authentication, anything but a follower's replication on a replication-only listener.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
from stratalog.server.kafka.codec import CloseConnection, MalformedFrame, Piece, Request, read_request, write_response
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.sasl import SaslSession
from stratalog.server.kafka.sasl import authenticate as sasl_authenticate
from stratalog.server.kafka.sasl import handshake as sasl_handshake

logger = logging.getLogger(__name__)

Handler = Callable[[KafkaContext, Request], Awaitable["dict[str, Any] | None"]]
_HEADER = struct.Struct(">hhi")


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


@dataclass(slots=True)
class Peer:
    """What a connection's requests are answered with besides their frames."""

    address: object          # the peer's address, for the log
    client_host: str         # Kafka's form of it, as DescribeGroups shows it
    zero_copy: bool          # file regions may go from their files (plaintext TCP)
    session: SaslSession     # the connection's SASL progress


async def answer_frame(ctx: KafkaContext, frame: bytes, peer: Peer, replication_only: bool,
                       refuse: Callable[[str], None]) -> list[Piece] | None:
    """The response frame's pieces; empty when none is due (acks=0); None to close the connection
    (``refuse`` told why, where the request was at fault)."""
    api_key, version, correlation_id = _HEADER.unpack_from(frame)
    sasl = ctx.access.enabled
    session = peer.session
    if not api_versions.supported(api_key, version, sasl=sasl):
        if api_key == api_versions.API_VERSIONS:
            return _unsupported_api_versions(correlation_id, sasl)
        refuse(f"API key {api_key} version {version} is not offered in ApiVersions")
        return None
    if sasl and session.principal is None and api_key not in api_versions.BEFORE_AUTHENTICATION:
        refuse(f"API key {api_key} before SASL authentication")
        return None
    try:
        request = read_request(frame, client_host=peer.client_host, principal=session.principal or ANONYMOUS,
                               zero_copy=peer.zero_copy)
    except MalformedFrame as error:
        refuse(str(error))
        return None
    if replication_only and not _is_replication(request):
        refuse(f"API key {api_key}: this listener serves followers' replication only "
               "(Fetch and ListOffsets with a replica id)")
        return None
    try:
        if api_key == api_versions.SASL_HANDSHAKE:
            return write_response(request, sasl_handshake(session, request))
        if api_key == api_versions.SASL_AUTHENTICATE:
            return write_response(request, await sasl_authenticate(ctx, session, request))
        values = await HANDLERS[api_key](ctx, request)
        if values is None:
            return []
        return write_response(request, values)
    except CloseConnection as reason:
        logger.info("Kafka listener: closing the connection from %s: %s", peer.address, reason)
        return None
    except Exception as error:   # noqa: BLE001 - a bug of ours: this request fails, the listener goes on
        logger.error("Kafka listener: a request (API key %d version %d from %s) failed unexpectedly: %s: %s; "
                     "the connection is closed", api_key, version, peer.address, type(error).__name__, error)
        return None


def _is_replication(request: Request) -> bool:
    if request.api_key in api_versions.BEFORE_AUTHENTICATION:
        return True
    return (request.api_key in (api_versions.FETCH, api_versions.LIST_OFFSETS)
            and getattr(request.body, "replica_id", -1) >= 0)


def _unsupported_api_versions(correlation_id: int, sasl: bool) -> list[Piece]:
    request = Request(api_versions.API_VERSIONS, 0, correlation_id, None, ApiVersionsRequestV0(),
                      ApiVersionsResponseV0, ApiVersionsResponseV0.__header_schema__)
    return write_response(request, api_versions.api_versions_response(api_versions.UNSUPPORTED_VERSION, sasl=sasl))
