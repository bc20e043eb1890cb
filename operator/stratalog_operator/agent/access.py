"""Kubernetes identities and RBAC as an agent's access control (TokenReview, SubjectAccessReview).

Why here and not in the engine: the engine knows no Kubernetes. It defines an authenticator
and an authorizer (``stratalog.server.access.model``); the agent implements both with the API
server it already talks to, so a client's identity is its ServiceAccount and what it may do is
what its RoleBindings grant -- no users or ACLs of our own.

* ``TokenReviewer``: a bearer token is sent to TokenReview with the audience the agents accept
  (``stratalog`` by default: a token minted for the API server or for another service is
  refused). An accepted token is cached until its own expiry (the ``exp`` claim of a
  ServiceAccount token, read only after the API server vouched for it), at most
  ``max_cache_s``; a refused one for ``refused_cache_s``, so a client retrying a bad token
  does not become a TokenReview per request.
* ``AccessReviewer``: SubjectAccessReview of the principal for a verb on the Topic resource
  (``topics.stratalog.io`` in the agent's namespace, named as the Topic whose data it is), or
  on every Topic when the request concerns them all. Decisions are cached for ``cache_s``, so a
  revoked RoleBinding takes effect within that time.

The verbs are the engine's four: consume, produce, administer, replicate (docs/access.md).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from stratalog.common.errors import AuthenticationFailedError
from stratalog.server.access.model import Principal, Verb

from ..kube import ApiError, Kube
from ..names import GROUP, TOPICS

logger = logging.getLogger(__name__)

DEFAULT_AUDIENCE = "stratalog"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
Clock = Callable[[], float]
MAX_CACHE_ENTRIES = 10_000
K = TypeVar("K")
V = TypeVar("V")


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim (seconds since the epoch) of a JWT, unverified; None if it has none."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


def cache_until(now_wall: float, now: float, expiry: float | None, max_cache_s: float) -> float:
    """Until when (on the monotonic clock ``now``) an accepted token's principal may be reused."""
    lifetime = max_cache_s if expiry is None else min(max_cache_s, expiry - now_wall)
    return now + max(0.0, lifetime)


class TokenReviewer:
    def __init__(self, kube: Kube, audiences: tuple[str, ...] = (DEFAULT_AUDIENCE,), *, max_cache_s: float = 600.0,
                 refused_cache_s: float = 5.0, clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        self.kube = kube
        self.audiences = audiences
        self.max_cache_s = max_cache_s
        self.refused_cache_s = refused_cache_s
        self.clock, self.wall = clock, wall
        self._cache: dict[bytes, tuple[float, Principal | str]] = {}   # digest -> (until, principal or reason)
        self.reviews = 0

    async def authenticate(self, token: str) -> Principal:
        key = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return _principal_or_refuse(cached[1])
        outcome = await asyncio.to_thread(self._review, token)
        now = self.clock()
        until = cache_until(self.wall(), now, token_expiry(token), self.max_cache_s) \
            if isinstance(outcome, Principal) else now + self.refused_cache_s
        self._cache = _pruned(self._cache, now)
        self._cache[key] = (until, outcome)
        return _principal_or_refuse(outcome)

    def _review(self, token: str) -> Principal | str:
        self.reviews += 1
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token, "audiences": list(self.audiences)}}
        try:
            status: dict[str, Any] = self.kube.request("POST", TOKEN_REVIEWS, body).get("status") or {}
        except Exception as error:   # noqa: BLE001 - ApiError, or the transport's own (urllib3) errors
            logger.warning("TokenReview failed (%s)", _reason(error))
            raise AuthenticationFailedError("the token could not be reviewed now (the API server did not "
                                            "answer); try again") from None
        if not status.get("authenticated"):
            return str(status.get("error") or "the API server did not authenticate the token")
        if not set(status.get("audiences") or ()) & set(self.audiences):
            return f"the token is not for audience {', '.join(self.audiences)}"
        user = status.get("user") or {}
        return Principal(str(user.get("username", "")), tuple(user.get("groups") or ()), str(user.get("uid", "")))


def _pruned(cache: dict[K, tuple[float, V]], now: float) -> dict[K, tuple[float, V]]:
    """The cache without its expired entries, once it is large (each entry cost an API call)."""
    return {k: v for k, v in cache.items() if v[0] > now} if len(cache) > MAX_CACHE_ENTRIES else cache


def _reason(error: Exception) -> str:
    return f"{error.status} {error.message}" if isinstance(error, ApiError) else type(error).__name__


def _principal_or_refuse(outcome: Principal | str) -> Principal:
    if isinstance(outcome, Principal):
        return outcome
    raise AuthenticationFailedError(outcome)


class AccessReviewer:
    def __init__(self, kube: Kube, namespace: str, resource_name: Callable[[str], str | None], *,
                 cache_s: float = 10.0, clock: Clock = time.monotonic) -> None:
        self.kube = kube
        self.namespace = namespace
        # A Kafka topic's Topic resource (a Topic may name another Kafka topic: spec.topicName);
        # None when unknown, and then the review is for every Topic, so a grant on one named
        # Topic never lets one into data of another.
        self.resource_name = resource_name
        self.cache_s = cache_s
        self.clock = clock
        self._cache: dict[tuple[Principal, Verb, str | None], tuple[float, bool]] = {}
        self.reviews = 0

    async def allowed(self, principal: Principal, verb: Verb, topic: str | None) -> bool:
        key = (principal, verb, topic)
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        resource = None if topic is None else self.resource_name(topic)
        decision = await asyncio.to_thread(self._review, principal, verb, resource)
        if decision is None:
            return False   # the API server did not answer: denied now, asked again next time
        now = self.clock()
        self._cache = _pruned(self._cache, now)
        if resource is not None or topic is None:   # an unknown topic's answer may change once known
            self._cache[key] = (now + self.cache_s, decision)
        return decision

    def _review(self, principal: Principal, verb: Verb, resource: str | None) -> bool | None:
        self.reviews += 1
        attributes: dict[str, Any] = {"namespace": self.namespace, "group": GROUP, "resource": TOPICS,
                                      "verb": verb.value}
        if resource is not None:
            attributes["name"] = resource
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": principal.name, "groups": list(principal.groups), "uid": principal.uid,
                         "resourceAttributes": attributes}}
        try:
            status = self.kube.request("POST", ACCESS_REVIEWS, body).get("status") or {}
        except Exception as error:   # noqa: BLE001 - ApiError, or the transport's own (urllib3) errors
            logger.warning("SubjectAccessReview failed (%s); denying this request", _reason(error))
            return None
        return bool(status.get("allowed")) and not status.get("denied")
