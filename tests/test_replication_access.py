"""Replication with access control on: three ``stratalog serve --broker-id`` engines over TLS with a
token file. Followers present a token holding ``replicate`` and trust the leaders' CA; acks=all
then succeeds only because they fetched through the access control. A follower whose token lacks
``replicate`` is refused, and it stays behind. Both transports: the HTTP replication API (bearer
token) and the Kafka listener (SASL OAUTHBEARER over TLS, ``kafka+ssl://``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from certificates import Authority
from replication_cluster import ClusterController, Engines
from server_harness import kafka_batch
from stratalog.common.names import TopicPartition

TP = TopicPartition("t", 0)
TOKENS = {"replicator": secrets.token_urlsafe(24), "producer": secrets.token_urlsafe(24)}
GRANTS = {"replicator": "stratalog:replicate", "producer": "stratalog:produce"}


def cluster(root: Path, follower_token: str, transport: str) -> tuple[ClusterController, Engines]:
    authority = Authority.create(root / "ca")
    cert, key = authority.issue(root / "tls", "engines", serial=1)
    (root / "tokens.csv").write_text("".join(f'{TOKENS[n]},{n},{n},"{GRANTS[n]}"\n' for n in TOKENS))
    (root / "follower-token").write_text(follower_token)
    controller = ClusterController(ca=authority.cert, token=TOKENS["replicator"])
    (root / "engines").mkdir()
    engines = Engines(root / "engines", controller, 3, "min.insync.replicas=2", "replica.lag.time.max.ms=60000",
                      "request.timeout.ms=3000",
                      server_args=["--tls-cert", str(cert), "--tls-key", str(key),
                                   "--token-file", str(root / "tokens.csv"),
                                   "--replication-token-file", str(root / "follower-token"),
                                   "--replication-ca-file", str(authority.cert)],
                      ca=authority.cert, token=TOKENS["producer"], transport=transport)
    controller.controller.create(TP, (0, 1, 2))
    controller.settle()
    return controller, engines


@pytest.fixture(params=["http", "kafka"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engines(tmp_path: Path, request: pytest.FixtureRequest, transport: str) -> Iterator[Engines]:
    controller, running = cluster(tmp_path, TOKENS[request.param], transport)
    try:
        yield running
    finally:
        controller.close()
        running.stop_all()


def produce(engines: Engines, leader: int) -> requests.Response:
    return engines.servers[leader].post("/v1/topics/t/partitions/0/records", data=kafka_batch([(None, b"x")]),
                                        params={"acks": "all"},
                                        headers={"Content-Type": "application/vnd.kafka.record-batch"})


@pytest.mark.parametrize("engines", ["replicator"], indirect=True)
def test_followers_with_the_replicate_verb_fetch_over_tls_and_acks_all_succeeds(engines: Engines):
    if engines.transport == "kafka":
        assert all(e.startswith("kafka+ssl://") for e in engines.controller.replication_endpoints.values())
    answer = produce(engines, 0)
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ends = [engines.servers[b].get("/v1/topics/t/partitions/0").json()["logEndOffset"] for b in (1, 2)]
        if ends == [1, 1]:
            break
        time.sleep(0.1)
    assert ends == [1, 1]


@pytest.mark.parametrize("engines", ["producer"], indirect=True)
def test_a_follower_whose_token_lacks_replicate_is_refused_and_stays_behind(engines: Engines):
    # The HTTP API refuses the whole fetch; the Kafka listener each topic in its own answer.
    refusal = {"http": "denied replicate every topic to producer",
               "kafka": "denied replicate topic t to producer (Kafka API 1)"}[engines.transport]
    answer = produce(engines, 0)
    assert answer.status_code != 200, answer.text
    deadline = time.monotonic() + 20
    while refusal not in engines.servers[0].log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refusal in engines.servers[0].log()
    assert [engines.servers[b].get("/v1/topics/t/partitions/0").json()["logEndOffset"] for b in (1, 2)] == [0, 0]
