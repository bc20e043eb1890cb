"""A minimal Kafka-protocol client: bench/compare.py's driver of Kafka's broker and of stratalog's Kafka listener.

Produce v9 and Fetch v12 (flexible versions, topic names) frames built with ``struct`` and the
answers read for what the benchmark checks (a partition's error code; a fetch's high watermark
and records), one request in flight per connection -- what any client must do, and nothing more,
as ``bench/http_wire.py`` does for the HTTP API. A protocol library's object graph (kafka-python's
classes cost about 21-24 µs to build and encode a request and 7-9 µs to decode its answer on this
machine, against under 1 µs and 3 µs here) would be client work that the two cores' other user,
the server under test, pays for.

The frames are Kafka's byte for byte (tests/test_bench_kafka_wire.py holds them against kafka-python's
encoding and decoding). An answer that does not parse as expected is an error naming what was found.
"""

from __future__ import annotations

import asyncio
import struct

from stratalog.records.varint import encode_unsigned_varint

PRODUCE, FETCH = 0, 1
PRODUCE_VERSION = 9   # topic names (13 switched to topic ids); flexible since 9
FETCH_VERSION = 12    # topic names (13 switched to topic ids); flexible since 12
CLIENT_ID = b"stratalog-bench"

_HEADER = struct.Struct(">hhih")          # api key, version, correlation id, client id length (request header v2)
_PRODUCE_HEAD = struct.Struct(">hi")      # acks, timeout ms (after the null transactional id)
_FETCH_HEAD = struct.Struct(">iiiibii")   # replica id, max wait, min bytes, max bytes, isolation, session id, epoch
_FETCH_PARTITION = struct.Struct(">iiqiqi")   # partition, current leader epoch, offset, last fetched epoch,
#                                               log start offset, partition max bytes
_INT16, _INT32, _INT64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def produce_frame(correlation_id: int, topic: str, partition: int, records: bytes, acks: int = 1,
                  timeout_ms: int = 30_000) -> list[bytes]:
    """A framed ProduceRequest v9 of one partition's records, as pieces to write in order. (The
    records are not copied into a frame here; asyncio's ``writelines`` on Python 3.11 joins the
    pieces all the same, as ``http_wire`` joins its head and body.)"""
    name = topic.encode()
    head = b"".join((
        _HEADER.pack(PRODUCE, PRODUCE_VERSION, correlation_id, len(CLIENT_ID)), CLIENT_ID, b"\x00",
        b"\x00", _PRODUCE_HEAD.pack(acks, timeout_ms),
        b"\x02", encode_unsigned_varint(len(name) + 1), name,        # one topic
        b"\x02", _INT32.pack(partition), encode_unsigned_varint(len(records) + 1),
    ))
    tail = b"\x00\x00\x00"   # the partition's, the topic's and the request's tagged fields
    return [_INT32.pack(len(head) + len(records) + len(tail)), head, records, tail]


def fetch_frame(correlation_id: int, topic: str, partition: int, offset: int, max_bytes: int,
                max_wait_ms: int = 0) -> bytes:
    """A framed FetchRequest v12 (a consumer's: replica id -1, no session) of one partition."""
    name = topic.encode()
    body = b"".join((
        _HEADER.pack(FETCH, FETCH_VERSION, correlation_id, len(CLIENT_ID)), CLIENT_ID, b"\x00",
        _FETCH_HEAD.pack(-1, max_wait_ms, 1, max_bytes, 0, 0, -1),
        b"\x02", encode_unsigned_varint(len(name) + 1), name,
        b"\x02", _FETCH_PARTITION.pack(partition, -1, offset, -1, -1, max_bytes), b"\x00",
        b"\x00",                      # the topic's tagged fields
        b"\x01", b"\x01", b"\x00",    # no forgotten topics, rack "", the request's tagged fields
    ))
    return _INT32.pack(len(body)) + body


class _Reader:
    """Reads a flexible-version answer's fields in order."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.data, self.pos)[0]
        self.pos += 2
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def compact_bytes(self) -> bytes | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        start = self.pos
        self.pos += length
        return self.data[start:self.pos]

    def one(self, what: str) -> None:
        count = self.uvarint() - 1
        if count != 1:
            raise ValueError(f"{what}: {count} entries where the request named one")


def produce_error(payload: bytes, correlation_id: int) -> int:
    """The partition's error code in a ProduceResponse v9 (the frame without its size)."""
    reader = _Reader(payload)
    _check_correlation(reader, correlation_id)
    reader.one("produce answer's topics")
    reader.compact_bytes()
    reader.one("produce answer's partitions")
    reader.int32()
    return reader.int16()


def fetch_answer(payload: bytes, correlation_id: int) -> tuple[int, int, bytes]:
    """(error code, high watermark, records) of the one partition in a FetchResponse v12."""
    reader = _Reader(payload)
    _check_correlation(reader, correlation_id)
    reader.int32()   # throttle time
    error = reader.int16()
    if error:
        return error, -1, b""
    reader.int32()   # session id
    reader.one("fetch answer's topics")
    reader.compact_bytes()
    reader.one("fetch answer's partitions")
    reader.int32()   # partition index
    error = reader.int16()
    high_watermark = reader.int64()
    reader.pos += 16  # last stable offset, log start offset
    aborted = reader.uvarint() - 1
    for _ in range(max(aborted, 0)):
        reader.pos += 16
        reader.skip_tags()
    reader.int32()   # preferred read replica
    records = reader.compact_bytes()
    return error, high_watermark, records or b""


def _check_correlation(reader: _Reader, correlation_id: int) -> None:
    found = reader.int32()
    if found != correlation_id:
        raise ValueError(f"an answer to request {found} where {correlation_id} was awaited")
    reader.skip_tags()   # response header v1


class KafkaWire:
    """One connection to a broker speaking Kafka's protocol, one request in flight (a closed loop)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def connect(cls, host: str, port: int) -> KafkaWire:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def produce(self, topic: str, partition: int, records: bytes, acks: int = 1) -> int:
        """The partition's error code."""
        self.correlation += 1
        self.writer.writelines(produce_frame(self.correlation, topic, partition, records, acks))
        return produce_error(await self._answer(), self.correlation)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> tuple[int, int, bytes]:
        """(error code, high watermark, records)."""
        self.correlation += 1
        self.writer.write(fetch_frame(self.correlation, topic, partition, offset, max_bytes))
        return fetch_answer(await self._answer(), self.correlation)

    async def _answer(self) -> bytes:
        size = _INT32.unpack(await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    def close(self) -> None:
        self.writer.close()
