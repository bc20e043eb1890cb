"""The HTTP listener's access check: a bearer token, then the route's verb on its ``{topic}``.

Runs inside the error handling of ``server/gate.py``, so a refusal is the usual JSON error: 401 with
``SASL_AUTHENTICATION_FAILED`` (and ``WWW-Authenticate: Bearer``), or 403 with
``TOPIC_AUTHORIZATION_FAILED`` / ``CLUSTER_AUTHORIZATION_FAILED`` naming the verb and resource.
Unknown paths fall through to aiohttp's 404/405 without asking for a credential.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from stratalog.common.bearer import is_token
from stratalog.common.errors import AuthenticationFailedError
from stratalog.common.names import validate_topic_name
from stratalog.server.access.model import AccessControl, Principal
from stratalog.server.access.permissions import Need

PRINCIPAL = web.RequestKey("stratalog_principal", Principal)


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header; None without one; a malformed one is refused."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer":
        raise AuthenticationFailedError(f"Authorization header: scheme {scheme[:20]!r} is not Bearer")
    if not is_token(token):
        raise AuthenticationFailedError("Authorization header: the bearer token is empty, too long or not a token")
    return token


async def admit_to(access: AccessControl, need: Need, where: str, authorization: str | None,
                   topic: str | None) -> Principal | None:
    """The caller of one route (``where``), from its ``Authorization`` header and the route's
    ``{topic}``: the principal, None for a public route, or the refusal raised."""
    if need.public:
        return None
    principal = await access.authenticate(bearer_token(authorization), where)
    if need.verb is not None:
        # A name the handler would refuse is refused before it reaches the authorizer (or a log).
        checked = validate_topic_name(topic or "") if need.per_topic else None
        await access.authorize(principal, need.verb, checked, where)
    return principal


async def admit(access: AccessControl, needs: Mapping[tuple[str, str], Need], request: web.Request) -> None:
    """With access control on (the gate asks only then): let the request through, or raise the
    refusal; an admitted caller is ``request[PRINCIPAL]``."""
    resource = request.match_info.route.resource
    if resource is None:
        return
    need = needs[(request.method, resource.canonical)]
    principal = await admit_to(access, need, f"{request.method} {resource.canonical}",
                               request.headers.get("Authorization"), request.match_info.get("topic"))
    if principal is not None:
        request[PRINCIPAL] = principal
