"""The HTTP server's own CPU per request, with a client too lean to matter.

    python -m bench.http_cost [--seconds 4] [--rounds 5] [--clients 8]

``stratalog serve`` on loopback, driven by ``--clients`` keep-alive connections of
``bench/http_wire.py``'s minimal HTTP/1.1 client: the raw-batch POST
of bench/service.py (acks=1, the 16,589-byte batches of bench.workload) and its binary 16 KiB GET.
Each round runs produce then fetch for ``--seconds``. The figure is the serve process's CPU
seconds (/proc, user + system) per request, median over the rounds. On the shared 2-core VM one
round can be 10-20% off, so compare medians of at least 5 rounds, A then B, minutes apart at most.

bench.compare's service rows are throughput with an aiohttp client sharing the two cores. This
figure leaves the client out: it is what a change in the server's request path buys.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from .service_drivers import process_cpu_seconds
from .http_wire import HttpWire
from .service import RECORD_BATCH, start_server, until_ready
from .workload import TOPIC, build_pool


async def measure(base: str, pid: int, clients: int, seconds: float, rounds: int) -> dict[str, list[float]]:
    async with aiohttp.ClientSession(base) as session:
        await until_ready(session, base)
        async with session.post("/v1/topics", json={"name": TOPIC, "partitions": clients}) as reply:
            if reply.status != 201:
                raise RuntimeError(await reply.text())
    connections = [await HttpWire.connect(base) for _ in range(clients)]
    pool = build_pool()

    async def produce(conn: HttpWire, partition: int, i: int, offset: int) -> tuple[int, dict[str, str], bytes]:
        return await conn.request("POST", f"/v1/topics/{TOPIC}/partitions/{partition}/records?acks=1",
                                  pool[i % len(pool)], RECORD_BATCH)

    async def fetch(conn: HttpWire, partition: int, i: int, offset: int) -> tuple[int, dict[str, str], bytes]:
        return await conn.request("GET", f"/v1/topics/{TOPIC}/partitions/{partition}/records?offset={offset}"
                                  "&maxBytes=16384", accept=RECORD_BATCH)

    figures: dict[str, list[float]] = {"produce": [], "fetch": [], "produce (client)": [], "fetch (client)": []}
    for _ in range(rounds):
        for name, ask in (("produce", produce), ("fetch", fetch)):
            stop = False
            done = [0] * clients

            async def client(partition: int) -> None:
                conn = connections[partition]
                i = offset = 0
                while not stop:
                    status, headers, body = await ask(conn, partition, i, offset)
                    if status != 200:   # anything but 200 stops the run
                        raise RuntimeError(f"{status}: {body[:500].decode(errors='replace')}")
                    i += 1
                    following = headers.get("x-next-offset")
                    offset = int(following) if body and following is not None else 0   # start over at the end
                    done[partition] += 1

            cpu, own = process_cpu_seconds(pid), time.process_time()
            tasks = [asyncio.create_task(client(p)) for p in range(clients)]
            await asyncio.sleep(seconds)
            stop = True
            await asyncio.gather(*tasks)
            figures[name].append((process_cpu_seconds(pid) - cpu) / sum(done) * 1e6)
            figures[f"{name} (client)"].append((time.process_time() - own) / sum(done) * 1e6)
    for conn in connections:
        conn.close()
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.http_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="of each operation in each round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="stratalog-bench-http-cost-"))
    process, base = start_server(root / "data", root / "serve.log")
    try:
        started = time.perf_counter()
        figures = asyncio.run(measure(base, process.pid, args.clients, args.seconds, args.rounds))
        print(f"stratalog serve's CPU per HTTP request, {args.clients} raw keep-alive clients, {args.rounds} rounds "
              f"of {args.seconds:g} s ({time.perf_counter() - started:.0f} s):")
        for name, values in figures.items():
            print(f"  {name:16s} median {statistics.median(values):4.0f} µs  (rounds: "
                  f"{', '.join(f'{v:.0f}' for v in values)})")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
