"""Kafka clients talk to ``stratalog serve --kafka-listen``: real clients, then raw frames.

kafka-python, aiokafka and confluent-kafka (librdkafka) produce and consume through the Kafka
wire protocol; what they write reads back through the HTTP API byte for byte, and the
reverse. Raw frames (``kafka_wire``) check what clients never send: versions not offered,
frames too large or broken, requests that must be refused with Kafka's error codes.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tools import kafka_toolchain  # noqa: F401  (a fixture)
from kafka_wire import call, closed_without_answer, connect, read_frame, request_frame
from server_harness import RECORD_BATCH, Server, kafka_batch, kafka_parse

TOPIC = "events"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("kafka")
    running = Server([root / "data"], "--no-schedule", "--kafka-listen", "127.0.0.1:0", "--max-fetch-wait-ms",
                     "1000", "--create-topic", f"{TOPIC}:3", "--create-topic", "http-in:1",
                     "--create-topic", "refusals:1", "--create-topic", "java:1",
                     "--create-topic", "idempotent:1", "--create-topic", "epochs:1",
                     "--create-topic", "sendfile:1", "--create-topic", "large:1").start()
    yield running
    assert running.terminate() == 0, running.log()
    assert "Traceback" not in running.log(), running.log()


def http_batches(server: Server, topic: str, partition: int) -> bytes:
    reply = server.get(f"/v1/topics/{topic}/partitions/{partition}/records", params={"offset": 0,
                       "maxBytes": 1 << 20}, headers={"Accept": RECORD_BATCH})
    assert reply.status_code == 200, reply.text
    return reply.content


# -- real clients ----------------------------------------------------------------------------------
def test_kafka_python_produces_with_each_acks_and_consumes_what_it_wrote(server: Server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    address = server.kafka_address()
    sent = []
    for acks in (1, "all", 0):
        # kafka-python's defaults: idempotent (InitProducerId, sequences) with acks=all, not with 1 or 0.
        producer = KafkaProducer(bootstrap_servers=address, acks=acks, linger_ms=2)
        futures = [producer.send(TOPIC, key=b"k%d" % i, value=b"kafka-python acks=%s #%d" % (str(acks).encode(), i),
                                 partition=0, headers=[("h", b"x")]) for i in range(10)]
        producer.flush()
        if acks != 0:
            assert [f.get(10).offset for f in futures] == list(range(len(sent), len(sent) + 10))
        sent += [(b"k%d" % i, b"kafka-python acks=%s #%d" % (str(acks).encode(), i)) for i in range(10)]
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    got = [(m.offset, m.key, m.value, m.headers) for m in consumer]
    consumer.close()
    assert [(k, v) for _, k, v, _ in got] == sent
    assert [o for o, _, _, _ in got] == list(range(30))
    assert all(h == [("h", b"x")] for _, _, _, h in got)
    # The same bytes through HTTP: the batches as the client built them, offsets stamped by the log.
    assert [(r.key, r.value) for _, r in kafka_parse(http_batches(server, TOPIC, 0))] == sent


def test_librdkafka_produces_compressed_batches_and_consumes_them(server: Server):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    address = server.kafka_address()
    producer = Producer({"bootstrap.servers": address, "linger.ms": 5, "compression.type": "lz4", "acks": "all"})
    delivered: list[tuple[object, int]] = []
    for i in range(200):
        producer.produce(TOPIC, key=b"r%d" % i, value=b"librdkafka %d " % i * 20, partition=1,
                         on_delivery=lambda error, message: delivered.append((error, message.offset())))
    assert producer.flush(30) == 0
    assert [e for e, _ in delivered if e is not None] == []
    assert sorted(o for _, o in delivered) == list(range(200))
    consumer = Consumer({"bootstrap.servers": address, "group.id": "unused-by-assign", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 1, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            got.append((message.offset(), message.key(), message.value()))
    consumer.close()
    assert got == [(i, b"r%d" % i, b"librdkafka %d " % i * 20) for i in range(200)]
    batches = list(kafka_parse(http_batches(server, TOPIC, 1)))
    assert batches and all(batch.compression_type == 3 for batch, _ in batches)   # lz4, stored as sent


def test_aiokafka_produces_and_consumes(server: Server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    address = server.kafka_address()

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=address)
        await producer.start()
        try:
            offsets = [(await producer.send_and_wait(TOPIC, b"aiokafka %d" % i, partition=2)).offset for i in range(5)]
        finally:
            await producer.stop()
        assert offsets == [0, 1, 2, 3, 4]
        consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, 2)])
            await consumer.seek_to_beginning(TopicPartition(TOPIC, 2))
            got: list[bytes] = []
            while len(got) < 5:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch, "no records within 5 s"
                got += [m.value for messages in batch.values() for m in messages]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"aiokafka %d" % i for i in range(5)]


def test_kafkas_own_console_producer_and_consumer_write_and_read_a_topic(server: Server, kafka_toolchain):
    address = server.kafka_address()
    lines = "".join(f"key{i}:console line {i}\n" for i in range(5)).encode()
    # The Java producer as it comes: idempotent, acks=all.
    produced = kafka_toolchain.java("org.apache.kafka.tools.ConsoleProducer", [
        "--bootstrap-server", address, "--topic", "java",
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=:"], input=lines)
    assert produced.returncode == 0, produced.describe()
    consumed = kafka_toolchain.java("org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", address, "--topic", "java", "--partition", "0", "--offset", "earliest",
        "--max-messages", "5", "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:"])
    assert consumed.returncode == 0, consumed.describe()
    assert consumed.stdout.splitlines() == [f"key{i}:console line {i}" for i in range(5)]


def test_records_produced_through_http_are_read_by_a_kafka_consumer_unchanged(server: Server):
    from kafka import KafkaConsumer, TopicPartition

    batch = kafka_batch([(b"a", b"one"), (None, b"two"), (b"c", None)], timestamp=1_700_000_000_000,
                        headers=[("trace", b"7")])
    reply = server.post("/v1/topics/http-in/partitions/0/records", data=batch, headers={"Content-Type": RECORD_BATCH})
    assert reply.status_code == 200, reply.text
    consumer = KafkaConsumer(bootstrap_servers=server.kafka_address(), enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("http-in", 0)])
    consumer.seek_to_beginning()
    got = [(m.offset, m.timestamp, m.key, m.value, m.headers) for m in consumer]
    consumer.close()
    assert got == [(0, 1_700_000_000_000, b"a", b"one", [("trace", b"7")]),
                   (1, 1_700_000_000_001, None, b"two", [("trace", b"7")]),
                   (2, 1_700_000_000_002, b"c", None, [("trace", b"7")])]


def test_list_offsets_gives_the_earliest_the_latest_and_the_offset_for_a_time(server: Server):
    from kafka import KafkaConsumer, TopicPartition

    for i in range(3):
        batch = kafka_batch([(None, b"t%d" % i)], timestamp=1_700_000_100_000 + i * 1000)
        assert server.post("/v1/topics/refusals/partitions/0/records", data=batch,
                           headers={"Content-Type": RECORD_BATCH}).status_code == 200
    tp = TopicPartition("refusals", 0)
    consumer = KafkaConsumer(bootstrap_servers=server.kafka_address())
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 3}
    found = consumer.offsets_for_times({tp: 1_700_000_100_500})[tp]
    assert (found.offset, found.timestamp) == (1, 1_700_000_101_000)
    assert consumer.offsets_for_times({tp: 1_700_000_200_000})[tp] is None
    consumer.close()
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse

    def listed(timestamp: int) -> tuple[int, int, int, int]:
        _, response = call(server.kafka_address(), ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
            ListOffsetsTopic(name="refusals", partitions=(ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),)), ListOffsetsResponse)
        p = response.topics[0].partitions[0]
        return int(p.error_code), p.offset, p.timestamp, p.leader_epoch

    assert listed(-1) == (0, 3, -1, 0)                       # latest: the log end, in leader epoch 0
    assert listed(-3) == (0, 2, 1_700_000_102_000, 0)        # the record with the largest timestamp


def test_an_idempotent_producers_retry_is_answered_with_its_first_offset_and_not_written_again(server: Server):
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
    from kio.schema.produce.v9.response import ProduceResponse
    from kio.static.primitive import i32Timedelta
    import datetime

    from stratalog.records import Record, build_batch

    def init() -> tuple[int, int]:
        _, response = call(server.kafka_address(), InitProducerIdRequest(
            transactional_id=None, transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
        assert int(response.error_code) == 0
        return response.producer_id, response.producer_epoch

    (pid, epoch), (other, _) = init(), init()
    assert epoch == 0 and other != pid

    def send(first_seq: int, values: list[bytes]) -> tuple[int, int]:
        batch = build_batch([Record(i, int(time.time() * 1000), None, v) for i, v in enumerate(values)],
                            producer_id=pid, producer_epoch=epoch, base_sequence=first_seq)
        _, response = call(server.kafka_address(), produce_request("idempotent", 0, batch, acks=-1), ProduceResponse)
        answer = response.responses[0].partition_responses[0]
        return int(answer.error_code), answer.base_offset

    assert send(0, [b"a", b"b"]) == (0, 0)
    assert send(2, [b"c"]) == (0, 2)
    assert send(0, [b"a", b"b"]) == (0, 0)       # the retry: its first offset again
    assert send(9, [b"z"]) == (45, -1)           # OUT_OF_ORDER_SEQUENCE_NUMBER
    values = [r.value for _, r in kafka_parse(http_batches(server, "idempotent", 0))]
    assert values == [b"a", b"b", b"c"]


def test_a_transactional_producer_is_refused(server: Server):
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
    from kio.static.primitive import i32Timedelta
    import datetime

    _, response = call(server.kafka_address(), InitProducerIdRequest(
        transactional_id="tx", transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
    assert (int(response.error_code), response.producer_id) == (42, -1)   # INVALID_REQUEST: no coordinator


# -- refusals, with Kafka's error codes -----------------------------------------------------------
def produce_request(topic: str, partition: int, records: bytes, acks: int = 1):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.static.primitive import i32Timedelta
    import datetime

    return ProduceRequest(transactional_id=None, acks=acks, timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
                          topic_data=(TopicProduceData(name=topic, partition_data=(
                              PartitionProduceData(index=partition, records=records),)),))


def test_a_produce_is_refused_per_partition_with_kafkas_codes_and_nothing_is_written(server: Server):
    from kio.schema.produce.v9.response import ProduceResponse

    before = http_batches(server, "refusals", 0)
    one = kafka_batch([(None, b"x")])
    for topic, partition, records, acks, code in [
        ("no-such-topic", 0, one, 1, 3),         # UNKNOWN_TOPIC_OR_PARTITION
        ("refusals", 7, one, 1, 3),
        ("refusals", 0, one + one, 1, 87),       # INVALID_RECORD: a v2 produce holds exactly one batch
        ("refusals", 0, one[:-1], 1, 2),         # CORRUPT_MESSAGE: cut short
        ("refusals", 0, one, 2, 21),             # INVALID_REQUIRED_ACKS
    ]:
        correlation, response = call(server.kafka_address(), produce_request(topic, partition, records, acks),
                                     ProduceResponse)
        assert correlation == 42
        answer = response.responses[0].partition_responses[0]
        assert (answer.index, int(answer.error_code)) == (partition, code), answer
        assert answer.error_message
    assert http_batches(server, "refusals", 0) == before


def test_clients_may_not_write_or_delete_the_internal_offsets_topic(server: Server):
    from kio.schema.produce.v9.response import ProduceResponse

    server.ok("POST", "/v1/topics", json={"name": "__consumer_offsets", "partitions": 1})
    _, response = call(server.kafka_address(), produce_request("__consumer_offsets", 0, kafka_batch([(b"\0\1", b"x")])),
                       ProduceResponse)
    assert int(response.responses[0].partition_responses[0].error_code) == 17   # INVALID_TOPIC_EXCEPTION
    refused = server.post("/v1/topics/__consumer_offsets/partitions/0/records", data=kafka_batch([(b"k", b"v")]),
                          headers={"Content-Type": RECORD_BATCH})
    assert refused.status_code == 400 and refused.json()["error_code"] == "INVALID_TOPIC_EXCEPTION"
    assert server.request("DELETE", "/v1/topics/__consumer_offsets").status_code == 400
    assert http_batches(server, "__consumer_offsets", 0) == b""


def test_a_refused_acks_0_produce_closes_the_connection(server: Server):
    with connect(server.kafka_address()) as sock:
        sock.sendall(request_frame(produce_request("no-such-topic", 0, kafka_batch([(None, b"x")]), acks=0)))
        assert closed_without_answer(sock)   # Kafka's way to make an acks=0 producer look again


def test_a_fetch_out_of_range_and_of_an_unknown_partition_get_their_codes(server: Server):
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.static.primitive import i32Timedelta
    import datetime

    request = FetchRequest(replica_id=-1, max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
                           min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                           topics=(FetchTopic(topic="refusals", partitions=(
                               FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=10_000,
                                              last_fetched_epoch=-1, log_start_offset=-1,
                                              partition_max_bytes=1 << 20),
                               FetchPartition(partition=9, current_leader_epoch=-1, fetch_offset=0,
                                              last_fetched_epoch=-1, log_start_offset=-1,
                                              partition_max_bytes=1 << 20))),),
                           forgotten_topics_data=(), rack_id="")
    _, response = call(server.kafka_address(), request, FetchResponse)
    codes = {p.partition_index: int(p.error_code) for p in response.responses[0].partitions}
    assert codes == {0: 1, 9: 3}   # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION


def fetch_request(topic: str, offset: int, *, max_wait_ms: int, max_bytes: int = 1 << 20,
                  partition_max_bytes: int = 1 << 20, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                  min_bytes: int = 1):
    """A consumer's Fetch v12 of partition 0 of ``topic``."""
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i32Timedelta
    import datetime

    return FetchRequest(replica_id=-1, max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
                        min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                            partition_max_bytes=partition_max_bytes),)),),
                        forgotten_topics_data=(), rack_id="")


def fetch_at(server: Server, offset: int, *, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
             topic: str = "epochs", partition_max_bytes: int = 1 << 20, max_wait_ms: int = 10, min_bytes: int = 1):
    from kio.schema.fetch.v12.response import FetchResponse

    request = fetch_request(topic, offset, max_wait_ms=max_wait_ms, partition_max_bytes=partition_max_bytes,
                            current_leader_epoch=current_leader_epoch, last_fetched_epoch=last_fetched_epoch,
                            min_bytes=min_bytes)
    _, response = call(server.kafka_address(), request, FetchResponse)
    return response.responses[0].partitions[0]


def test_fetches_answer_whole_batches_from_the_file_or_read_below_64_kib_and_keep_no_descriptor_open(
        server: Server):
    from stratalog.records import iter_batch_infos
    from stratalog.server.sendfile import SENDFILE_ABOVE_BYTES

    for i in range(12):
        batch = kafka_batch([(b"k", b"%02d-" % i + b"x" * 8000) for _ in range(3)])
        assert server.post("/v1/topics/sendfile/partitions/0/records", data=batch,
                           headers={"Content-Type": RECORD_BATCH}).status_code == 200
    # Taken before any fetch: an answer's descriptor is closed just after its last byte went, so a look
    # right after one may still see it.
    descriptors = server.open_files()
    stored = http_batches(server, "sendfile", 0)
    ends = [b.position + b.size for b in iter_batch_infos(stored)]
    assert len(ends) == 12
    # Limits on both sides of the size above which an answer goes from the file by sendfile.
    assert 10 < ends[1] + 5 <= SENDFILE_ABOVE_BYTES < ends[4] + 100 < 1 << 20
    for _ in range(3):
        # Cut inside a batch: the whole batches before the cut; below one batch: that one batch whole.
        for offset, limit in ((0, 1 << 20), (0, ends[4] + 100), (0, 10), (9, ends[1] + 5)):
            records = fetch_at(server, offset, topic="sendfile", partition_max_bytes=limit).records
            first = offset // 3
            start = ends[first - 1] if first else 0
            whole = [end - start for end in ends[first:] if end - start <= limit] or [ends[first] - start]
            assert records == stored[start:start + whole[-1]]
        # A long poll that waits at the log end, reading again each time, and times out empty.
        assert not fetch_at(server, 36, topic="sendfile", max_wait_ms=300, min_bytes=1).records
    # The answers' file regions were closed once sent (and those of reads not sent at once too).
    assert server.open_files(settle_to=descriptors) == descriptors


def test_a_fetch_larger_than_the_socket_takes_at_once_arrives_whole_and_in_order(server: Server):
    """The region goes straight from the file as far as the socket takes it; the rest follows once
    the client reads (here only after the server's socket buffer has filled)."""
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.serial import entity_reader

    for i in range(24):
        batch = kafka_batch([(b"k", bytes([i]) * (512 * 1024))])
        assert server.post("/v1/topics/large/partitions/0/records", data=batch,
                           headers={"Content-Type": RECORD_BATCH}).status_code == 200
    stored = server.get("/v1/topics/large/partitions/0/records", params={"offset": 0, "maxBytes": 64 << 20},
                        headers={"Accept": RECORD_BATCH}).content
    assert len(stored) > 12 << 20
    request = fetch_request("large", 0, max_wait_ms=0, max_bytes=64 << 20, partition_max_bytes=64 << 20)
    with connect(server.kafka_address(), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(request_frame(request, correlation_id=7))
        time.sleep(0.5)
        frame = read_frame(sock)
    assert frame is not None
    _, used = entity_reader(FetchResponse.__header_schema__)(frame, 0)
    response, size = entity_reader(FetchResponse)(frame, used)
    assert used + size == len(frame)
    assert bytes(response.responses[0].partitions[0].records) == stored


def end_of_epoch(server: Server, leader_epoch: int, current_leader_epoch: int = -1) -> tuple[int, int, int]:
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import OffsetForLeaderEpochResponse

    _, response = call(server.kafka_address(), OffsetForLeaderEpochRequest(replica_id=-1, topics=(
        OffsetForLeaderTopic(topic="epochs", partitions=(OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch),)),)),
        OffsetForLeaderEpochResponse)
    p = response.topics[0].partitions[0]
    return int(p.error_code), p.leader_epoch, p.end_offset


def test_a_consumers_leader_epochs_are_checked_and_a_diverged_position_is_told_where_to_go_back(server: Server):
    for i in range(3):
        assert server.post("/v1/topics/epochs/partitions/0/records", data=kafka_batch([(None, b"e%d" % i)]),
                           headers={"Content-Type": RECORD_BATCH}).status_code == 200
    # OffsetsForLeaderEpoch: a lone engine leads in epoch 0, which ends at its log end.
    assert end_of_epoch(server, 0) == (0, 0, 3)
    assert end_of_epoch(server, 4) == (0, -1, -1)                        # an epoch this log never had
    assert end_of_epoch(server, 0, current_leader_epoch=1)[0] == 75     # UNKNOWN_LEADER_EPOCH
    # Fetch: a position inside the log, in the epoch the log has, reads.
    agreed = fetch_at(server, 1, current_leader_epoch=0, last_fetched_epoch=0)
    assert (int(agreed.error_code), agreed.diverging_epoch.epoch, len(kafka_parse_all(agreed.records))) == (0, -1, 2)
    # A consumer that read epoch 0 up to offset 5 read records this log no longer has: go back to 3.
    diverged = fetch_at(server, 5, last_fetched_epoch=0)
    assert int(diverged.error_code) == 0 and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
    assert int(fetch_at(server, 1, last_fetched_epoch=4).error_code) == 1      # OFFSET_OUT_OF_RANGE: no such epoch
    assert int(fetch_at(server, 1, current_leader_epoch=1).error_code) == 75   # UNKNOWN_LEADER_EPOCH


def test_librdkafka_validates_a_position_by_its_leader_epoch_and_reports_the_truncation(server: Server):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": server.kafka_address(), "group.id": "epoch-check",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    # A position past the log's end in epoch 0, as after an unclean leader change: librdkafka asks
    # OffsetsForLeaderEpoch, learns epoch 0 ends earlier here, and reports a truncated log.
    consumer.assign([TopicPartition("epochs", 0, 7, leader_epoch=0)])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is not None, (message.offset(), message.value())
            errors.append(message.error())
    consumer.close()
    assert errors and errors[0].code() == KafkaError._AUTO_OFFSET_RESET, errors
    assert "truncat" in errors[0].str().lower(), errors[0].str()


def kafka_parse_all(records: bytes) -> list:
    return list(kafka_parse(records)) if records else []


def test_api_versions_of_an_unknown_version_answers_in_version_0_with_what_is_offered(server: Server):
    from kio.schema.api_versions.v0.response import ApiVersionsResponse
    from kio.serial import entity_reader

    frame = struct.pack(">hhih", 18, 99, 5, -1)   # ApiVersions v99, correlation 5, null client id
    with connect(server.kafka_address()) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        answer = read_frame(sock)
    assert answer is not None
    assert struct.unpack_from(">i", answer)[0] == 5
    response, _ = entity_reader(ApiVersionsResponse)(answer, 4)
    assert int(response.error_code) == 35   # UNSUPPORTED_VERSION
    offered = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert offered[0] == (3, 9) and offered[1] == (4, 12) and offered[18] == (0, 3)


@pytest.mark.parametrize("frame, why", [
    (struct.pack(">i", 200 * 1024 * 1024), "larger than socket.request.max.bytes"),
    (struct.pack(">i", 3) + b"abc", "shorter than a request header"),
    (struct.pack(">ihhih", 10, 0, 2, 1, -1), "Produce v2, which Kafka 4 no longer offers"),
    (struct.pack(">ihhih", 10, 57, 0, 1, -1), "an API this listener does not serve"),
    (struct.pack(">ihhih", 10, 3, 9, 1, -1), "a Metadata request whose body is missing"),
])
def test_a_frame_that_cannot_be_served_closes_the_connection_and_the_listener_goes_on(server: Server, frame, why):
    with connect(server.kafka_address()) as sock:
        sock.sendall(frame)
        assert closed_without_answer(sock), why
    from kio.schema.metadata.v12.request import MetadataRequest
    from kio.schema.metadata.v12.response import MetadataResponse

    _, metadata = call(server.kafka_address(), MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                include_topic_authorized_operations=False),
                       MetadataResponse)
    assert {t.name for t in metadata.topics} >= {TOPIC, "refusals"}


def test_the_requests_before_a_refused_frame_are_answered_then_the_connection_closes(server: Server):
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with connect(server.kafka_address()) as sock:
        sock.sendall(b"".join(request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                            correlation_id=i) for i in range(3)) + struct.pack(">i", 200 * 1024 * 1024))
        correlations = [struct.unpack_from(">i", read_frame(sock) or b"")[0] for _ in range(3)]
        assert closed_without_answer(sock)
    assert correlations == [0, 1, 2]


def test_requests_sent_back_to_back_are_answered_in_order(server: Server):
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with connect(server.kafka_address()) as sock:
        sock.sendall(b"".join(request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                            correlation_id=i) for i in range(20)))
        correlations = [struct.unpack_from(">i", read_frame(sock) or b"")[0] for _ in range(20)]
    assert correlations == list(range(20))


@pytest.mark.parametrize("count", [3, 2000], ids=["few", "more than the listener buffers"])
def test_a_client_that_sends_requests_without_reading_and_half_closes_gets_every_answer_in_order(
        server: Server, count: int):
    """Requests at once, each frame split across writes, the last a fetch that waits for data that
    never comes, then the sending half shut: every answer still comes, in order, the fetch's after its
    wait, then the close. With few the shutdown arrives while the fetch waits; with more than a
    connection buffers before the listener stops reading it (asyncio's stream limit, 64 KiB: 2000
    frames are about 80 KiB) the reading resumes as they are answered."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    topic = f"half-closed-{count}"
    server.create_topic(topic, 1)
    waiting = fetch_request(topic, 0, max_wait_ms=300)
    frames = b"".join(request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                    correlation_id=i) for i in range(count)) + request_frame(waiting, correlation_id=count)
    with connect(server.kafka_address()) as sock:
        for start in range(0, len(frames), 1000):   # 1000 bytes a write: frames cut anywhere
            sock.sendall(frames[start:start + 1000])
        sock.shutdown(socket.SHUT_WR)
        correlations = [struct.unpack_from(">i", read_frame(sock) or b"")[0] for _ in range(count + 1)]
        assert sock.recv(1) == b""   # then the close
    assert correlations == list(range(count + 1))


def test_sigterm_answers_a_waiting_fetch_closes_idle_connections_and_exits_cleanly(tmp_path: Path):
    """Stopping the server: a connection that has been answered and waits for more closes at once, a
    fetch long-polling at the end of the log is answered (empty), and the server exits with 0 and
    nothing in its log but what a stop says."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    running = Server([tmp_path / "data"], "--no-schedule", "--kafka-listen", "127.0.0.1:0", "--max-fetch-wait-ms",
                     "30000", "--create-topic", "quiet:1").start()
    try:
        waiting = fetch_request("quiet", 0, max_wait_ms=30_000)
        with connect(running.kafka_address(), timeout=20) as idle, \
                connect(running.kafka_address(), timeout=20) as polling:
            idle.sendall(request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1")))
            assert read_frame(idle) is not None
            polling.sendall(request_frame(waiting, correlation_id=7))
            time.sleep(0.5)   # the fetch waits at the end of the log
            started = time.monotonic()
            assert running.terminate() == 0, running.log()
            assert time.monotonic() - started < 15, "the stop waited for the fetch's 30 s"
            answer = read_frame(polling)
            assert answer is not None and struct.unpack_from(">i", answer)[0] == 7
            assert closed_without_answer(polling) and closed_without_answer(idle)
    finally:
        running.terminate()
    log = running.log()
    assert "Traceback" not in log and " ERROR " not in log and "destroyed" not in log, log


# -- fuzzing the frame decoder ----------------------------------------------------------------------
def valid_frames() -> list[bytes]:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    return [
        request_frame(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")),
        request_frame(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="fuzz"),),
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=False)),
        request_frame(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
            name="fuzz", partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                          timestamp=-1),)),))),
        request_frame(produce_request("fuzz", 0, kafka_batch([(b"k", b"v")]))),
    ]


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    frame = bytearray(draw(st.sampled_from(valid_frames())))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(frame) - 1))
        choice = draw(st.integers(0, 2))
        if choice == 0:
            frame[position] = draw(st.integers(0, 255))
        elif choice == 1:
            del frame[position:position + draw(st.integers(1, 8))]
        else:
            frame[position:position] = draw(st.binary(min_size=1, max_size=8))
    return bytes(frame)


@pytest.fixture(scope="module")
def fuzz_topic(server: Server) -> str:
    server.create_topic("fuzz", 1)
    return "fuzz"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=frames())
def test_random_and_mutated_frames_are_answered_or_close_the_connection_and_never_hang(server: Server,
                                                                                     fuzz_topic: str, data: bytes):
    with connect(server.kafka_address(), timeout=20) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)   # a frame cut short must not leave the server waiting for ever
        while True:
            frame = read_frame(sock) if not _reset(sock) else None
            if frame is None:
                break
            assert len(frame) >= 4   # a whole response, then perhaps the next or the close


def _reset(sock: socket.socket) -> bool:
    try:
        sock.recv(0)
        return False
    except ConnectionResetError:
        return True


def test_after_the_fuzzing_the_listener_logged_no_untyped_error(server: Server, fuzz_topic: str):
    log = server.log()
    assert "Traceback" not in log and "Unhandled exception" not in log and "failed unexpectedly" not in log, \
        log[-5000:]
    assert "Kafka listener: closing the connection" in log   # the fuzzing did make it refuse frames


# -- administration ---------------------------------------------------------------------------------
def test_kafka_topics_creates_describes_grows_and_deletes_a_topic(server: Server, kafka_toolchain):
    address = server.kafka_address()

    def topics(*args: str) -> str:
        result = kafka_toolchain.java("org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", address, *args])
        assert result.returncode == 0, result.describe()
        return result.stdout

    assert "Created topic admin-made." in topics("--create", "--topic", "admin-made", "--partitions", "2",
                                                 "--config", "cleanup.policy=compact")
    assert server.ok("GET", "/v1/topics/admin-made")["partitionCount"] == 2
    topics("--alter", "--topic", "admin-made", "--partitions", "3")
    described = topics("--describe", "--topic", "admin-made")
    assert "PartitionCount: 3" in described and "ReplicationFactor: 1" in described
    assert "Configs: cleanup.policy=compact" in described
    assert [line.split()[3] for line in described.splitlines() if "Partition:" in line] == ["0", "1", "2"]
    topics("--delete", "--topic", "admin-made")
    assert "admin-made" not in topics("--list").split()
    assert server.get("/v1/topics/admin-made").status_code == 404


def test_the_admin_client_alters_topic_configs_and_is_refused_what_one_engine_cannot_do(server: Server):
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError, InvalidReplicationFactorError, TopicAlreadyExistsError
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse

    admin = KafkaAdminClient(bootstrap_servers=server.kafka_address())
    try:
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("three-copies", 1, 3)])
        admin.create_topics([NewTopic("configured", 1, 1, topic_configs={"retention.ms": "60000"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("configured", 1, 1)])
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"configured": NewPartitions(1)})   # can only grow
    finally:
        admin.close()

    def alter(*configs: tuple[str, int, str | None]) -> tuple[int, str | None]:
        _, response = call(server.kafka_address(), IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=2, resource_name="configured", configs=tuple(
                AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in configs)),),
            validate_only=False), IncrementalAlterConfigsResponse)
        return int(response.responses[0].error_code), response.responses[0].error_message

    assert alter(("segment.bytes", 0, "1048576"), ("cleanup.policy", 2, "compact")) == (0, None)   # SET, APPEND
    assert alter(("retention.ms", 0, "-7"))[0] == 40                                                 # INVALID_CONFIG
    assert server.ok("GET", "/v1/topics/configured")["configs"] == {
        "retention.ms": "60000", "segment.bytes": "1048576", "cleanup.policy": "compact,delete"}
    _, described = call(server.kafka_address(), DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=2, resource_name="configured", configuration_keys=("segment.bytes", "min.insync.replicas")),),
        include_synonyms=False, include_documentation=False), DescribeConfigsResponse)
    configs = {c.name: (c.value, c.config_source) for c in described.results[0].configs}
    assert configs == {"segment.bytes": ("1048576", 1), "min.insync.replicas": ("1", 5)}   # override, default


@pytest.mark.parametrize("args, said", [
    (["--kafka-advertise", "h:9092"], "--kafka-advertise needs --kafka-listen"),
    (["--kafka-listen", "nowhere"], "--kafka-listen 'nowhere': expected HOST:PORT, e.g. 127.0.0.1:9092"),
])
def test_serve_refuses_kafka_listener_flags_it_cannot_honour(tmp_path, args, said):
    from conftest import run_cli

    done = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", *args)
    assert done.returncode != 0 and said in done.stderr, done.stderr


def test_a_file_region_that_lost_bytes_since_the_read_closes_the_connection_rather_than_send_a_short_frame(
        tmp_path: Path):
    """The frame's size was written before the records: a file cut meanwhile (a truncation) cannot
    fill it, and a client must not read the next answer's bytes as these records."""
    from stratalog.broker.fetch import FileRegion
    from stratalog.server.kafka.connection import send_pieces

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"r" * 5000)
    descriptor = os.open(path, os.O_RDONLY)
    region = FileRegion.of(descriptor, 1000, 4000, str(path))
    os.close(descriptor)
    os.truncate(path, 3000)   # the region wants bytes up to 5000

    async def serve_one() -> tuple[bytes, str]:
        outcome: list[str] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await send_pieces(writer.transport, [b"\0\0\x0f\xa4", region], writer.drain)
            except ConnectionError as error:
                outcome.append(str(error))
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        received = await reader.read()   # up to the close
        writer.close()
        server.close()
        return received, outcome[0]

    received, why = asyncio.run(serve_one())
    assert received == b"\0\0\x0f\xa4" + b"r" * 2000   # what the file still had, then the close
    assert "2000 of 4000 bytes at 1000" in why
    assert region.file.closed
