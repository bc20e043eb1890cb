"""The one middleware every HTTP request passes through, doing in order, outermost first:

1. request metrics (method, route, final status);
2. errors: every engine error or malformed request becomes the JSON error body (``server/errors.py``);
3. access: with access control on, a bearer token and the route's verb (``server/access``);
4. readiness: ``/v1`` operations answer 503 until the engine has opened its directories and after
   SIGTERM. Status, OpenAPI, health and metrics always answer, so an operator can watch a long
   recovery.

The four are one coroutine, ``through_gate``, which the data route's direct path
(``server/direct``) runs too. They are one middleware, not four, because each aiohttp middleware costs every request a coroutine,
a wrapper and a frame. With the Prometheus children cached, the merge cut the server's CPU
per produce and per 16 KiB fetch by about a tenth (bench/README.md, "Service path").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from aiohttp import web
from aiohttp.typedefs import Middleware

from stratalog.server.access.http import admit
from stratalog.server.access.permissions import Need
from stratalog.server.api_request import ApiRequest
from stratalog.server.errors import error_answer
from stratalog.server.state import ServerState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Answer(Protocol):
    @property
    def status(self) -> int: ...


R = TypeVar("R", bound=ApiRequest)
A = TypeVar("A", bound=Answer)


async def through_gate(state: ServerState, request: R, handler: Callable[[R], Awaitable[A]],
                       route: str, admission: Callable[[], Awaitable[object]] | None, needs_ready: bool
                       ) -> A | web.Response:
    """``handler``'s answer to ``request`` with the gate's four jobs around it, in their order: for the
    middleware below and for the data route's direct path (``server/direct/connection.py``) alike.
    ``admission``: the access check, None with access control off; ``needs_ready``: 503 until ready.
    An error's answer is aiohttp's ``Response`` whatever ``handler`` answers with (``server/data_answer.py``)."""
    try:
        if admission is not None:
            await admission()
        if needs_ready:
            state.check_ready()
        response = await handler(request)
    except Exception as error:  # noqa: BLE001 - not cancellation: CancelledError is a BaseException
        failed = error_answer(request, error, state.metrics.error)
        state.metrics.count_request(request.method, route, failed.status)
        return failed
    state.metrics.count_request(request.method, route, response.status)
    return response


def request_gate(state: ServerState, needs: Mapping[tuple[str, str], Need], always_available: frozenset[str]
                 ) -> Middleware:
    access = state.access

    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        return await through_gate(state, request, handler, resource.canonical if resource is not None else "unmatched",
                                  (lambda: admit(access, needs, request)) if access.enabled else None,
                                  resource is not None and request.path not in always_available)

    return gate
