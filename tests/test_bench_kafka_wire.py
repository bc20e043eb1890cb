"""bench/kafka_wire.py's frames are Kafka's byte for byte, and its reading of answers is kafka-python's."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from bench.kafka_wire import CLIENT_ID, fetch_answer, fetch_frame, produce_error, produce_frame

TOPIC_NAMES = ["bench", "t" * 200]   # a name past 127 bytes takes a two-byte varint length


@pytest.mark.parametrize("topic", TOPIC_NAMES)
@pytest.mark.parametrize("size", [0, 61, 300, 16_589])
def test_a_produce_frame_is_the_one_kafka_python_encodes(topic: str, size: int) -> None:
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, version=9, topic_data=[
        Topic(name=topic, partition_data=[Topic.PartitionProduceData(index=3, records=b"r" * size)])])
    request.with_header(correlation_id=70_000, client_id=CLIENT_ID.decode())
    assert b"".join(produce_frame(70_000, topic, 3, b"r" * size)) == request.encode(header=True, framed=True)


@pytest.mark.parametrize("topic", TOPIC_NAMES)
@pytest.mark.parametrize("offset", [0, 12_345, 2**40])
def test_a_fetch_frame_is_the_one_kafka_python_encodes(topic: str, offset: int) -> None:
    FetchTopic = FetchRequest.FetchTopic
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=16_384, isolation_level=0,
                           session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], version=12,
                           topics=[FetchTopic(topic=topic, partitions=[FetchTopic.FetchPartition(
                               partition=5, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=16_384)])])
    request.with_header(correlation_id=9, client_id=CLIENT_ID.decode())
    assert fetch_frame(9, topic, 5, offset, 16_384) == request.encode(header=True, framed=True)


@pytest.mark.parametrize("error", [0, 6])
def test_a_produce_answer_gives_its_partitions_error_code(error: int) -> None:
    Topic = ProduceResponse.TopicProduceResponse
    answer = ProduceResponse(version=9, throttle_time_ms=0, responses=[Topic(name="bench", partition_responses=[
        Topic.PartitionProduceResponse(index=3, error_code=error, base_offset=16, log_append_time_ms=-1,
                                       log_start_offset=0, record_errors=[], error_message=None)])])
    answer.with_header(correlation_id=4)
    assert produce_error(answer.encode(header=True), 4) == error


@pytest.mark.parametrize("aborted", [None, [], [(7, 100), (8, 200)]])
@pytest.mark.parametrize("records", [b"", b"b" * 16_589])
def test_a_fetch_answer_gives_the_error_high_watermark_and_records(aborted, records: bytes) -> None:
    Topic = FetchResponse.FetchableTopicResponse
    Partition = Topic.PartitionData
    transactions = None if aborted is None else [
        Partition.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted]
    answer = FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0, responses=[Topic(
        topic="bench", partitions=[Partition(partition_index=3, error_code=0, high_watermark=2**33,
                                             last_stable_offset=2**33, log_start_offset=0,
                                             aborted_transactions=transactions, preferred_read_replica=-1,
                                             records=records)])])
    answer.with_header(correlation_id=11)
    assert fetch_answer(answer.encode(header=True), 11) == (0, 2**33, records)


def test_an_answer_to_another_request_is_refused() -> None:
    answer = ProduceResponse(version=9, throttle_time_ms=0, responses=[])
    answer.with_header(correlation_id=5)
    with pytest.raises(ValueError, match="answer to request 5 where 6 was awaited"):
        produce_error(answer.encode(header=True), 6)



def test_a_fetched_body_is_counted_by_its_whole_batches_and_must_agree_with_the_servers_next_offset() -> None:
    from bench.service_drivers import _fetched
    from server_harness import kafka_batch

    batch = kafka_batch([(None, b"v")] * 3)   # offsets 0-2
    assert _fetched("t", 0, 0, 200, batch, "3", "10") == (len(batch), 3, 3)
    assert _fetched("t", 0, 0, 200, batch, "3", "3") == (len(batch), 3, 0)   # at the high watermark: from 0 again
    with pytest.raises(RuntimeError, match="X-Next-Offset says 5"):
        _fetched("t", 0, 0, 200, batch, "5", "10")
    with pytest.raises(RuntimeError, match=f"{len(batch) + 7} bytes holding {len(batch)}"):
        _fetched("t", 0, 0, 200, batch + b"partial", "3", "10")
    with pytest.raises(RuntimeError, match="fetch t-0 at 0: 404"):
        _fetched("t", 0, 0, 404, b'{"error_code": "UNKNOWN_TOPIC_OR_PARTITION"}', "-1", "-1")
