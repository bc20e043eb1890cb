"""Kafka clients against stratalog's Kafka listener and against Apache Kafka, in one run.

``python -m bench.kafka_clients [--records 1000000] [--record-bytes 1024] [--runs 3] [--json F]``

librdkafka (confluent-kafka), the client most non-Java users run, with the same settings on both
sides:

* producer: ``--records`` records of ``--record-bytes`` random bytes (no key) to one partition,
  as fast as ``produce()`` accepts them (``linger.ms=5``, librdkafka's default batch size,
  ``acks=1``, no compression, idempotence off: librdkafka's defaults for both), timed
  from the first ``produce()`` to the end of ``flush()``: every record acknowledged;
* consumer: the same records read back from offset 0 by a fresh consumer (``assign``; its
  default ``fetch.max.bytes`` and ``max.partition.fetch.bytes``), timed from ``assign`` to the
  last record.

Kafka 4.3.1 is a single KRaft node from the pinned jars (``tests/kafka_broker.py``, 1 GiB heap),
warmed up by one untimed round of the same work; stratalog is ``stratalog serve --kafka-listen``
on a fresh directory, measured from its start. Each run: Kafka, then stratalog, each on a topic of
its own. The figures are MiB/s of record values and each server process's CPU seconds (user +
system) over the timed span; the client runs in this process and shares the machine's cores.
Each figure's ratio is given twice: of the two medians, and the median of each run's ratio (the
steadier of the two where the machine's speed drifts between runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kafka_broker import KafkaBroker  # noqa: E402
from kafka_tools import kafka_toolchain_or_error  # noqa: E402

from .service import kafka_address, start_server  # noqa: E402


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "enable.idempotence": False,
                         "queue.buffering.max.messages": 1_000_000})
    failures: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left or failures:
        raise SystemExit(f"produce to {bootstrap}: {left} records unacknowledged, {len(failures)} failed: "
                         f"{failures[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign-only",
                         "enable.auto.commit": False})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = 0
    deadline = time.monotonic() + 300
    while seen < records and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is not None:
                raise SystemExit(f"consume from {bootstrap}: {message.error()}")
            seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen < records:
        raise SystemExit(f"consume from {bootstrap}: {seen} of {records} records within 300 s")
    return elapsed


def measure(bootstrap: str, pid: int, topic: str, records: int, value: bytes) -> dict[str, float]:
    mib = records * len(value) / 2**20
    cpu = process_cpu(pid)
    produced = produce(bootstrap, topic, records, value)
    produce_cpu = process_cpu(pid) - cpu
    cpu = process_cpu(pid)
    consumed = consume(bootstrap, topic, records)
    consume_cpu = process_cpu(pid) - cpu
    return {"produce_mib_s": mib / produced, "produce_server_cpu_s": produce_cpu,
            "consume_mib_s": mib / consumed, "consume_server_cpu_s": consume_cpu, "mib": mib}


def start_stratalog(directory: Path, topics: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    directory.parent.mkdir(parents=True, exist_ok=True)
    log_path = directory.parent / "serve.log"
    extra = ["--kafka-listen", "127.0.0.1:0"]
    for topic in topics:
        extra += ["--create-topic", f"{topic}:1"]
    process, _ = start_server(directory, log_path, extra=tuple(extra))
    return process, kafka_address(process, log_path, ready=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    value = os.urandom(args.record_bytes)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="stratalog-kafka-clients-") as scratch:
        root = Path(scratch)
        broker = KafkaBroker(kafka_toolchain_or_error(), root / "kafka")
        broker.start(**{"num.partitions": 1})
        try:
            assert broker.process is not None
            topics = [f"run{i}" for i in range(args.runs + 1)]
            for topic in topics:
                broker.create_topic(topic, {})
            measure(broker.bootstrap, broker.process.pid, topics[0], min(args.records, 200_000), value)  # JIT
            server, address = start_stratalog(root / "stratalog" / "data", topics)
            try:
                for i in range(1, args.runs + 1):
                    kafka = measure(broker.bootstrap, broker.process.pid, topics[i], args.records, value)
                    ours = measure(address, server.pid, topics[i], args.records, value)
                    runs.append({"kafka": kafka, "stratalog": ours})
                    print(f"run {i}: produce Kafka {kafka['produce_mib_s']:.0f} MiB/s, stratalog "
                          f"{ours['produce_mib_s']:.0f}; consume Kafka {kafka['consume_mib_s']:.0f}, stratalog "
                          f"{ours['consume_mib_s']:.0f}", flush=True)
            finally:
                server.terminate()
                server.wait(60)
        finally:
            broker.stop()
    summary = {}
    for key in ("produce_mib_s", "produce_server_cpu_s", "consume_mib_s", "consume_server_cpu_s"):
        k, s = (statistics.median(r[side][key] for r in runs) for side in ("kafka", "stratalog"))
        # Each run's two sides ran back to back: the median of their ratios is the steadier figure
        # on a machine whose speed drifts between runs.
        pairs = statistics.median(r["stratalog"][key] / r["kafka"][key] for r in runs)
        summary[key] = {"kafka": k, "stratalog": s, "ratio": s / k, "median_run_ratio": pairs}
    print(f"\nlibrdkafka {args.records:,} records of {args.record_bytes} B, one partition, median of {args.runs}:")
    for key, label in (("produce_mib_s", "producer MiB/s ↑"), ("consume_mib_s", "consumer MiB/s ↑"),
                       ("produce_server_cpu_s", "server CPU s while producing ↓"),
                       ("consume_server_cpu_s", "server CPU s while consuming ↓")):
        row = summary[key]
        print(f"  {label:34s} Kafka {row['kafka']:8.2f}  stratalog {row['stratalog']:8.2f}  "
              f"stratalog/Kafka {row['ratio']:.2f}  (median of each run's ratio {row['median_run_ratio']:.2f})")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs,
                                         "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
