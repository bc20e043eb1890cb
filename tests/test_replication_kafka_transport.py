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
from replication_cluster import ClusterController, Engines
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
        # Past the leader's log end: OFFSET_OUT_OF_RANGE, then ListOffsets for the log start and end.
        beyond = session([(TP, fetch(9))], 0, 1, MIB)[0]
        assert beyond.out_of_range and (beyond.log_start_offset, beyond.log_end_offset) == (0, 1)
        # A round with nothing new waits, and an append to any of its partitions ends the wait.
        answer: dict[str, object] = {}
        waiting = threading.Thread(target=lambda: answer.update(r=session(
            [(TP, fetch(1, 0)), (TP1, fetch(1, 0))], 30_000, 1, MIB)))
        started = time.monotonic()
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive()
        assert leader.produce_raw("t", 1, batch).status_code == 200
        waiting.join(timeout=20)
        assert not waiting.is_alive() and time.monotonic() - started < 20
        still, woken = answer["r"]
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
