"""Lengths in Kafka frames are checked before kio reads them (kio's reader aborts the process on an
array too long to allocate).

Every request and response class this listener offers, in every version it offers, is written by
kio from values hypothesis makes up; the guard walks each frame to its exact end. Lengths the
frame cannot hold are refused with the field's path, and a running engine refuses such a frame,
closes that connection and goes on serving.
"""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest
from kio.serial import entity_writer
from kio.static.primitive import Records

from kafka_wire import closed_without_answer, connect, read_frame, request_frame
from server_harness import Server
from stratalog.server.kafka.api_versions import SASL, SUPPORTED
from stratalog.server.kafka.codec import _classes
from stratalog.server.kafka.frame_guard import FrameLengthError, check_frame

CLASSES = sorted({(key, version, kind) for offered in (SUPPORTED, SASL) for key, (low, high) in offered.items()
                  for version in range(low, high + 1) for kind in (0, 1)})
HUGE_ARRAY = bytes.fromhex("ffffffff0f")   # a compact array of 4,294,967,294 elements
st.register_type_strategy(Records, st.binary(max_size=64))   # kio leaves record batches to the user


def entity_class(key: int, version: int, kind: int):
    return _classes(key, version)[kind]


@pytest.mark.parametrize("key, version, kind", CLASSES,
                         ids=[f"api{k}-v{v}-{'response' if r else 'request'}" for k, v, r in CLASSES])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_frame_kio_writes_is_walked_to_its_exact_end(key, version, kind, data):
    cls = entity_class(key, version, kind)
    entity = data.draw(st.from_type(cls))
    out = io.BytesIO()
    entity_writer(cls)(out, entity)
    frame = out.getvalue()
    assert check_frame(cls, frame) == len(frame)
    if frame:
        with pytest.raises(FrameLengthError):
            check_frame(cls, frame[:-1])   # one byte short: some length no longer fits


def test_an_array_longer_than_the_frame_is_refused_with_its_path():
    with pytest.raises(FrameLengthError, match=r"MetadataRequest.topics: an array .* of 4294967294 at byte 5, "
                                               r"with 3 left"):
        check_frame(MetadataRequest, HUGE_ARRAY + b"\0\0\0")


def test_without_the_guard_kio_aborts_the_process_on_that_array():
    """Why the guard exists (kio 0.6.5): if this starts passing, kio has fixed it."""
    code = ("from kio.serial import entity_reader; from kio.schema.metadata.v12.request import MetadataRequest; "
            f"entity_reader(MetadataRequest)(bytes.fromhex('{HUGE_ARRAY.hex()}') + bytes(3), 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"RUST_BACKTRACE": "0"})
    assert done.returncode == -6 and "memory allocation" in done.stderr, (done.returncode, done.stderr[-300:])


def test_the_listener_closes_a_connection_that_sends_such_a_frame_and_serves_the_next(tmp_path):
    server = Server([tmp_path / "data"], "--kafka-listen", "127.0.0.1:0").start()
    try:
        address = server.kafka_address()
        good = request_frame(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        # The same request with its topics array (a byte: empty) said to hold four billion elements;
        # two booleans and the tagged fields' count follow it.
        evil = good[4:-4] + HUGE_ARRAY + good[-3:]
        with connect(address) as sock:
            sock.sendall(len(evil).to_bytes(4, "big") + evil)
            assert closed_without_answer(sock)
        assert "MetadataRequest.topics: an array" in server.log()
        with connect(address) as sock:   # still alive: the next client is answered
            sock.sendall(good)
            assert read_frame(sock) is not None
    finally:
        server.terminate()
