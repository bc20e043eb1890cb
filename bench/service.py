"""Service benchmark (issue 4): the HTTP API's throughput and latency next to the library's, in one run.

    python -m bench.service [--seconds N] [--clients N] [--acks 1|all] [--fetch-bytes B] [--dir D] [--json F]

Workload (bench.workload's): 1 KiB records, 16 per uncompressed v2 batch
(16,589 B), a pool of 64 distinct batches built beforehand. ``--clients``
concurrent clients, each on its own partition of one topic:

* produce: each client appends batches round-robin from the pool for
  ``--seconds``; over the API a raw-batch ``POST .../partitions/{p}/records``
  (``application/vnd.kafka.record-batch``, ``acks`` as given), in the library
  ``Log.append`` (plus ``Log.flush()`` for acks=all);
* fetch: each client then reads its partition from offset 0 in fetches of
  ``--fetch-bytes`` (default 16 KiB: one batch), starting over at the end,
  for ``--seconds``; over the API a binary ``GET .../records`` (next offset
  from ``X-Next-Offset``), in the library ``Log.read``.

The API side is a real ``stratalog serve`` subprocess on loopback driven by
``bench/http_wire.py``'s minimal HTTP/1.1 client (one asyncio task and keep-alive
connection per client: what a client must do and no more, so that the client
takes as little as it can of the CPUs the server shares); the
library side runs one thread per client in this process, on a directory of its
own. Latency is per request (per call for the library); the overhead ratio is
library throughput / API throughput (and API p50 / library p50). On a small
machine the client shares the CPUs with the server, which the figures include:
the notes print the CPU count. Benchmarks print; they never assert on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from stratalog.storage.log import Log
from stratalog.storage.log_manager import open_log_manager
from stratalog.broker.topics import TopicAdmin

from .http_wire import HttpWire
from .workload import MIB, RECORDS_PER_BATCH, TOPIC, build_pool

RECORD_BATCH = "application/vnd.kafka.record-batch"
_LISTENING = re.compile(r"listening on (http://[^\s]+)")
_KAFKA_LISTENING = re.compile(r"listening for Kafka clients on [^\s]+ \(advertised as ([^\s);]+)[;)]")


@dataclass
class Figures:
    mode: str
    operation: str
    requests: int
    seconds: float
    bytes: int
    records: int
    p50_ms: float
    p99_ms: float
    cpu_seconds: float = 0.0  # CPU of the side doing the work (server process; this process for the library)

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def mib_per_second(self) -> float:
        return self.bytes / MIB / self.seconds


def _figures(mode: str, operation: str, latencies: list[float], seconds: float, total: int, records: int,
             cpu: float) -> Figures:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) if ordered else 0.0
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
    return Figures(mode, operation, len(ordered), seconds, total, records, p50 * 1000, p99 * 1000, cpu)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (the server), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the library, in this process ------------------------------------------------------------------
def library(directory: Path, clients: int, seconds: float, acks: str, fetch_bytes: int, pool: list[bytes]
            ) -> list[Figures]:
    with open_log_manager([directory]) as manager:
        TopicAdmin(manager).create_topic(TOPIC, clients)
        logs = [manager.get_log(TOPIC, p) for p in range(clients)]

        def run(operation: str, work: type[_LibraryWorker]) -> Figures:
            stop = threading.Event()
            workers = [work(log, pool, acks, fetch_bytes, stop) for log in logs]
            threads = [threading.Thread(target=w.run) for w in workers]
            started, cpu = time.perf_counter(), _own_cpu()
            for thread in threads:
                thread.start()
            stop.wait(seconds)
            stop.set()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            return _figures("library", operation, [x for w in workers for x in w.latencies], elapsed,
                            sum(w.bytes for w in workers), sum(w.records for w in workers), _own_cpu() - cpu)

        return [run("produce", _LibraryProducer), run("fetch", _LibraryFetcher)]


class _LibraryWorker:
    def __init__(self, log: Log, pool: list[bytes], acks: str, fetch_bytes: int, stop: threading.Event) -> None:
        self.log, self.pool, self.acks, self.fetch_bytes, self.stop = log, pool, acks, fetch_bytes, stop
        self.latencies: list[float] = []
        self.bytes = self.records = 0

    def run(self) -> None:
        raise NotImplementedError


class _LibraryProducer(_LibraryWorker):
    def run(self) -> None:
        clock, log, pool, fsync = time.perf_counter, self.log, self.pool, self.acks == "all"
        i = 0
        while not self.stop.is_set():
            batch = pool[i % len(pool)]
            started = clock()
            info = log.append(batch)
            if fsync:
                log.flush()
            self.latencies.append(clock() - started)
            self.bytes += info.size
            self.records += info.record_count
            i += 1


class _LibraryFetcher(_LibraryWorker):
    def run(self) -> None:
        clock, log = time.perf_counter, self.log
        offset = 0
        while not self.stop.is_set():
            started = clock()
            fetch = log.read(offset, self.fetch_bytes)
            self.latencies.append(clock() - started)
            data = fetch.data
            # the next offset: one past the last complete batch (headers only, as a consumer)
            pos = last = 0
            while pos + 61 <= len(data):
                size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
                if pos + size > len(data):
                    break
                last = int.from_bytes(data[pos : pos + 8], "big") + int.from_bytes(data[pos + 23 : pos + 27], "big")
                self.records += int.from_bytes(data[pos + 57 : pos + 61], "big")
                pos += size
            self.bytes += pos
            offset = last + 1 if pos and last + 1 < fetch.high_watermark else 0


# -- the API, against a stratalog serve subprocess ---------------------------------------------------
def start_server(directory: Path, log_path: Path, env: dict[str, str] | None = None, *, extra: tuple[str, ...] = ()
                 ) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-c", "import sys; from stratalog.cli import main; sys.exit(main())", "serve",
               "--data-dir", str(directory), "--listen", "127.0.0.1:0", "--no-schedule", *extra]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    return process, _await_in_log(process, log_path, lambda text: _LISTENING.search(text), "did not start")


def kafka_address(process: subprocess.Popen[bytes], log_path: Path, *, ready: bool = False) -> str:
    """The address a ``stratalog serve --kafka-listen`` advertises to Kafka clients, once its log names
    it (and, with ``ready``, says the server is ready: the topics given at start exist)."""
    def found(text: str) -> re.Match[str] | None:
        match = _KAFKA_LISTENING.search(text)
        return match if match and (not ready or " ready " in text) else None
    return _await_in_log(process, log_path, found, "names no Kafka listener")


def _await_in_log(process: subprocess.Popen[bytes], log_path: Path,
                  found: Callable[[str], re.Match[str] | None], failure: str) -> str:
    """The first group of what ``found`` finds in the server's log within 60 s; else the server is
    killed and the run ends with its log."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = found(log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise SystemExit(f"stratalog serve {failure}:\n{log_path.read_text(errors='replace')}")


async def until_ready(session: aiohttp.ClientSession, base: str, timeout_s: float = 60.0) -> None:
    """Until the session's server, at ``base``, answers ``/readyz`` with 200 (its directories are open)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with session.get("/readyz") as reply:
                if reply.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"stratalog serve at {base} is not ready after {timeout_s:g} s")
        await asyncio.sleep(0.1)


async def api(base: str, pid: int, clients: int, seconds: float, acks: str, fetch_bytes: int, pool: list[bytes]
              ) -> list[Figures]:
    async with aiohttp.ClientSession(base) as session:
        await until_ready(session, base)
        async with session.post("/v1/topics", json={"name": TOPIC, "partitions": clients}) as reply:
            assert reply.status == 201, await reply.text()
    conns = [await HttpWire.connect(base) for _ in range(clients)]

    async def produce(partition: int, stop: asyncio.Event, out: list[tuple[float, int, int]]) -> None:
        target = f"/v1/topics/{TOPIC}/partitions/{partition}/records?acks={acks}"
        i = partition
        while not stop.is_set():
            batch = pool[i % len(pool)]
            started = time.perf_counter()
            status, body = await conns[partition].json("POST", target, batch, RECORD_BATCH)
            if status != 200:
                raise RuntimeError(f"produce to {TOPIC}-{partition}: {status} {body}")
            out.append((time.perf_counter() - started, len(batch), body["recordCount"]))
            i += 1

    async def fetch(partition: int, stop: asyncio.Event, out: list[tuple[float, int, int]]) -> None:
        path = f"/v1/topics/{TOPIC}/partitions/{partition}/records"
        offset = 0
        while not stop.is_set():
            started = time.perf_counter()
            status, headers, data = await conns[partition].request(
                "GET", f"{path}?offset={offset}&maxBytes={fetch_bytes}", accept=RECORD_BATCH)
            if status != 200:
                raise RuntimeError(f"fetch {TOPIC}-{partition} at {offset}: {status} {data[:200]!r}")
            following, high = int(headers["x-next-offset"]), int(headers["x-high-watermark"])
            out.append((time.perf_counter() - started, len(data), (following - offset) if following > offset else 0))
            offset = following if following < high else 0

    async def run(operation: str) -> Figures:
        stop = asyncio.Event()
        results: list[list[tuple[float, int, int]]] = [[] for _ in range(clients)]
        worker = produce if operation == "produce" else fetch
        started, cpu = time.perf_counter(), _process_cpu(pid)
        tasks = [asyncio.create_task(worker(p, stop, results[p])) for p in range(clients)]
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        flat = [x for r in results for x in r]
        return _figures("api", operation, [x[0] for x in flat], elapsed, sum(x[1] for x in flat),
                        sum(x[2] for x in flat), _process_cpu(pid) - cpu)

    try:
        return [await run("produce"), await run("fetch")]
    finally:
        for conn in conns:
            conn.close()


# -- report ---------------------------------------------------------------------------------------
def report(figures: list[Figures], clients: int, acks: str, fetch_bytes: int) -> None:
    print(f"service benchmark: {clients} clients, 1 KiB records x {RECORDS_PER_BATCH} per batch, acks={acks}, "
          f"fetch maxBytes {fetch_bytes}; {os.cpu_count()} CPUs shared by client and server")
    print(f"{'operation':<9} {'mode':<8} {'req/s':>9} {'MiB/s':>8} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'CPU ms/req':>10}")
    for f in figures:
        print(f"{f.operation:<9} {f.mode:<8} {f.per_second:>9.0f} {f.mib_per_second:>8.1f} "
              f"{f.records / f.seconds:>10.0f} {f.p50_ms:>8.3f} {f.p99_ms:>8.3f} "
              f"{1000 * f.cpu_seconds / max(f.requests, 1):>10.3f}")
    by = {(f.mode, f.operation): f for f in figures}
    for operation in ("produce", "fetch"):
        lib, http = by[("library", operation)], by[("api", operation)]
        lib_cpu = lib.cpu_seconds / max(lib.requests, 1)
        http_cpu = http.cpu_seconds / max(http.requests, 1)
        print(f"API overhead, {operation}: throughput {lib.mib_per_second / http.mib_per_second:.1f}x lower, "
              f"p50 latency {http.p50_ms / lib.p50_ms:.1f}x higher, CPU per request {http_cpu / lib_cpu:.1f}x "
              f"(server's, {1000 * (http_cpu - lib_cpu):.2f} ms more)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per operation and mode (default 10)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients, one partition each (default 8)")
    parser.add_argument("--acks", choices=["1", "all"], default="1")
    parser.add_argument("--fetch-bytes", type=int, default=16 * 1024, help="maxBytes per fetch (default 16 KiB)")
    parser.add_argument("--dir", help="where to put the data directories (default: a temporary directory)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="stratalog-bench-service-", dir=args.dir))
    pool = build_pool()
    try:
        figures = library(root / "library", args.clients, args.seconds, args.acks, args.fetch_bytes, pool)
        process, base = start_server(root / "api", root / "serve.log")
        try:
            figures += asyncio.run(api(base, process.pid, args.clients, args.seconds, args.acks, args.fetch_bytes,
                                       pool))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        figures.sort(key=lambda f: (f.operation != "produce", f.mode))
        report(figures, args.clients, args.acks, args.fetch_bytes)
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(f) for f in figures], indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
