"""The compiled writer writes the bytes kio's own writer writes, faster.

Every request and response class this listener offers, in every version it offers, and their
headers: hypothesis makes up a kio entity, kio writes it, and the compiled writer writes the same
entity given as the handlers give values (dicts, lists, ints). Record batches of 32 KiB or more and file
regions are pieces of their own, not copied into the frame.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.fetch.v12.response import FetchResponse
from kio.serial import entity_writer as kio_writer
from kio.static.primitive import Records

from stratalog.broker.fetch import FileRegion
from stratalog.server.kafka.api_versions import SASL, SUPPORTED
from stratalog.server.kafka.codec import Request, _classes, write_response
from stratalog.server.kafka.compiled_writer import LARGE, entity_writer, plain

RESPONSES = sorted({(key, version) for offered in (SUPPORTED, SASL) for key, (low, high) in offered.items()
                    for version in range(low, high + 1)})
# Not offered yet, but holding what no offered one does: a nullable struct outside the tagged fields (KIP-893).
NULLABLE_STRUCTS = [ConsumerGroupHeartbeatResponse, DescribeTopicPartitionsResponse]
st.register_type_strategy(Records, st.binary(max_size=64))   # kio leaves record batches to the user


def kio_bytes(cls, entity) -> bytes:
    out = io.BytesIO()
    kio_writer(cls)(out, entity)
    return out.getvalue()


def compiled_bytes(cls, entity) -> bytes:
    pieces: list = []
    last = entity_writer(cls)(bytearray(), pieces, plain(entity))
    return b"".join(bytes(piece) for piece in [*pieces, last])


@pytest.mark.parametrize("key, version", RESPONSES, ids=[f"api{k}-v{v}" for k, v in RESPONSES])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_offered_request_and_response_is_written_as_kio_writes_it(key, version, data):
    for cls in _classes(key, version):   # a follower writes requests, the listener responses
        for entity_class in (cls, cls.__header_schema__):
            entity = data.draw(st.from_type(entity_class))
            assert compiled_bytes(entity_class, entity) == kio_bytes(entity_class, entity)


@pytest.mark.parametrize("cls", NULLABLE_STRUCTS, ids=lambda cls: cls.__module__)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_nullable_struct_is_written_as_kio_writes_it(cls, data):
    entity = data.draw(st.from_type(cls))
    assert compiled_bytes(cls, entity) == kio_bytes(cls, entity)


def fetch_answer(records) -> dict:
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5, "log_start_offset": 0,
         "aborted_transactions": None, "preferred_read_replica": -1, "records": records}]}]}


def test_a_large_record_batch_and_a_file_region_are_pieces_of_their_own(tmp_path):
    request = Request(1, 12, 7, "client", None, FetchResponse, FetchResponse.__header_schema__)
    large = b"r" * LARGE
    pieces = write_response(request, fetch_answer(large))
    assert [type(p) for p in pieces] == [bytearray, bytes, bytearray] and pieces[1] is large
    frame = b"".join(pieces)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[4:] == kio_bytes(FetchResponse.__header_schema__, FetchResponse.__header_schema__(correlation_id=7)) \
        + compiled_bytes(FetchResponse, FetchResponse(**_kio_fetch_answer(large)))

    path = tmp_path / "segment"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as file:
        region = FileRegion.of(file.fileno(), 2, 5, str(path))
        pieces = write_response(request, fetch_answer(region))
        region.close()
    assert pieces[1] is region and len(pieces) == 3
    assert int.from_bytes(pieces[0][:4], "big") == len(pieces[0]) + 5 + len(pieces[2]) - 4


def test_a_value_the_version_needs_and_the_handler_left_out_is_named():
    answer = fetch_answer(b"")
    del answer["responses"][0]["partitions"][0]["high_watermark"]
    with pytest.raises(KeyError, match=r"kio\.schema\.fetch\.v12\.response\.PartitionData needs 'high_watermark'"):
        write_response(Request(1, 12, 7, None, None, FetchResponse, FetchResponse.__header_schema__), answer)


def test_a_value_that_does_not_fit_its_field_is_named_with_its_class():
    answer = fetch_answer(b"")
    answer["responses"][0]["partitions"][0]["error_code"] = 40_000   # an int16
    with pytest.raises(ValueError, match=r"kio\.schema\.fetch\.v12\.response\.PartitionData: a value does not fit "
                                         r"its field: .*32767"):
        write_response(Request(1, 12, 7, None, None, FetchResponse, FetchResponse.__header_schema__), answer)


def _kio_fetch_answer(records: bytes) -> dict:
    from stratalog.server.kafka.entities import build
    built = build(FetchResponse, fetch_answer(records))
    return {f: getattr(built, f) for f in ("throttle_time", "error_code", "session_id", "responses")}
