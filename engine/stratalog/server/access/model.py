"""Principals, verbs, and the one gate both listeners pass through.

A request presents a bearer token (HTTP ``Authorization: Bearer``, Kafka SASL PLAIN's password
or OAUTHBEARER's token). An ``Authenticator`` turns it into a ``Principal`` or refuses it; an
``Authorizer`` answers whether that principal may use a verb on a topic (or on every topic,
``topic=None``). The verbs are four, named for what they let one do, so that a Kubernetes Role
reads as what it grants:

    consume     read records, offsets and committed group offsets
    produce     append records
    administer  create, delete and reconfigure topics, delete records, trigger maintenance
    replicate   follower fetches and partition state: the engines' own traffic, held by agents

``AccessControl`` combines the two, counts and logs each denial, and is open (no credential
asked, everything allowed) when built without them: ``stratalog serve``'s loopback default.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from stratalog.common.errors import (
    AuthenticationFailedError,
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
)

logger = logging.getLogger(__name__)


class Verb(enum.Enum):
    CONSUME = "consume"
    PRODUCE = "produce"
    ADMINISTER = "administer"
    REPLICATE = "replicate"


@dataclass(frozen=True)
class Principal:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ANONYMOUS = Principal("anonymous")   # who everyone is when access control is off


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> Principal:
        """The token's principal; raises ``AuthenticationFailedError`` saying why not."""


class Authorizer(Protocol):
    async def allowed(self, principal: Principal, verb: Verb, topic: str | None) -> bool:
        """Whether ``principal`` may ``verb`` on ``topic`` (None: on every topic)."""


class AccessControl:
    def __init__(self, authenticator: Authenticator | None = None, authorizer: Authorizer | None = None, *,
                 on_denied: Callable[[str], None] = lambda verb: None) -> None:
        if (authenticator is None) != (authorizer is None):
            raise ValueError("access control needs both an authenticator and an authorizer, or neither")
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.on_denied = on_denied

    @property
    def enabled(self) -> bool:
        return self.authenticator is not None

    async def authenticate(self, token: str | None, where: str) -> Principal:
        if self.authenticator is None:
            return ANONYMOUS
        if not token:
            raise AuthenticationFailedError(f"{where}: no credential: present a bearer token")
        try:
            return await self.authenticator.authenticate(token)
        except AuthenticationFailedError as error:
            logger.info("refused a credential (%s): %s", where, error)
            raise

    async def authorize(self, principal: Principal, verb: Verb, topic: str | None, where: str) -> None:
        """Raise ``TopicAuthorizationFailedError`` (``Cluster…`` for every topic) unless allowed."""
        if self.authorizer is None or await self.authorizer.allowed(principal, verb, topic):
            return
        self.on_denied(verb.value)
        resource = f"topic {topic}" if topic is not None else "every topic"
        logger.warning("denied %s %s to %s (%s)", verb.value, resource, principal.name, where)
        error_type = TopicAuthorizationFailedError if topic is not None else ClusterAuthorizationFailedError
        raise error_type(f"{where}: {principal.name} may not {verb.value} {resource}",
                         verb=verb.value, resource=resource)

    async def denied(self, principal: Principal, verb: Verb, topics: Iterable[str], where: str
                     ) -> dict[str, TopicAuthorizationFailedError]:
        """Each of ``topics`` the principal may not ``verb``, with its error (for per-topic answers)."""
        out: dict[str, TopicAuthorizationFailedError] = {}
        for topic in dict.fromkeys(topics):
            try:
                await self.authorize(principal, verb, topic, where)
            except TopicAuthorizationFailedError as error:
                out[topic] = error
        return out


OPEN = AccessControl()
