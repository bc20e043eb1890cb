"""Followers fetch over the leader's Kafka listener: a Fetch with a replica id, as Kafka's followers
send it (``KafkaLeaderSession``), answered by ``stratalog serve --broker-id --kafka-listen`` engines.

The answer carries what the HTTP replication API carries: each partition's whole batches or its
own error, the request's byte budget, a long poll that an append to any partition ends, KIP-320's
diverging epoch, and OFFSET_OUT_OF_RANGE followed by ListOffsets for the leader's log start and
end. The listener of a replicated engine serves followers only: a consumer is turned away.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
import time
from datetime import timedelta

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i32Timedelta

import pytest

from kafka_wire import closed_without_answer, connect, request_frame
from replication_cluster import ClusterController, Engines, round_woken_by_an_append
from server_harness import kafka_batch
from stratalog.broker.partition import ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.server.credentials import Credentials
from stratalog.server.kafka.leader_session import KafkaLeaderSession
from stratalog.server.replica_clients import leader_session
from stratalog.server.replication import LeaderSession

TP, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
MIB = 1 << 20


def fetch(offset: int, last_epoch: int = -1, *, epoch: int = 0, replica: int = 1) -> ReplicaFetch:
    return ReplicaFetch(replica, offset, last_epoch, epoch, MIB)


def test_a_kafka_fetch_from_a_replica_answers_each_partition_as_the_http_api_does(tmp_path):
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 1, transport="kafka")   # broker 0 leads; broker 1 is a name
    try:
        for tp in (TP, TP1):
            controller.controller.create(tp, (0, 1))
        controller.settle()
        leader = engines.servers[0]
        batch = kafka_batch([(b"k", b"v" * 100)])
        assert leader.produce_raw("t", 0, batch).status_code == 200
        session = KafkaLeaderSession(controller.replication_endpoints[0])
        first, unknown, empty = session([(TP, fetch(0)), (TopicPartition("t", 7), fetch(0)), (TP1, fetch(0))],
                                        0, 1, MIB)
        assert isinstance(first, ReplicaFetchResult) and first.data == batch
        assert (first.high_watermark, first.log_start_offset, first.diverging_epoch) == (0, 0, None)
        assert isinstance(unknown, StratalogError) and unknown.code == "NOT_LEADER_OR_FOLLOWER"
        assert isinstance(empty, ReplicaFetchResult) and empty.data == b""
        # The fetch offset is the follower's acknowledgement: the next fetch sees the HW move.
        assert session([(TP, fetch(1, 0))], 0, 1, MIB)[0].high_watermark == 1
        # The whole answer's budget: the first partition with data gets a batch, the next none.
        assert leader.produce_raw("t", 1, batch).status_code == 200
        a, b = session([(TP, fetch(0)), (TP1, fetch(0))], 0, 1, 10)
        assert (len(a.data), len(b.data)) == (len(batch), 0)
        # A follower's stale leader epoch is fenced; one whose log diverged is told where to cut.
        stale = session([(TP, fetch(0, epoch=5))], 0, 1, MIB)[0]
        assert isinstance(stale, StratalogError) and stale.code == "UNKNOWN_LEADER_EPOCH"
        diverged = session([(TP, fetch(3, 0))], 0, 1, MIB)[0]
        assert diverged.diverging_epoch == (0, 1) and diverged.data == b""
        # An epoch newer than any the leader knows cannot be said as a diverging epoch on Kafka's wire
        # ((-1, -1) is the field's default: no divergence): it is an error, not an empty answer.
        unknown_epoch = session([(TP, fetch(1, 5))], 5_000, 1, MIB)[0]
        assert isinstance(unknown_epoch, StratalogError) and unknown_epoch.code == "UNKNOWN_LEADER_EPOCH"
        # Past the leader's log end: OFFSET_OUT_OF_RANGE, then ListOffsets for the log start and end.
        beyond = session([(TP, fetch(9))], 0, 1, MIB)[0]
        assert beyond.out_of_range and (beyond.log_start_offset, beyond.log_end_offset) == (0, 1)
        # A round with nothing new waits, and an append to any of its partitions ends the wait.
        still, woken = round_woken_by_an_append(
            session, [(TP, fetch(1, 0)), (TP1, fetch(1, 0))],
            lambda: leader.produce_raw("t", 1, batch).raise_for_status())
        assert still.data == b"" and len(woken.data) == len(batch)
        session.close()
    finally:
        controller.close()
        engines.stop_all()


def test_a_replicated_engines_kafka_listener_turns_consumers_away(tmp_path):
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 1, transport="kafka")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        address = engines.servers[0].kafka_address()
        consumer_fetch = FetchRequest(
            replica_id=-1, max_wait=i32Timedelta.parse(timedelta(0)), min_bytes=1,
            max_bytes=MIB, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(FetchTopic(topic="t", partitions=(FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=MIB),)),), forgotten_topics_data=(), rack_id="")
        for request in (consumer_fetch, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False)):
            sock: socket.socket = connect(address)
            with sock:
                sock.sendall(request_frame(request))
                assert closed_without_answer(sock), type(request).__name__
        assert "serves followers' replication only" in engines.servers[0].log()
        # ... and coordinates no groups: it made no __consumer_offsets of its own.
        assert not list((tmp_path / "broker-0").glob("__consumer_offsets-*"))
    finally:
        controller.close()
        engines.stop_all()


@pytest.mark.parametrize("endpoint, kind", [("kafka://127.0.0.1:9", KafkaLeaderSession),
                                            ("http://127.0.0.1:9", LeaderSession)])
def test_with_tls_in_use_a_follower_never_sends_its_token_to_a_leader_advertised_in_clear(tmp_path: Path,
                                                                                         endpoint, kind):
    """Port 9 (discard) is never asked: the refusal comes before any connection."""
    (tmp_path / "token").write_text("secret-token")
    (tmp_path / "ca.pem").write_text("")
    session = leader_session(endpoint, Credentials(tmp_path / "token", tmp_path / "ca.pem"))
    assert isinstance(session, kind)
    with pytest.raises(OSError, match="is not TLS: the replication token is sent over TLS only"):
        session([(TP, fetch(0))], 0, 1, MIB)


def test_followers_fetch_from_the_kafka_listener_but_misdirected_clients_are_sent_to_the_leaders_api(tmp_path):
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 2, "min.insync.replicas=2", transport="kafka")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        assert engines.servers[0].produce_raw("t", 0, kafka_batch([(None, b"x")]), acks="all").status_code == 200
        misdirected = engines.servers[1].produce_raw("t", 0, kafka_batch([(None, b"y")]))
        assert misdirected.status_code == 421, misdirected.text
        assert misdirected.json()["leader"]["url"] == engines.url(0)   # its API, not kafka://
    finally:
        controller.close()
        engines.stop_all()


def test_a_follower_with_a_token_fetches_from_a_leader_without_access_control(tmp_path: Path):
    """Its ApiVersions offers no SASL: the follower does not authenticate (a leader with access control
    on is covered in test_replication_access.py)."""
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 1, transport="kafka")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        assert engines.servers[0].produce_raw("t", 0, kafka_batch([(None, b"x")])).status_code == 200
        (tmp_path / "token").write_text("a-token-nobody-asks-for")
        session = leader_session(controller.replication_endpoints[0], Credentials(tmp_path / "token"))
        answer = session([(TP, fetch(0))], 0, 1, MIB)[0]
        assert isinstance(answer, ReplicaFetchResult) and len(answer.data) > 0
    finally:
        controller.close()
        engines.stop_all()


@pytest.mark.parametrize("answer", [
    b"\x00\x00\x00\x03abc",                                    # a frame too short for an answer
    b"\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00\x00",      # not a FetchResponse
    b"\x7f\xff\xff\xff",                                         # a size no answer has
])
def test_a_garbled_answer_is_an_oserror_and_the_fetcher_lives_on(answer: bytes):
    """A stand-in for a leader (a socket that answers garbage: no real leader sends it) -- as a
    proxy, a stray service on the port or a cut connection would."""
    from stratalog.broker.fetcher import FetcherSettings, LeaderFetcher

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return   # closed: the test is over
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    session = KafkaLeaderSession(f"kafka://127.0.0.1:{port}", timeout_s=5)
    with pytest.raises(OSError, match=f"replica fetch from 127.0.0.1:{port}"):
        session([(TP, fetch(0))], 0, 1, MIB)
    assert session._sock is None   # closed: the next round starts on a new connection

    class Follower:   # what a fetcher asks of a partition
        state = type("S", (), {"leader": 0})()
        is_leader = False

        def next_fetch(self, max_bytes: int) -> ReplicaFetch:
            return fetch(0)

    fetcher = LeaderFetcher(0, f"kafka://127.0.0.1:{port}", session, FetcherSettings(backoff_s=0.01)).start()
    fetcher.add(TP, Follower())  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while fetcher.errors < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fetcher.errors >= 3 and fetcher.running
    fetcher.stop()
    server.close()
