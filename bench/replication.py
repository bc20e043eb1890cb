"""Replication on loopback: what three copies cost a producer, and how fast a new leader takes over.

``python -m bench.replication [--seconds 5] [--rounds 3] [--records-per-batch 100] [--inflight 5]
[--failovers 5] [--transport kafka|http] [--no-kafka | --kafka-only] [--json F]``

* throughput and p99 of one producer of 100-byte records (Kafka's published replication figures
  use the same record size and one producer), ``--inflight`` requests outstanding (Kafka's
  ``max.in.flight.requests.per.connection`` is 5), batches of ``--records-per-batch``:
  - one copy, acks=1 (an engine without replication: the baseline),
  - three copies, acks=1 (followers fetch asynchronously),
  - three copies, acks=all (every in-sync replica has it before the answer);
  each as a ratio to the baseline, taken within each of ``--rounds`` rounds (the setups measured one
  after the other, ``--seconds`` each) and then the median over the rounds: a shared machine's
  speed drifts too much for a ratio of runs minutes apart. Kafka's published figures: three
  replicas kept 96% of single-copy throughput with asynchronous acks and 51% with acks=all -- but
  with one machine per broker, while our three engines share this machine.
* the same three setups on real Apache Kafka 4.3.1, three brokers on this machine, in the same
  run (``bench/kafka_cluster.py``): Kafka's ratio where ours is measured, beside the published
  one. ``--no-kafka`` leaves it out; ``--kafka-only`` runs it alone.
* failover: a steady acks=all producer; the leader is SIGKILLed and the controller told at once
  (lease detection is not in this figure: part 2's lease timeout adds to it); the time from the
  kill to the first acknowledged produce on the new leader, median of ``--failovers``.

Three ``stratalog serve`` processes and the tests' HTTP wrapper of the in-process controller
(``tests/replication_cluster.py``), all on this machine's 2 cores, with the producer: raw-batch
POSTs through ``bench/http_wire.py``'s minimal HTTP/1.1 client, one keep-alive connection per
request in flight (Kafka's side is Kafka's Java producer, ``kafka-producer-perf-test``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from replication_cluster import ClusterController, Engines  # noqa: E402
from server_harness import Server, kafka_batch  # noqa: E402
from stratalog.common.names import TopicPartition  # noqa: E402

from .http_wire import HttpWire  # noqa: E402
from .kafka_cluster import kafka_replication  # noqa: E402

TP = TopicPartition("t", 0)
SETUPS = {"single_copy_acks_1": "one copy, acks=1", "rf3_acks_1": "three copies, acks=1",
          "rf3_acks_all": "three copies, acks=all"}
# Kafka's published ratios to one copy (one producer, 100-byte records, one machine per broker).
PUBLISHED = {"single_copy_acks_1": 1.00, "rf3_acks_1": 0.96, "rf3_acks_all": 0.51}
BATCH_TYPE = "application/vnd.kafka.record-batch"


async def produce_for(url: str, seconds: float, records: int, inflight: int, acks: str) -> dict[str, float]:
    """``inflight`` requests outstanding, each on a keep-alive connection of its own (``HttpWire``: the
    producer's own machinery stays small, as Kafka's Java producer's is, and leaves the cores to the engines)."""
    batch = kafka_batch([(None, b"x" * 100)] * records)
    target = f"/v1/topics/t/partitions/0/records?acks={acks}"
    latencies: list[float] = []
    sent_bytes = 0
    deadline = time.perf_counter() + seconds
    conns = [await HttpWire.connect(url) for _ in range(inflight)]

    async def worker(conn: HttpWire) -> None:
        nonlocal sent_bytes
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            status, _, body = await conn.request("POST", target, batch, BATCH_TYPE)
            if status != 200:
                raise RuntimeError(f"produce failed: {status} {body[:500]!r}")
            latencies.append(time.perf_counter() - started)
            sent_bytes += records * 100

    try:
        began = time.perf_counter()
        await asyncio.gather(*(worker(conn) for conn in conns))
        elapsed = time.perf_counter() - began
    finally:
        for conn in conns:
            conn.close()
    latencies.sort()
    return {"mib_per_s": sent_bytes / elapsed / 2**20, "records_per_s": sent_bytes / 100 / elapsed,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000, "requests": len(latencies)}


def rounds(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The three setups measured one after the other, ``--rounds`` times, on one single-copy engine and
    one three-engine cluster kept up throughout: each ratio to one copy is taken within a round (the
    two runs a few seconds apart), then the median over the rounds. A shared machine's speed drifts by
    tens of percent over a minute; a ratio of runs minutes apart would measure the drift."""
    single = Server([root / "single"], log_path=root / "single.log").start()
    controller = ClusterController()
    (root / "rf3").mkdir()
    engines = Engines(root / "rf3", controller, 3, "min.insync.replicas=2", transport=args.transport)
    try:
        single.create_topic("t", 1)
        controller.controller.create(TP, (0, 1, 2))
        controller.settle()
        leader = engines.url(0)
        runs: list[dict[str, dict[str, float]]] = []
        for _ in range(args.rounds):
            runs.append({"single_copy_acks_1": asyncio.run(produce_for(single.base, args.seconds,
                                                                       args.records_per_batch, args.inflight, "1"))})
            for acks in ("1", "all"):
                # Followers that acks=1 left behind would make the acks=all run's first requests wait
                # for their catching up: every setup starts with all three copies whole.
                wait_caught_up(leader)
                runs[-1][f"rf3_acks_{acks}"] = asyncio.run(produce_for(leader, args.seconds, args.records_per_batch,
                                                                       args.inflight, acks))
        single.terminate()
        out: dict[str, Any] = {"rounds": runs}
        for name in SETUPS:
            figures = [run[name] for run in runs]
            out[name] = {key: statistics.median(f[key] for f in figures) for key in ("mib_per_s", "records_per_s",
                                                                                     "p99_ms")}
            out[name]["requests"] = sum(f["requests"] for f in figures)
            out[name]["round_ratios"] = [run[name]["mib_per_s"] / run["single_copy_acks_1"]["mib_per_s"]
                                         for run in runs]
            out[name]["ratio_to_one_copy"] = statistics.median(out[name]["round_ratios"])
        out["rf3_failover_ms"] = failovers(controller, engines, args.failovers)
        return out
    finally:
        if single.proc is not None and single.proc.poll() is None:
            single.terminate()
        controller.close()
        engines.stop_all()


def wait_caught_up(leader: str, timeout_s: float = 120.0) -> None:
    """Until the leader's high watermark is its log end: both followers hold all of its log."""
    import requests
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        summary = requests.get(f"{leader}/v1/topics/t/partitions/0", timeout=10).json()
        if summary["highWatermark"] == summary["logEndOffset"]:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the followers did not catch up with {leader} in {timeout_s:g} s: {summary}")


def failovers(controller: ClusterController, engines: Engines, count: int) -> list[float]:
    import requests
    session = requests.Session()
    batch = kafka_batch([(None, b"x" * 100)])
    times = []
    for _ in range(count):
        state = controller.controller.state(TP)
        victim = state.leader
        killed = time.perf_counter()
        engines.servers[victim].kill()
        controller.controller.fence(TP, victim)
        while True:
            leader = controller.controller.state(TP).leader
            try:
                reply = session.post(f"{engines.url(leader)}/v1/topics/t/partitions/0/records", data=batch,
                                     params={"acks": "all"}, headers={"Content-Type": BATCH_TYPE}, timeout=10)
                if reply.status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.001)
        times.append((time.perf_counter() - killed) * 1000)
        engines.start(victim)
        controller.controller.unfence(victim)   # registered again: it may rejoin the ISR
        controller.push(victim, TP)
        deadline = time.monotonic() + 60
        while len(controller.controller.state(TP).isr) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    return times


def print_rows(title: str, figures: dict[str, Any]) -> None:
    print(title)
    for name, label in SETUPS.items():
        row = figures[name]
        print(f"  {label:23s} {row['mib_per_s']:7.2f} MiB/s  {row['records_per_s']:>10,.0f} rec/s  "
              f"p99 {row['p99_ms']:6.1f} ms  ratio to one copy {row['ratio_to_one_copy']:.2f}  "
              f"(Kafka's published {PUBLISHED[name]:.2f})", flush=True)


def report_stratalog(results: dict[str, Any]) -> None:
    print_rows("stratalog, three engines on this machine (p99 per request):", results)
    times = results["rf3_failover_ms"]
    print(f"failover (SIGKILL of the leader → first acks=all produce acknowledged by the new leader): "
          f"median {statistics.median(times):.0f} ms over {len(times)} ({', '.join(f'{t:.0f}' for t in times)})",
          flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="of each setup in each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records-per-batch", type=int, default=100)
    parser.add_argument("--inflight", type=int, default=5)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--transport", choices=("kafka", "http"), default="kafka",
                        help="how followers fetch: the leader's Kafka listener (default) or its HTTP API")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka phase")
    which.add_argument("--kafka-only", action="store_true", help="run the Apache Kafka phase alone")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"published_ratio": PUBLISHED, "transport": args.transport}
    try:
        with tempfile.TemporaryDirectory(prefix="stratalog-replication-") as tmp:
            root = Path(tmp)
            if not args.kafka_only:
                results.update(rounds(root, args))
                report_stratalog(results)   # now: a failure of the Kafka phase must not lose these
            if not args.no_kafka:
                results["kafka"] = kafka_replication(root / "kafka", args.seconds, args.records_per_batch,
                                                     args.inflight, args.rounds)
                print_rows("Apache Kafka 4.3.1, three brokers on this machine (p99 per record, send to ack):",
                           results["kafka"])
    finally:
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
