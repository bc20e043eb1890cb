"""bench/compare.py's service drivers: closed-loop clients of Kafka's broker and of ``stratalog serve``.

Each of ``--clients`` clients has a partition and a connection of its own and one request in
flight, all in one asyncio loop of the benchmark process, sending the same pre-built batches.
There are two sets of drivers, and each side is measured with both:

* minimal: each request built and each answer read for what the benchmark checks and no more --
  Kafka's frames by ``bench/kafka_wire.py`` (``struct``), the HTTP API's by ``bench/http_wire.py``;
* library: kafka-python's protocol classes build and read Kafka's frames (the driver this
  comparison used first), aiohttp's ClientSession sends the HTTP requests.

Why two: client and server share the machine's two cores, and the servers differ in what they
can do with a core left over. ``stratalog serve`` answers on one event loop, under one core;
Kafka's broker has network and I/O threads and takes whatever the client leaves. So the heavier
the client, the less Kafka's broker gets and the more the comparison favours stratalog, and a
single ratio would hide that. The minimal drivers show the servers with the most CPU left to
them; the library drivers show them under the clients most Python programs use. The client's CPU
per request is reported beside each.

The stratalog drivers issue bench/service.py's requests (raw-batch POST with acks=1, binary GET
with maxBytes); a fetch's records are counted from its body's complete batches, and the server's
``X-Next-Offset`` must agree with them.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .http_wire import HttpWire
from .kafka_wire import FETCH_VERSION, PRODUCE_VERSION, KafkaWire
from .service import until_ready
from .workload import MIB, RECORDS_PER_BATCH

RECORD_BATCH = "application/vnd.kafka.record-batch"
DRIVERS = ("minimal", "library")
# the figures' name prefixes of each driver's runs: over HTTP (Kafka's own for its side), and over
# stratalog's Kafka listener
SERVICE_ROWS = {"minimal": "", "library": "lib_", "wire-minimal": "wire_", "wire-library": "lib_wire_"}


@dataclass
class Load:
    """One closed-loop operation: requests, bytes and records moved, latencies, and CPU on both ends."""

    side: str
    operation: str
    requests: int
    seconds: float
    bytes: int
    records: int
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    client_cpu_s: float

    @property
    def mib_per_second(self) -> float:
        return self.bytes / MIB / self.seconds

    @property
    def client_us_per_request(self) -> float:
        return self.client_cpu_s / self.requests * 1e6 if self.requests else float("nan")


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of process ``pid`` so far (fields 14 and 15 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# The minimal drivers' requests carry no timeout of their own (HttpWire's would cost it CPU that
# KafkaWire does not pay; the library clients keep theirs); the run's end waits this long for the
# last of them (aiohttp's default total timeout).
STOP_TIMEOUT_S = 300.0

# one request: partition, per-client state -> (bytes, records); the state carries e.g. the fetch offset
Request = Callable[[int, dict[str, Any]], Any]


async def closed_loop(side: str, operation: str, clients: int, seconds: float, request: Request,
                      server_pid: int) -> Load:
    stop = asyncio.Event()
    samples: list[list[tuple[float, int, int]]] = [[] for _ in range(clients)]

    async def client(partition: int) -> None:
        state: dict[str, Any] = {"i": partition, "offset": 0}
        out = samples[partition]
        clock = time.perf_counter
        while not stop.is_set():
            started = clock()
            nbytes, records = await request(partition, state)
            out.append((clock() - started, nbytes, records))

    server0, client0 = process_cpu_seconds(server_pid), _self_cpu_seconds()
    started = time.perf_counter()
    tasks = [asyncio.create_task(client(p)) for p in range(clients)]
    await asyncio.sleep(seconds)
    stop.set()
    # Each client's last request: a stuck server ends the run with an error rather than hanging it.
    _, pending = await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
    if pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending)
        raise RuntimeError(f"{side} {operation}: a request still unanswered {STOP_TIMEOUT_S:g} s after the "
                           "run's end")
    await asyncio.gather(*tasks)   # a client's own error, as it was raised
    elapsed = time.perf_counter() - started
    server_cpu, client_cpu = process_cpu_seconds(server_pid) - server0, _self_cpu_seconds() - client0
    flat = [x for per_client in samples for x in per_client]
    latencies = sorted(x[0] for x in flat)
    p50 = statistics.median(latencies) if latencies else 0.0
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0
    load = Load(side, operation, len(flat), elapsed, sum(x[1] for x in flat), sum(x[2] for x in flat), p50 * 1000,
                p99 * 1000, server_cpu, client_cpu)
    if load.requests == 0 or load.bytes == 0:
        raise RuntimeError(f"{side} {operation}: nothing moved in {elapsed:.1f} s")
    return load


def next_offset(data: bytes, offset: int) -> tuple[int, int]:
    """(bytes of complete batches, the offset after the last complete batch) in fetched ``data``."""
    pos = last = 0
    n = len(data)
    while pos + 61 <= n:
        size = int.from_bytes(data[pos + 8: pos + 12], "big") + 12
        if pos + size > n:
            break
        last = int.from_bytes(data[pos: pos + 8], "big") + int.from_bytes(data[pos + 23: pos + 27], "big")
        pos += size
    return pos, (last + 1 if pos else offset)


# -- Kafka's protocol ---------------------------------------------------------------------------------------

class LibraryKafkaWire:
    """``KafkaWire``'s requests built and answers read by kafka-python's protocol classes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from kafka.protocol.consumer import FetchRequest, FetchResponse  # type: ignore[import-untyped]
        from kafka.protocol.producer import ProduceRequest, ProduceResponse  # type: ignore[import-untyped]

        self.reader, self.writer = reader, writer
        self.correlation = 0
        self._produce, self._produce_answer = ProduceRequest, ProduceResponse
        self._fetch, self._fetch_answer = FetchRequest, FetchResponse

    @classmethod
    async def connect(cls, host: str, port: int) -> LibraryKafkaWire:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def produce(self, topic: str, partition: int, records: bytes, acks: int = 1) -> int:
        Topic = self._produce.TopicProduceData
        request = self._produce(transactional_id=None, acks=acks, timeout_ms=30_000, version=PRODUCE_VERSION,
                                topic_data=[Topic(name=topic, partition_data=[Topic.PartitionProduceData(
                                    index=partition, records=records)])])
        answer = await self._call(request, self._produce_answer, PRODUCE_VERSION)
        return int(answer.responses[0].partition_responses[0].error_code)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> tuple[int, int, bytes]:
        FetchTopic = self._fetch.FetchTopic
        request = self._fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                              session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                              version=FETCH_VERSION, topics=[FetchTopic(topic=topic, partitions=[
                                  FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                            fetch_offset=offset, last_fetched_epoch=-1,
                                                            log_start_offset=-1, partition_max_bytes=max_bytes)])])
        answer = (await self._call(request, self._fetch_answer, FETCH_VERSION)).responses[0].partitions[0]
        return int(answer.error_code), int(answer.high_watermark), bytes(answer.records or b"")

    async def _call(self, request: Any, answer_class: Any, version: int) -> Any:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="stratalog-bench")
        self.writer.write(request.encode(header=True, framed=True))
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return answer_class.decode(await self.reader.readexactly(size), version=version, header=True)

    def close(self) -> None:
        self.writer.close()


async def kafka_service(side: str, bootstrap: str, pid: int, topic: str, clients: int, seconds: float,
                        fetch_bytes: int, pool: list[bytes], driver: str = "minimal") -> list[Load]:
    """Produce then fetch over Kafka's protocol (Produce v9 / Fetch v12), ``driver`` minimal or library."""
    wire: Any = KafkaWire if driver == "minimal" else LibraryKafkaWire
    host, port = bootstrap.rsplit(":", 1)
    conns = [await wire.connect(host, int(port)) for _ in range(clients)]

    async def produce(partition: int, state: dict[str, Any]) -> tuple[int, int]:
        batch = pool[state["i"] % len(pool)]
        state["i"] += 1
        error = await conns[partition].produce(topic, partition, batch)
        if error:
            raise RuntimeError(f"produce to {topic}-{partition}: error code {error}")
        return len(batch), RECORDS_PER_BATCH

    async def fetch(partition: int, state: dict[str, Any]) -> tuple[int, int]:
        offset = state["offset"]
        error, high_watermark, records = await conns[partition].fetch(topic, partition, offset, fetch_bytes)
        if error:
            raise RuntimeError(f"fetch {topic}-{partition} at {offset}: error code {error}")
        nbytes, following = next_offset(records, offset)
        state["offset"] = following if following < high_watermark else 0
        return nbytes, following - offset

    try:
        for partition in range(clients):  # until each partition takes a produce: its leader may still be starting
            deadline = time.monotonic() + 60
            while (error := await conns[partition].produce(topic, partition, pool[0])) != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic}-{partition} still refuses produce requests (error code {error})")
                await asyncio.sleep(0.2)
        return [await closed_loop(side, "produce", clients, seconds, produce, pid),
                await closed_loop(side, "fetch", clients, seconds, fetch, pid)]
    finally:
        for conn in conns:
            conn.close()


# -- stratalog's HTTP API -----------------------------------------------------------------------------------

async def create_stratalog_topic(base: str, topic: str, partitions: int) -> None:
    import aiohttp

    async with aiohttp.ClientSession(base) as session:
        async with session.post("/v1/topics", json={"name": topic, "partitions": partitions}) as reply:
            if reply.status != 201:
                raise RuntimeError(f"creating {topic}: {reply.status} {await reply.text()}")


def _fetched(topic: str, partition: int, offset: int, status: int, data: bytes, next_header: str,
             high_header: str) -> tuple[int, int, int]:
    """(bytes, records, next offset) of a binary fetch's answer, its header's next offset held against
    the batches the body holds."""
    if status != 200:
        raise RuntimeError(f"fetch {topic}-{partition} at {offset}: {status} {data[:200]!r}")
    nbytes, following = next_offset(data, offset)
    if nbytes != len(data) or (nbytes and following != int(next_header)):
        raise RuntimeError(f"fetch {topic}-{partition} at {offset}: {len(data)} bytes holding {nbytes} of whole "
                           f"batches up to {following}, where X-Next-Offset says {next_header}")
    following = int(next_header)
    return nbytes, max(following - offset, 0), following if following < int(high_header) else 0


async def stratalog_service(base: str, pid: int, topic: str, clients: int, seconds: float, fetch_bytes: int,
                            pool: list[bytes], driver: str = "minimal") -> list[Load]:
    """Produce then fetch against ``stratalog serve``'s HTTP API, ``driver`` minimal (HttpWire) or library
    (aiohttp's ClientSession). The clients' connections carry the data route only, as the Kafka drivers'
    carry Produce and Fetch only: the readiness wait and the topic's creation go on a session of their own
    (a connection that began with another route is aiohttp's for good, server/direct)."""
    import aiohttp

    async with aiohttp.ClientSession(base) as setup:
        await until_ready(setup, base)
    await create_stratalog_topic(base, topic, clients)
    if driver == "library":
        return await _aiohttp_service(base, pid, topic, clients, seconds, fetch_bytes, pool)
    conns = [await HttpWire.connect(base, timeout_s=None) for _ in range(clients)]
    produce_targets = [f"/v1/topics/{topic}/partitions/{p}/records?acks=1" for p in range(clients)]

    async def produce(partition: int, state: dict[str, Any]) -> tuple[int, int]:
        batch = pool[state["i"] % len(pool)]
        state["i"] += 1
        status, _, body = await conns[partition].request("POST", produce_targets[partition], batch, RECORD_BATCH)
        if status != 200:
            raise RuntimeError(f"produce to {topic}-{partition}: {status} {body[:200]!r}")
        return len(batch), RECORDS_PER_BATCH   # as the Kafka drivers count: the answer's code says it is all in

    async def fetch(partition: int, state: dict[str, Any]) -> tuple[int, int]:
        offset = state["offset"]
        target = f"/v1/topics/{topic}/partitions/{partition}/records?offset={offset}&maxBytes={fetch_bytes}"
        status, headers, data = await conns[partition].request("GET", target, accept=RECORD_BATCH)
        nbytes, records, state["offset"] = _fetched(topic, partition, offset, status, data,
                                                    headers.get("x-next-offset", "-1"),
                                                    headers.get("x-high-watermark", "-1"))
        return nbytes, records

    try:
        return [await closed_loop("stratalog", "produce", clients, seconds, produce, pid),
                await closed_loop("stratalog", "fetch", clients, seconds, fetch, pid)]
    finally:
        for conn in conns:
            conn.close()


async def _aiohttp_service(base: str, pid: int, topic: str, clients: int, seconds: float, fetch_bytes: int,
                           pool: list[bytes]) -> list[Load]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=clients * 2)
    async with aiohttp.ClientSession(base, connector=connector) as session:
        headers = {"Content-Type": RECORD_BATCH}

        async def produce(partition: int, state: dict[str, Any]) -> tuple[int, int]:
            batch = pool[state["i"] % len(pool)]
            state["i"] += 1
            async with session.post(f"/v1/topics/{topic}/partitions/{partition}/records", data=batch,
                                    headers=headers, params={"acks": "1"}) as reply:
                body = await reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"produce to {topic}-{partition}: {reply.status} {body[:200]!r}")
            return len(batch), RECORDS_PER_BATCH

        async def fetch(partition: int, state: dict[str, Any]) -> tuple[int, int]:
            offset = state["offset"]
            async with session.get(f"/v1/topics/{topic}/partitions/{partition}/records",
                                   params={"offset": offset, "maxBytes": fetch_bytes},
                                   headers={"Accept": RECORD_BATCH}) as reply:
                data = await reply.read()
                nbytes, records, state["offset"] = _fetched(topic, partition, offset, reply.status, data,
                                                            reply.headers.get("X-Next-Offset", "-1"),
                                                            reply.headers.get("X-High-Watermark", "-1"))
            return nbytes, records

        return [await closed_loop("stratalog", "produce", clients, seconds, produce, pid),
                await closed_loop("stratalog", "fetch", clients, seconds, fetch, pid)]
