"""Only those who belong get in: agents check ServiceAccount tokens (TokenReview) and RBAC on the
Topic (SubjectAccessReview), against the test bed's real API server.

The controller and two agents run as real processes with ``--authentication kubernetes``; a
Topic of one partition with two replicas and ``min.insync.replicas=2`` makes every acks=all
produce go through a follower fetching with its own token. Clients are ServiceAccounts bound to
Roles that grant the verbs of docs/access.md on ``topics.stratalog.io``: ``produce``,
``consume``, ``administer`` and (for agents only) ``replicate``. Tokens come from the
TokenRequest API (``kubectl create token``); the expired one is a real token re-signed with the
test bed's ServiceAccount key with an ``exp`` in the past.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kafka_wire import closed_without_answer, connect, request_frame
from server_harness import kafka_batch

from .conftest import KubeCluster
from .roles import Agent, Operator, free_port, logdir_manifests, wait_for

NS = "access"
TOPIC = "events"
CACHE_S = 2.0
ROLES = {"producer": ["produce"], "consumer": ["consume"], "admin": ["administer"], "agent": ["replicate"]}


def _manifests() -> str:
    docs = logdir_manifests(("dir-a", "dir-b"))
    docs.append(f"apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {{name: {TOPIC}}}\n"
                "spec: {partitions: 1, replicas: 2, config: {min.insync.replicas: 2}}\n")
    for name, verbs in ROLES.items():
        docs.append(f"apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}}}\n")
        docs.append("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"
                    f"metadata: {{name: stratalog-{name}}}\n"
                    f"rules: [{{apiGroups: [stratalog.io], resources: [topics], verbs: {json.dumps(verbs)}}}]\n")
        docs.append("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n"
                    f"metadata: {{name: stratalog-{name}}}\n"
                    f"roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: stratalog-{name}}}\n"
                    f"subjects: [{{kind: ServiceAccount, name: {name}, namespace: {NS}}}]\n")
    return "---\n".join(docs)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def expired_copy(token: str, key: Path) -> str:
    """The same claims, expired an hour ago, signed with the API server's ServiceAccount key."""
    header, payload, _ = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["iat"], claims["nbf"], claims["exp"] = [int(time.time()) - 7200] * 2 + [int(time.time()) - 3600]
    signing_input = f"{header}.{b64url(json.dumps(claims).encode())}"
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)], input=signing_input.encode(),
                               capture_output=True, check=True).stdout
    return f"{signing_input}.{b64url(signature)}"


class Bed:
    def __init__(self, kube: KubeCluster, root: Path) -> None:
        self.kube, self.root = kube, root
        self.operator = Operator(kube.env, NS, root / "operator.log")
        self.tokens: dict[str, str] = {}

    def token(self, account: str, audience: str = "stratalog") -> str:
        return self.kube.kubectl_run("-n", NS, "create", "token", account, "--audience", audience,
                                     "--duration", "20m").stdout.strip()

    def start_agents(self) -> None:
        token_file = self.root / "agent-token"
        token_file.write_text(self.tokens["agent"])
        args = ("--authentication", "kubernetes", "--authorization-cache-seconds", str(CACHE_S),
                "--replication-token-file", str(token_file), "--broker-session-timeout-ms", "3000",
                "--broker-heartbeat-interval-ms", "500", "--config", "replica.fetch.wait.max.ms=200")
        self.kafka_ports = {n: free_port() for n in ("dir-a", "dir-b")}
        self.agents = {n: Agent(self.kube.env, NS, n, [self.root / n / "data-0"], self.root / f"{n}.log", *args,
                                "--kafka-listen", f"127.0.0.1:{self.kafka_ports[n]}") for n in ("dir-a", "dir-b")}
        for agent in self.agents.values():
            agent.start()

    def record(self) -> dict[str, Any] | None:
        out = self.kube.kubectl_run("-n", NS, "get", "topic", TOPIC, "-o", "json").stdout
        partitions = (json.loads(out).get("status") or {}).get("partitions") or []
        return partitions[0] if partitions else None

    def url(self, logdir: str, path: str) -> str:
        return self.agents[logdir].base + path

    def leader(self) -> str:
        return wait_for("a leader with both replicas in sync",
                        lambda: (r := self.record()) and r.get("leader") and len(r["isr"]) == 2 and r["leader"],
                        timeout=120, logs=self.logs)

    @property
    def logs(self) -> list[Path]:
        return [self.operator.log_path, *(a.log_path for a in getattr(self, "agents", {}).values())]

    def call(self, method: str, logdir: str, path: str, token: str | None, *, headers: dict[str, str] | None = None,
             **kwargs: Any) -> requests.Response:
        headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token is not None else {})}
        return requests.request(method, self.url(logdir, path), headers=headers, timeout=30, **kwargs)

    def produce(self, token: str | None, acks: str = "all") -> requests.Response:
        return self.call("POST", self.leader(), f"/v1/topics/{TOPIC}/partitions/0/records", token,
                         data=kafka_batch([(None, b"hello")]), params={"acks": acks},
                         headers={"Content-Type": "application/vnd.kafka.record-batch"})

    def consume(self, token: str | None) -> requests.Response:
        return self.call("GET", self.leader(), f"/v1/topics/{TOPIC}/partitions/0/records", token,
                         params={"offset": 0})


@pytest.fixture(scope="module")
def bed(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    b = Bed(kube_cluster, tmp_path_factory.mktemp("access"))
    kube_cluster.kubectl_run("-n", NS, "apply", "-f", "-", input=_manifests())
    b.tokens = {name: b.token(name) for name in ROLES}
    b.operator.start()
    b.start_agents()
    try:
        yield b
    finally:
        for role in (*b.agents.values(), b.operator):
            role.stop()
        for role in (*b.agents.values(), b.operator):
            assert "Traceback" not in role.log(), role.log()[-4000:]


def test_a_producer_token_produces_through_both_replicas_and_may_not_read(bed: Bed):
    answer = bed.produce(bed.tokens["producer"])   # acks=all with min.insync.replicas=2: the follower has it
    assert answer.status_code == 200, answer.text
    refused = bed.consume(bed.tokens["producer"])
    assert refused.status_code == 403, refused.text
    assert (refused.json()["error_code"], refused.json()["verb"], refused.json()["resource"]) == \
        ("TOPIC_AUTHORIZATION_FAILED", "consume", f"topic {TOPIC}")


def test_a_consumer_token_reads_and_may_not_produce(bed: Bed):
    assert bed.produce(bed.tokens["producer"]).status_code == 200
    read = bed.consume(bed.tokens["consumer"])
    assert read.status_code == 200 and read.json()["records"], read.text
    refused = bed.produce(bed.tokens["consumer"])
    assert (refused.status_code, refused.json()["verb"]) == (403, "produce")


def test_no_token_a_wrong_token_an_expired_token_and_another_audiences_token_are_refused(bed: Bed):
    expired = expired_copy(bed.tokens["producer"], bed.kube.dir / "pki" / "sa.key")
    other_audience = bed.token("producer", audience="someone-else")
    for name, token in (("none", None), ("wrong", "not-a-token"), ("expired", expired),
                        ("another audience", other_audience), ("the API server's own", bed.kube.token)):
        answer = bed.produce(token)
        assert answer.status_code == 401, (name, answer.status_code, answer.text)
        assert answer.json()["error_code"] == "SASL_AUTHENTICATION_FAILED", name
    assert bed.produce(bed.tokens["producer"]).status_code == 200   # the same account, with a valid token


def test_an_agents_identity_replicates_but_cannot_administer(bed: Bed):
    leader = bed.leader()
    agent_token = bed.tokens["agent"]
    for method, path in (("POST", "/v1/maintenance/flush"), ("DELETE", f"/v1/topics/{TOPIC}"),
                         ("POST", f"/v1/topics/{TOPIC}/partitions/0/delete-records")):
        refused = bed.call(method, leader, path, agent_token, json={"offset": 0})
        assert refused.status_code == 403 and refused.json()["verb"] == "administer", (path, refused.text)
    assert bed.call("POST", leader, "/v1/maintenance/flush", bed.tokens["admin"]).status_code == 200
    # The replication API needs the agents' verb: a producer may not fetch as a follower.
    fetch = {"replicaId": 9, "maxWaitMs": 0, "minBytes": 0, "maxBytes": 1024, "partitions": []}
    refused = bed.call("POST", leader, "/v1/replication/fetch", bed.tokens["producer"], json=fetch)
    assert (refused.status_code, refused.json()["verb"]) == (403, "replicate"), refused.text
    assert bed.call("POST", leader, "/v1/replication/fetch", agent_token, json=fetch).status_code != 403


def test_kafka_clients_of_the_agents_authenticate_with_their_token_and_are_held_to_their_verbs(bed: Bed):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError
    from kio.schema.metadata.v12.request import MetadataRequest

    bed.leader()
    bootstrap = [f"127.0.0.1:{port}" for port in bed.kafka_ports.values()]

    def sasl(account: str) -> dict[str, Any]:
        return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": account, "sasl_plain_password": bed.tokens[account]}

    producer = KafkaProducer(acks="all", **sasl("producer"))
    written = producer.send(TOPIC, b"over-kafka", partition=0).get(timeout=30)
    producer.close()
    reader = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=3000, **sasl("consumer"))
    reader.assign([TopicPartition(TOPIC, 0)])
    reader.seek(TopicPartition(TOPIC, 0), written.offset)
    assert [m.value for m in reader][:1] == [b"over-kafka"]
    reader.close()

    refused = KafkaProducer(acks="all", max_block_ms=10000, **sasl("consumer"))   # consume only
    with pytest.raises(TopicAuthorizationFailedError):
        refused.send(TOPIC, b"not allowed", partition=0).get(timeout=30)
    refused.close()
    with connect(bootstrap[0]) as anonymous:   # no SASL first: the listener closes the connection, unanswered
        anonymous.sendall(request_frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False)))
        assert closed_without_answer(anonymous)


def test_revoking_a_rolebinding_takes_effect_within_the_cache_lifetime(bed: Bed):
    consumer = bed.tokens["consumer"]
    assert bed.consume(consumer).status_code == 200
    bed.kube.kubectl_run("-n", NS, "delete", "rolebinding", "stratalog-consumer")
    revoked = time.monotonic()
    wait_for("the revoked consumer to be refused", lambda: bed.consume(consumer).status_code == 403,
             timeout=CACHE_S + 10, logs=bed.logs)
    assert time.monotonic() - revoked <= CACHE_S + 2   # the cache's lifetime, plus a request's time
    denied = [line for line in requests.get(bed.url(bed.leader(), "/metrics"), timeout=10).text.splitlines()
              if line.startswith('stratalog_access_denied_total{verb="consume"}')]
    assert denied and float(denied[0].split()[-1]) >= 1
