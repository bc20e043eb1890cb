"""SASL on the Kafka listener: SaslHandshake v1 and SaslAuthenticate, PLAIN and OAUTHBEARER.

Both mechanisms carry the same credential, a bearer token (in Kubernetes a ServiceAccount
token): OAUTHBEARER's ``auth=Bearer <token>`` (RFC 7628), or PLAIN's password (RFC 4616; the
user name is not trusted, the token says who the client is). With access control on, a
connection may send only ApiVersions, SaslHandshake and SaslAuthenticate until it has
authenticated; anything else closes it, as Kafka's broker does. A failed authentication is
answered with SASL_AUTHENTICATION_FAILED and the connection is then closed.

Sessions do not expire on the connection (``session_lifetime`` 0, Kafka's default without
``connections.max.reauth.ms``); authorization is asked again per request, so a revoked
RoleBinding takes effect on an open connection within the authorizer's cache lifetime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stratalog.common.bearer import is_token
from stratalog.common.errors import AuthenticationFailedError
from stratalog.server.access.model import Principal
from stratalog.server.kafka.codec import Request, code_named
from stratalog.server.kafka.context import KafkaContext

MECHANISMS = ("OAUTHBEARER", "PLAIN")
MAX_AUTH_BYTES = 16 * 1024


@dataclass
class SaslSession:
    """One connection's progress: the mechanism chosen, then who authenticated."""

    mechanism: str | None = None
    principal: Principal | None = None
    close_after_answer: bool = False


def handshake(session: SaslSession, request: Request) -> dict[str, Any]:
    mechanism = request.body.mechanism
    if session.mechanism is not None or session.principal is not None:
        session.close_after_answer = True
        return {"error_code": code_named("ILLEGAL_SASL_STATE"), "mechanisms": list(MECHANISMS)}
    if mechanism not in MECHANISMS:
        session.close_after_answer = True
        return {"error_code": code_named("UNSUPPORTED_SASL_MECHANISM"), "mechanisms": list(MECHANISMS)}
    session.mechanism = mechanism
    return {"error_code": 0, "mechanisms": list(MECHANISMS)}


async def authenticate(ctx: KafkaContext, session: SaslSession, request: Request) -> dict[str, Any]:
    if session.mechanism is None or session.principal is not None:
        session.close_after_answer = True
        return _failed("ILLEGAL_SASL_STATE", "SaslAuthenticate without a SaslHandshake first, or a second time")
    try:
        token = token_of(session.mechanism, request.body.auth_bytes)
        session.principal = await ctx.access.authenticate(token, f"Kafka SASL {session.mechanism}")
    except AuthenticationFailedError as error:
        session.close_after_answer = True
        return _failed("SASL_AUTHENTICATION_FAILED", f"authentication failed: {error}")
    return {"error_code": 0, "error_message": None, "auth_bytes": b""}


def _failed(name: str, message: str) -> dict[str, Any]:
    return {"error_code": code_named(name), "error_message": message, "auth_bytes": b""}


def token_of(mechanism: str, auth_bytes: bytes) -> str:
    """The bearer token in a client's first SASL message; raises saying what is wrong with it."""
    if len(auth_bytes) > MAX_AUTH_BYTES:
        raise AuthenticationFailedError(f"{mechanism}: {len(auth_bytes)} bytes of credentials (at most "
                                        f"{MAX_AUTH_BYTES})")
    try:
        text = auth_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        raise AuthenticationFailedError(f"{mechanism}: the message is not UTF-8 (byte {error.start})") from None
    token = _plain_password(text) if mechanism == "PLAIN" else _oauthbearer_token(text)
    if not is_token(token):
        raise AuthenticationFailedError(f"{mechanism}: the token is empty or not a token")
    return token


def _plain_password(text: str) -> str:
    parts = text.split("\0")
    if len(parts) != 3:
        raise AuthenticationFailedError(f"PLAIN: expected authzid NUL user NUL password, found {len(parts) - 1} "
                                        "NUL separators")
    return parts[2]


def _oauthbearer_token(text: str) -> str:
    # gs2-header "n,[a=authzid]," then key=value pairs each ended by \x01, then a final \x01.
    header, sep, rest = text.partition("\x01")
    if not sep or not header.startswith("n,") or not header.endswith(",") or header.count(",") != 2:
        raise AuthenticationFailedError("OAUTHBEARER: the message does not start with the GS2 header 'n,,' "
                                        "or 'n,a=<authzid>,'")
    if not rest.endswith("\x01"):
        raise AuthenticationFailedError("OAUTHBEARER: the key-value pairs are not ended by \\x01")
    pairs = {}
    for item in rest[:-1].split("\x01"):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq:
            raise AuthenticationFailedError(f"OAUTHBEARER: {item[:32]!r} is not key=value")
        pairs[key] = value
    scheme, _, token = pairs.get("auth", "").partition(" ")
    if scheme.lower() != "bearer":
        raise AuthenticationFailedError("OAUTHBEARER: no 'auth=Bearer <token>' pair")
    return token.strip()
