"""The application factory: routes, middlewares and the shared state.

``create_app(state)`` is all a caller needs (``run`` serves it; tests could
drive it in-process). The route table below is the single list of operations;
``openapi.build_document`` describes the same list, and a test checks the two
agree, so the served document cannot drift from what the server does.

Every request passes one middleware, ``server/gate.py``: metrics, errors, access, readiness.
"""

from __future__ import annotations

import json

from aiohttp import web

from stratalog.server import maintenance, records, replication, topics
from stratalog.server.access.permissions import (
    ADMINISTER,
    ADMINISTER_ALL,
    AUTHENTICATED,
    CONSUME,
    PRODUCE,
    PUBLIC,
    REPLICATE,
    REPLICATE_ALL,
    Need,
)
from stratalog.server.api_request import ApiRequest
from stratalog.server.data_answer import DataHandler
from stratalog.server.direct.framing import DATA_ROUTE
from stratalog.server.gate import Handler, request_gate
from stratalog.server.openapi import build_document
from stratalog.server.state import STATE, ServerState

OPENAPI = web.AppKey("stratalog_openapi", bytes)



async def openapi(request: web.Request) -> web.Response:
    """The OpenAPI document, built once per app from the server's limits."""
    return web.Response(body=request.app[OPENAPI], content_type="application/json")


def served_by_aiohttp(handler: DataHandler) -> Handler:
    """A data-route handler as an aiohttp handler: its ``DataAnswer`` as aiohttp's ``Response``."""
    async def serve(request: ApiRequest) -> web.StreamResponse:
        return (await handler(request)).as_response()

    return serve


# (method, path, handler, what it needs when access control is on): the whole API.
# See server/access/model.py for the verbs; docs/access.md for the Roles that grant them.
# The data route: served by server/direct on connections that start with it, and by aiohttp on the others.
DATA_HANDLERS: dict[str, tuple[DataHandler, Need]] = {
    "POST": (records.produce_partition, PRODUCE),
    "GET": (records.fetch, CONSUME),
}

ROUTES: tuple[tuple[str, str, Handler, Need], ...] = (
    # The data path first: aiohttp tries the routes under one prefix (/v1/topics) in this order.
    *((method, DATA_ROUTE, served_by_aiohttp(handler), need) for method, (handler, need) in DATA_HANDLERS.items()),
    ("GET", "/v1/topics", topics.list_topics, AUTHENTICATED),
    ("POST", "/v1/topics", topics.create_topic, ADMINISTER_ALL),
    ("GET", "/v1/topics/{topic}", topics.get_topic, AUTHENTICATED),
    ("DELETE", "/v1/topics/{topic}", topics.delete_topic, ADMINISTER),
    ("PATCH", "/v1/topics/{topic}/configs", topics.alter_configs, ADMINISTER),
    ("POST", "/v1/topics/{topic}/partitions", topics.add_partitions, ADMINISTER),
    ("POST", "/v1/topics/{topic}/records", records.produce_topic, PRODUCE),
    ("GET", "/v1/topics/{topic}/partitions/{partition}", topics.get_partition, AUTHENTICATED),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets", records.list_offsets, CONSUME),
    ("POST", "/v1/topics/{topic}/partitions/{partition}/delete-records", records.delete_records_handler, ADMINISTER),
    ("PUT", "/v1/replication/partitions/{topic}/{partition}", replication.put_partition_state, REPLICATE),
    ("GET", "/v1/replication/partitions/{topic}/{partition}/fetch", replication.replica_fetch, REPLICATE),
    ("POST", "/v1/replication/fetch", replication.replica_fetch_many, REPLICATE_ALL),
    ("POST", "/v1/maintenance/retention", maintenance.retention, ADMINISTER_ALL),
    ("POST", "/v1/maintenance/clean", maintenance.clean, ADMINISTER_ALL),
    ("POST", "/v1/maintenance/checkpoints", maintenance.checkpoints, ADMINISTER_ALL),
    ("POST", "/v1/maintenance/flush", maintenance.flush, ADMINISTER_ALL),
    ("POST", "/v1/maintenance/deletions", maintenance.deletions, ADMINISTER_ALL),
    ("GET", "/v1/status", maintenance.status, AUTHENTICATED),
    ("GET", "/v1/openapi.json", openapi, PUBLIC),
    ("GET", "/healthz", maintenance.healthz, PUBLIC),
    ("GET", "/readyz", maintenance.readyz, PUBLIC),
    ("GET", "/metrics", maintenance.metrics, PUBLIC),
)

# Served whatever the engine's state: health, readiness, metrics, the document, status.
_ALWAYS_AVAILABLE = frozenset({"/v1/openapi.json", "/v1/status", "/healthz", "/readyz", "/metrics"})


def create_app(state: ServerState) -> web.Application:
    # Bodies are read by params.read_body with limits of their own; aiohttp's cap stays as a backstop.
    needs = {(method, path): need for method, path, _, need in ROUTES}
    app = web.Application(middlewares=[request_gate(state, needs, _ALWAYS_AVAILABLE)], client_max_size=1 << 30)
    app[STATE] = state
    secured = {key: not need.public for key, need in needs.items()} if state.access.enabled else None
    app[OPENAPI] = json.dumps(build_document(state.settings, secured)).encode()
    for method, path, handler, _ in ROUTES:
        app.router.add_route(method, path, handler)

    async def wake_long_polls(app: web.Application) -> None:
        # Runs when shutdown begins: waiting fetches answer at once instead of holding the drain.
        state.begin_draining()

    app.on_shutdown.append(wake_long_polls)
    return app
