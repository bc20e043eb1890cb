"""The agent's authenticator and authorizer in-process, against the test bed's real API server:
what they cache and for how long (a fake clock moves time; the API server is real)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path

import pytest

from stratalog.common.errors import AuthenticationFailedError
from stratalog.server.access.model import Principal, Verb
from stratalog_operator.agent.access import AccessReviewer, TokenReviewer, cache_until, token_expiry
from stratalog_operator.kube import Kube

from .conftest import KubeCluster
from .test_leases import load_client_configuration_from

NS = "access-reviews"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def kube(kube_cluster: KubeCluster) -> Kube:
    kube_cluster.kubectl_run("apply", "-f", str(Path(__file__).resolve().parents[2] / "crds"))   # the Role names topics
    kube_cluster.kubectl_run("create", "namespace", NS)
    kube_cluster.kubectl_run("-n", NS, "create", "serviceaccount", "reader")
    kube_cluster.kubectl_run("-n", NS, "create", "role", "reader", "--verb=consume", "--resource=topics.stratalog.io")
    kube_cluster.kubectl_run("-n", NS, "create", "rolebinding", "reader", "--role=reader",
                             f"--serviceaccount={NS}:reader")
    return Kube(load_client_configuration_from(kube_cluster.kubeconfig))


def token(kube_cluster: KubeCluster, seconds: int = 600) -> str:
    return kube_cluster.kubectl_run("-n", NS, "create", "token", "reader", "--audience", "stratalog",
                                    "--duration", f"{seconds}s").stdout.strip()


def test_an_accepted_token_is_reviewed_once_until_its_expiry(kube: Kube, kube_cluster: KubeCluster):
    clock, wall = Clock(), Clock()
    wall.now = time.time()
    reviewer = TokenReviewer(kube, max_cache_s=3600, clock=clock, wall=wall)
    minted = token(kube_cluster, 600)
    principal = asyncio.run(reviewer.authenticate(minted))
    assert principal.name == f"system:serviceaccount:{NS}:reader"
    assert f"system:serviceaccounts:{NS}" in principal.groups
    clock.now += 590
    assert asyncio.run(reviewer.authenticate(minted)) == principal and reviewer.reviews == 1
    clock.now += 20   # past the token's own exp: asked again
    asyncio.run(reviewer.authenticate(minted))
    assert reviewer.reviews == 2


def test_a_refused_token_is_remembered_briefly_and_reviewed_again_after(kube: Kube):
    clock = Clock()
    reviewer = TokenReviewer(kube, refused_cache_s=5, clock=clock)
    for _ in range(3):
        with pytest.raises(AuthenticationFailedError):
            asyncio.run(reviewer.authenticate("not-a-token"))
    assert reviewer.reviews == 1
    clock.now += 6
    with pytest.raises(AuthenticationFailedError):
        asyncio.run(reviewer.authenticate("not-a-token"))
    assert reviewer.reviews == 2


def test_rbac_decisions_are_cached_for_their_lifetime_then_asked_again(kube: Kube, kube_cluster: KubeCluster):
    clock = Clock()
    reviewer = AccessReviewer(kube, NS, lambda topic: topic, cache_s=10, clock=clock)
    reader = Principal(f"system:serviceaccount:{NS}:reader", ("system:serviceaccounts", f"system:serviceaccounts:{NS}",
                                                             "system:authenticated"))
    assert asyncio.run(reviewer.allowed(reader, Verb.CONSUME, "orders")) is True
    assert asyncio.run(reviewer.allowed(reader, Verb.PRODUCE, "orders")) is False
    assert asyncio.run(reviewer.allowed(reader, Verb.CONSUME, None)) is True   # the Role names no resource
    kube_cluster.kubectl_run("-n", NS, "delete", "rolebinding", "reader")
    assert asyncio.run(reviewer.allowed(reader, Verb.CONSUME, "orders")) is True and reviewer.reviews == 3
    clock.now += 11
    assert asyncio.run(reviewer.allowed(reader, Verb.CONSUME, "orders")) is False and reviewer.reviews == 4


def b64url(claims: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()


def test_a_tokens_expiry_is_read_from_its_claims_and_bounds_the_cache():
    assert token_expiry(f"e30.{b64url({'exp': 1700000000})}.sig") == 1700000000
    assert token_expiry("not-a-jwt") is None
    assert token_expiry("a.%%%.c") is None
    assert token_expiry(f"e30.{b64url({'sub': 'x'})}.sig") is None
    assert cache_until(now_wall=100.0, now=5.0, expiry=160.0, max_cache_s=600) == 65.0
    assert cache_until(now_wall=100.0, now=5.0, expiry=None, max_cache_s=600) == 605.0
    assert cache_until(now_wall=100.0, now=5.0, expiry=90.0, max_cache_s=600) == 5.0   # already expired
