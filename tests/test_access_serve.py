"""``stratalog serve`` with TLS and a token file: only those who belong get in, on both listeners.

A real server process with ``--tls-cert/--tls-key`` (certificates made by openssl) and
``--token-file`` (kube-apiserver's token file format). Real clients: ``requests`` over HTTPS and
librdkafka over SASL_SSL with PLAIN and OAUTHBEARER. Raw frames and hypothesis for what clients
never send.
"""

from __future__ import annotations

import secrets
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates import Authority
from kafka_wire import read_frame, request_frame
from server_harness import Server, kafka_batch
from stratalog.server.app import ROUTES

TOKENS = {name: secrets.token_urlsafe(24) for name in ("producer", "consumer", "admin", "orders-reader")}
GRANTS = {"producer": "stratalog:produce", "consumer": "stratalog:consume", "admin": "stratalog:administer",
          "orders-reader": "stratalog:consume:orders"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authority, Path, Path]:
    root = tmp_path_factory.mktemp("tls")
    authority = Authority.create(root / "ca")
    cert, key = authority.issue(root / "secret", "stratalog-1", serial=1)
    return authority, cert, key


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tls: tuple[Authority, Path, Path]) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("access")
    token_file = root / "tokens.csv"
    token_file.write_text("# token,user,uid,groups\n" + "".join(
        f'{TOKENS[name]},{name},uid-{name},"{GRANTS[name]},system:authenticated"\n' for name in TOKENS))
    authority, cert, key = tls
    running = Server([root / "data"], "--no-schedule", "--kafka-listen", "127.0.0.1:0", "--token-file",
                     str(token_file), "--tls-cert", str(cert), "--tls-key", str(key), "--tls-reload-seconds", "0.2",
                     "--create-topic", "events:1", "--create-topic", "orders:1", "--max-fetch-wait-ms", "500",
                     ca=authority.cert).start()
    yield running
    assert running.terminate() == 0, running.log()
    assert "Traceback" not in running.log(), running.log()


def as_(server: Server, who: str | None) -> requests.Session:
    session = requests.Session()
    session.verify = str(server.ca)
    session.trust_env = False   # else REQUESTS_CA_BUNDLE in the environment overrides verify
    if who is not None:
        session.headers["Authorization"] = f"Bearer {TOKENS[who]}"
    return session


def produce(session: requests.Session, server: Server, topic: str = "events") -> requests.Response:
    return session.post(server.url(f"/v1/topics/{topic}/partitions/0/records"), data=kafka_batch([(None, b"r")]),
                        headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)


def fetch(session: requests.Session, server: Server, topic: str = "events") -> requests.Response:
    return session.get(server.url(f"/v1/topics/{topic}/partitions/0/records"), params={"offset": 0}, timeout=30)


# -- HTTP ----------------------------------------------------------------------------------------
def test_a_producer_token_produces_and_may_not_read(server: Server):
    producer = as_(server, "producer")
    assert produce(producer, server).status_code == 200
    refused = fetch(producer, server)
    assert refused.status_code == 403
    assert refused.json()["error_code"] == "TOPIC_AUTHORIZATION_FAILED"
    assert (refused.json()["verb"], refused.json()["resource"]) == ("consume", "topic events")
    assert "producer may not consume topic events" in refused.json()["message"]


def test_a_consumer_token_reads_and_may_not_produce(server: Server):
    consumer = as_(server, "consumer")
    assert produce(as_(server, "producer"), server).status_code == 200
    read = fetch(consumer, server)
    assert read.status_code == 200 and read.json()["records"], read.text
    refused = produce(consumer, server)
    assert (refused.status_code, refused.json()["verb"]) == (403, "produce")


def test_a_grant_on_one_topic_reads_that_topic_only(server: Server):
    reader = as_(server, "orders-reader")
    assert fetch(reader, server, "orders").status_code == 200
    assert fetch(reader, server, "events").status_code == 403


def test_maintenance_needs_the_administer_verb_on_every_topic(server: Server):
    refused = as_(server, "producer").post(server.url("/v1/maintenance/flush"), timeout=30)
    assert (refused.status_code, refused.json()["error_code"], refused.json()["resource"]) == \
        (403, "CLUSTER_AUTHORIZATION_FAILED", "every topic")
    assert as_(server, "admin").post(server.url("/v1/maintenance/flush"), timeout=30).status_code == 200


@pytest.mark.parametrize("header", [None, "Bearer not-a-token-here", "Basic dXNlcjpwYXNz", "Bearer ", "Bearer a b",
                                    "Bearer " + "x" * 5000])
def test_no_token_a_wrong_token_or_a_malformed_header_gets_401(server: Server, header: str | None):
    session = as_(server, None)
    if header is not None:
        session.headers["Authorization"] = header
    answer = produce(session, server)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error_code"] == "SASL_AUTHENTICATION_FAILED"
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_probes_metrics_and_the_openapi_document_need_no_token_and_count_the_denials(server: Server):
    anyone = as_(server, None)
    for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.json"):
        assert anyone.get(server.url(path), timeout=30).status_code == 200, path
    assert as_(server, "producer").get(server.url("/v1/topics/events/partitions/0/records"), timeout=30,
                                       params={"offset": 0}).status_code == 403
    metrics = anyone.get(server.url("/metrics"), timeout=30).text
    denied = [line for line in metrics.splitlines() if line.startswith('stratalog_access_denied_total{verb="consume"}')]
    assert denied and float(denied[0].split()[-1]) >= 1, metrics
    assert "denied consume topic events to producer" in server.log()


def test_the_openapi_document_says_which_operations_need_a_bearer_token(server: Server):
    document = as_(server, None).get(server.url("/v1/openapi.json"), timeout=30).json()
    scheme = document["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    declared = {(method.upper(), path): operation["security"] for path, item in document["paths"].items()
                for method, operation in item.items() if method != "parameters"}
    assert declared == {(method, path): [] if need.public else [{"bearer": []}] for method, path, _, need in ROUTES}
    assert declared[("GET", "/healthz")] == [] and declared[("POST", "/v1/topics")] == [{"bearer": []}]
    # A secured operation documents the refusals a client must expect.
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method != "parameters" and operation["security"]:
                assert {"401", "403"} <= set(operation["responses"]), (method, path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.one_of(st.text(max_size=80), st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
                        st.text(max_size=60).map(lambda t: "Bearer " + t)))
def test_fuzzed_authorization_headers_are_refused_with_401_and_never_accepted(server: Server, header: str):
    header = "".join(c for c in header if c not in "\r\n\0")   # what an HTTP client can send at all
    session = as_(server, None)
    session.headers["Authorization"] = header
    try:
        answer = produce(session, server)
    except (requests.exceptions.InvalidHeader, UnicodeEncodeError, ValueError):
        return   # the client library will not send it
    if any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in header):
        # Control characters are not allowed in an HTTP field value: aiohttp's parser refuses them.
        assert answer.status_code == 400, (header, answer.status_code, answer.text)
        return
    assert answer.status_code == 401, (header, answer.status_code, answer.text)
    assert answer.json()["error_code"] == "SASL_AUTHENTICATION_FAILED"


# -- TLS -----------------------------------------------------------------------------------------
def test_a_client_that_does_not_trust_the_ca_is_refused(server: Server):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url("/healthz"), timeout=10)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(server.url("/healthz").replace("https://", "http://"), timeout=10)


def served_serial(address: str, ca: Path) -> int:
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls_socket:
        return int(tls_socket.getpeercert()["serialNumber"], 16)


def test_a_renewed_certificate_is_served_on_both_listeners_without_a_restart(server: Server, tls):
    authority, cert, _ = tls
    http_address = server.base.removeprefix("https://")
    assert served_serial(http_address, authority.cert) in (1, 2)
    pid = server.proc.pid
    authority.issue(cert.parent, "stratalog-1", serial=2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (served_serial(http_address, authority.cert) != 2
                                           or served_serial(server.kafka_address(), authority.cert) != 2):
        time.sleep(0.1)
    assert served_serial(http_address, authority.cert) == 2
    assert served_serial(server.kafka_address(), authority.cert) == 2
    assert server.proc.pid == pid and server.proc.poll() is None
    assert as_(server, "consumer").get(server.url("/v1/topics/events"), timeout=30).status_code == 200


# -- Kafka: SASL_SSL -------------------------------------------------------------------------------
def kafka_config(server: Server, who: str | None, mechanism: str = "PLAIN", token: str | None = None) -> dict:
    config = {"bootstrap.servers": server.kafka_address(), "ssl.ca.location": str(server.ca),
              "security.protocol": "SASL_SSL" if (who or token) else "SSL", "socket.timeout.ms": 5000,
              "message.timeout.ms": 8000}
    secret = token if token is not None else (TOKENS[who] if who else None)
    if secret is not None and mechanism == "PLAIN":
        config.update({"sasl.mechanism": "PLAIN", "sasl.username": who or "someone", "sasl.password": secret})
    elif secret is not None:
        config.update({"sasl.mechanism": "OAUTHBEARER",
                       "oauth_cb": lambda _config: (secret, time.time() + 3600, who or "someone")})
    return config


def kafka_produce(config: dict, topic: str = "events") -> list:
    from confluent_kafka import Producer

    producer = Producer(config)
    outcomes: list = []
    producer.produce(topic, value=b"over kafka", partition=0,
                     on_delivery=lambda error, message: outcomes.append(error))
    producer.flush(15)
    return outcomes


def kafka_consume_error(config: dict, topic: str = "events", start: int | None = None) -> tuple[list[bytes], object]:
    """Records read, or the first error; from ``start``, or the beginning (which asks ListOffsets first)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": "access-tests", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING if start is None else start)])
    values, error = [], None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and error is None and not values:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            error = message.error()
        else:
            values.append(message.value())
    consumer.close()
    return values, error


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_librdkafka_over_sasl_ssl_produces_with_the_producer_token_and_reads_with_the_consumer_token(
        server: Server, mechanism: str):
    assert kafka_produce(kafka_config(server, "producer", mechanism)) == [None]
    values, error = kafka_consume_error(kafka_config(server, "consumer", mechanism))
    assert error is None and values, error


def test_librdkafka_is_refused_what_its_token_does_not_grant(server: Server):
    from confluent_kafka import KafkaError

    [refused] = kafka_produce(kafka_config(server, "consumer"))
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    for start in (None, 0):   # ListOffsets for the beginning, then Fetch; Fetch straight away
        _, error = kafka_consume_error(kafka_config(server, "producer"), start=start)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (start, error)


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_librdkafka_with_a_wrong_token_or_without_sasl_gets_nothing_in(server: Server, mechanism: str):
    [wrong] = kafka_produce(kafka_config(server, None, mechanism, token="wrong-token"))
    assert wrong is not None, "a wrong token was accepted"
    [no_sasl] = kafka_produce(kafka_config(server, None))
    assert no_sasl is not None, "a client without SASL was let in"
    assert "refused a credential (Kafka SASL" in server.log()
    assert "before SASL authentication" in server.log()


# -- Kafka: raw SASL frames ------------------------------------------------------------------------
def tls_connect(server: Server) -> ssl.SSLSocket:
    host, _, port = server.kafka_address().rpartition(":")
    context = ssl.create_default_context(cafile=str(server.ca))
    return context.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host)


def sasl_exchange(server: Server, mechanism: str, auth_bytes: bytes) -> int | None:
    """SaslAuthenticate's error code after a handshake, or None when the listener closed the connection."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
    from kio.serial import entity_reader

    with tls_connect(server) as sock:
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism=mechanism)))
        assert read_frame(sock) is not None
        sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=auth_bytes), correlation_id=2))
        try:
            frame = read_frame(sock)
        except (ConnectionResetError, ssl.SSLError):
            return None
        if frame is None:
            return None
        header, used = entity_reader(SaslAuthenticateResponse.__header_schema__)(frame, 0)
        response, _ = entity_reader(SaslAuthenticateResponse)(frame, used)
        code = int(response.error_code)
        if code == 0:   # accepted: the connection must now be usable
            return code
        try:
            assert read_frame(sock) is None, "the connection stayed open after a failed authentication"
        except (ConnectionResetError, ssl.SSLError):
            pass
        return code


def test_sasl_frames_accept_exactly_a_valid_token(server: Server):
    token = TOKENS["consumer"].encode()
    assert sasl_exchange(server, "PLAIN", b"\0consumer\0" + token) == 0
    assert sasl_exchange(server, "OAUTHBEARER", b"n,,\x01auth=Bearer " + token + b"\x01\x01") == 0
    assert sasl_exchange(server, "PLAIN", b"\0consumer\0" + token[:-1]) == 58   # SASL_AUTHENTICATION_FAILED
    assert sasl_exchange(server, "OAUTHBEARER", b"n,,\x01auth=Basic " + token + b"\x01\x01") == 58


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mechanism=st.sampled_from(["PLAIN", "OAUTHBEARER"]),
       auth_bytes=st.one_of(
           st.binary(max_size=200),
           st.builds(lambda a, b: b"\0" + a + b"\0" + b, st.binary(max_size=30), st.binary(max_size=60)),
           st.builds(lambda head, kv: head + b"\x01" + kv + b"\x01\x01",
                     st.sampled_from([b"n,,", b"n,a=x,", b"y,,", b"n,"]), st.binary(max_size=80))))
def test_fuzzed_sasl_frames_are_refused_and_never_accepted(server: Server, mechanism: str, auth_bytes: bytes):
    assert all(token.encode() not in auth_bytes for token in TOKENS.values())
    assert sasl_exchange(server, mechanism, auth_bytes) in (58, None)


def test_requests_sent_with_the_sasl_exchange_meet_the_limit_of_an_authenticated_connection(server: Server):
    """A frame's size limit is its connection's when the requests before it are answered: a client
    sending its handshake, its token and a produce larger than sasl.server.max.receive.size (512 KiB)
    in one write gets all three answered, the produce taken."""
    import datetime

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.produce.v9.response import ProduceResponse
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
    from kio.serial import entity_reader
    from kio.static.primitive import i32Timedelta

    batch = kafka_batch([(b"k", b"v" * (600 * 1024))])
    produce = ProduceRequest(transactional_id=None, acks=1, timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
                             topic_data=(TopicProduceData(name="events", partition_data=(
                                 PartitionProduceData(index=0, records=batch),)),))
    with tls_connect(server) as sock:
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1)
                     + request_frame(SaslAuthenticateRequest(
                         auth_bytes=b"\0producer\0" + TOKENS["producer"].encode()), correlation_id=2)
                     + request_frame(produce, correlation_id=3))
        answers = [read_frame(sock) for _ in range(3)]
    assert all(answer is not None for answer in answers), answers
    assert [struct.unpack_from(">i", answer)[0] for answer in answers if answer is not None] == [1, 2, 3]
    header, used = entity_reader(ProduceResponse.__header_schema__)(answers[2], 0)
    response, _ = entity_reader(ProduceResponse)(answers[2], used)
    assert int(response.responses[0].partition_responses[0].error_code) == 0


def test_a_request_before_authentication_closes_the_connection(server: Server):
    from kio.schema.metadata.v12.request import MetadataRequest

    with tls_connect(server) as sock:
        sock.sendall(request_frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)))
        try:
            assert read_frame(sock) is None
        except (ConnectionResetError, ssl.SSLError):
            pass
    with tls_connect(server) as sock:   # and a huge frame is not read at all before authentication
        sock.sendall(struct.pack(">i", 10 * 1024 * 1024) + b"\0" * 64)
        try:
            assert read_frame(sock) is None
        except (ConnectionResetError, ssl.SSLError):
            pass


# -- the CLI's --server mode ---------------------------------------------------------------------
def test_the_cli_presents_a_token_file_and_trusts_a_ca_file_from_its_environment(server: Server, tmp_path):
    import os
    import subprocess

    from server_harness import STRATALOG

    token_file = tmp_path / "token"
    token_file.write_text(TOKENS["producer"] + "\n")
    env = {**os.environ, "STRATALOG_CA_FILE": str(server.ca), "STRATALOG_TOKEN_FILE": str(token_file)}
    produce_cli = [*STRATALOG, "produce", "--server", server.base, "--topic", "orders", "--partition", "0"]
    done = subprocess.run(produce_cli, input='{"key": "k", "value": "from the cli"}\n', capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    consume_cli = [*STRATALOG, "consume", "--server", server.base, "--topic", "orders", "--partition", "0"]
    refused = subprocess.run(consume_cli, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
    anonymous = subprocess.run(produce_cli, input='{"value": "x"}\n', capture_output=True, text=True, timeout=60,
                               env={k: v for k, v in env.items() if k != "STRATALOG_TOKEN_FILE"})
    assert anonymous.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in anonymous.stderr, anonymous.stderr


def test_the_spark_sources_http_store_presents_the_token_and_trusts_the_ca_from_its_environment(
        server: Server, tmp_path, monkeypatch):
    import pickle

    from stratalog_spark.store.http import HttpStore

    token_file = tmp_path / "token"
    token_file.write_text(TOKENS["consumer"])
    monkeypatch.setenv("STRATALOG_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("STRATALOG_CA_FILE", str(server.ca))
    assert produce(as_(server, "producer"), server).status_code == 200
    store = pickle.loads(pickle.dumps(HttpStore(server.base)))   # as executors get it
    assert "events" in store.topics()
    end = store.offsets("events", 0).end
    assert end >= 1 and list(store.read_batches("events", 0, 0, end, lambda *lost: None))
    token_file.write_text(TOKENS["producer"])   # a renewed token is read again: this one may not read
    with pytest.raises(Exception) as refused:
        list(store.read_batches("events", 0, 0, end, lambda *lost: None))
    assert "TOPIC_AUTHORIZATION_FAILED" in str(getattr(refused.value, "code", "")) + str(refused.value)


# -- Kafka: each API's verb, over raw frames -------------------------------------------------------
def authenticated(server: Server, who: str) -> ssl.SSLSocket:
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    sock = tls_connect(server)
    sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN")))
    assert read_frame(sock) is not None
    sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=f"\0{who}\0{TOKENS[who]}".encode())))
    assert read_frame(sock) is not None
    return sock


def ask(sock: ssl.SSLSocket, body, response_class):
    from kio.serial import entity_reader

    sock.sendall(request_frame(body, correlation_id=7))
    frame = read_frame(sock)
    assert frame is not None, "the connection was closed"
    _, used = entity_reader(response_class.__header_schema__)(frame, 0)
    return entity_reader(response_class)(frame, used)[0]


def test_each_kafka_api_asks_its_own_verb_of_the_topic(server: Server):
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.create_topics.v7.response import CreateTopicsResponse
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
    from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import OffsetForLeaderEpochResponse
    from kio.static.primitive import i32Timedelta
    import datetime

    def list_offsets(who: str) -> int:
        with authenticated(server, who) as sock:
            answer = ask(sock, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
                name="events", partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                timestamp=-1),)),)), ListOffsetsResponse)
        return int(answer.topics[0].partitions[0].error_code)

    def end_of_epoch(who: str) -> int:
        with authenticated(server, who) as sock:
            answer = ask(sock, OffsetForLeaderEpochRequest(replica_id=-1, topics=(OffsetForLeaderTopic(
                topic="events", partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=0),)),)),
                OffsetForLeaderEpochResponse)
        return int(answer.topics[0].partitions[0].error_code)

    def create(who: str, name: str) -> int:
        timeout = i32Timedelta.parse(datetime.timedelta(seconds=10))
        with authenticated(server, who) as sock:
            answer = ask(sock, CreateTopicsRequest(topics=(CreatableTopic(
                name=name, num_partitions=1, replication_factor=-1, assignments=(), configs=()),),
                timeout=timeout, validate_only=False), CreateTopicsResponse)
        return int(answer.topics[0].error_code)

    def delete(who: str, name: str) -> int:
        timeout = i32Timedelta.parse(datetime.timedelta(seconds=10))
        with authenticated(server, who) as sock:
            answer = ask(sock, DeleteTopicsRequest(topics=(DeleteTopicState(name=name, topic_id=None),),
                                                   timeout=timeout), DeleteTopicsResponse)
        return int(answer.responses[0].error_code)

    TOPIC_AUTHORIZATION_FAILED = 29
    assert (list_offsets("producer"), list_offsets("consumer")) == (TOPIC_AUTHORIZATION_FAILED, 0)
    assert (end_of_epoch("producer"), end_of_epoch("consumer")) == (TOPIC_AUTHORIZATION_FAILED, 0)
    assert create("producer", "made-by-kafka") == TOPIC_AUTHORIZATION_FAILED
    assert create("admin", "made-by-kafka") == 0
    assert delete("consumer", "made-by-kafka") == TOPIC_AUTHORIZATION_FAILED
    assert delete("admin", "made-by-kafka") == 0


def test_a_certificate_whose_key_does_not_match_is_refused_and_the_served_one_stays(tmp_path):
    from stratalog.server.access.tls import ReloadingTLS

    authority = Authority.create(tmp_path / "ca")
    cert, key = authority.issue(tmp_path / "secret", "first", serial=1)
    tls = ReloadingTLS(cert, key)
    other_cert, _ = authority.issue(tmp_path / "other", "second", serial=2)
    cert.write_bytes(other_cert.read_bytes())   # half a renewal: the new certificate, the old key
    assert tls.reload_if_changed() is False and tls.reloads == 0
    # The live context still serves the first pair: a handshake succeeds.
    client = ssl.create_default_context(cafile=str(authority.cert))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    import threading

    def serve_one() -> None:
        connection, _ = listener.accept()
        try:
            with tls.context.wrap_socket(connection, server_side=True) as tls_connection:
                tls_connection.recv(1)
        except (ssl.SSLError, OSError):
            pass

    server_thread = threading.Thread(target=serve_one)
    server_thread.start()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            client.wrap_socket(raw, server_hostname="127.0.0.1") as connection:
        assert int(connection.getpeercert()["serialNumber"], 16) == 1
    server_thread.join(10)
    listener.close()


def test_a_malformed_topic_in_the_path_is_refused_before_it_is_authorized_or_logged(server: Server):
    answer = as_(server, "producer").get(server.url("/v1/topics/zz%0Aforged line/partitions/0/records"),
                                         params={"offset": 0}, timeout=30)
    assert (answer.status_code, answer.json()["error_code"]) == (400, "INVALID_TOPIC_EXCEPTION"), answer.text
    assert not any(line.startswith("forged line") for line in server.log().splitlines())   # no line forged
