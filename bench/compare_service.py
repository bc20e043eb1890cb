"""The service figures of ``bench.compare``: a real Kafka broker and ``stratalog serve`` (over HTTP and
over its Kafka listener), each driven by the closed-loop clients of ``bench/service_drivers.py``,
minimal and library, produce then fetch; and kafka-python's own clients on Kafka, informative."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import machine
from .compare_figures import FigureSet
from .compare_processes import KAFKA_JVM_OPTIONS, KAFKA_VERSION, REPO, clean_env, progress
from .service import kafka_address, start_server
from .service_drivers import DRIVERS, SERVICE_ROWS, Load, create_stratalog_topic, kafka_service, stratalog_service
from .workload import MIB, TOPIC, build_pool

SERVICE_FETCH_BYTES = 16 * 1024


def start_stratalog_serve(directory: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """``stratalog serve`` on free loopback ports, no periodic tasks, as bench/service.py starts it, with its
    Kafka listener: (process, API URL, Kafka address)."""
    process, url = start_server(directory, log_path, env=clean_env(), extra=("--kafka-listen", "127.0.0.1:0"))
    return process, url, kafka_address(process, log_path)


def kafka_python_clients(bootstrap: str, topic: str, partitions: int, seconds: float) -> dict[str, Any]:
    """Informative: kafka-python's own KafkaProducer / KafkaConsumer, 1 KiB records, 16 KiB batches."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]

    value = os.urandom(1024)
    producer = KafkaProducer(bootstrap_servers=bootstrap, batch_size=16_384, linger_ms=5, acks=1,
                             max_in_flight_requests_per_connection=5, compression_type=None)
    latencies: list[float] = []
    clock = time.perf_counter
    sent = 0
    started = clock()
    deadline = started + seconds
    while clock() < deadline:
        for _ in range(100):
            at = clock()
            producer.send(topic, value=value, partition=sent % partitions).add_callback(
                lambda _metadata, at=at: latencies.append(clock() - at))
            sent += 1
    producer.flush()
    produce_s = clock() - started
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_partition_fetch_bytes=16_384, fetch_max_wait_ms=0)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records = total = 0
    started = clock()
    deadline = started + seconds
    while clock() < deadline:
        for rows in consumer.poll(timeout_ms=100).values():
            records += len(rows)
            total += sum(len(r.value) for r in rows)
    fetch_s = clock() - started
    consumer.close()
    ordered = sorted(latencies)
    return {"records_sent": sent, "records_acked": len(ordered), "produce_seconds": produce_s,
            "produce_mib_s": len(ordered) * len(value) / MIB / produce_s,
            "produce_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000 if ordered else 0.0,
            "fetch_records": records, "fetch_seconds": fetch_s, "fetch_mib_s": total / MIB / fetch_s}


def bench_broker_class() -> Any:
    sys.path.insert(0, str(REPO / "tests"))
    import kafka_broker  # type: ignore[import-not-found]  # tests/kafka_broker.py: the interop tests' broker

    class BenchBroker(kafka_broker.KafkaBroker):  # type: ignore[misc]
        """The interop tests' broker with a broker's usual JVM settings instead of the tests' quick-start ones."""

        def _jvm(self, main_class: str, args: list[str]) -> list[str]:
            java = shutil.which("java") or "java"
            return [java, *KAFKA_JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.log4j2_path}",
                    "-cp", self.toolchain.classpath, main_class, *args]

    return BenchBroker


# Kafka's defaults where tests/kafka_broker.py lowers them for tests
BROKER_OVERRIDES = {"num.network.threads": "3", "num.io.threads": "8", "background.threads": "10",
                    "log.cleaner.dedupe.buffer.size": str(128 * MIB)}


def service(work: Path, args: argparse.Namespace, libs: Path, figures: FigureSet, details: dict[str, Any]) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from kafka_tools import KafkaToolchain  # type: ignore[import-not-found]

    broker_class = bench_broker_class()
    toolchain = KafkaToolchain(libs, KAFKA_VERSION)
    pool = build_pool()
    warmup_seconds = max(2.0, args.service_seconds / 2)
    runs: dict[str, list[dict[str, Any]]] = {"kafka": [], "stratalog": []}
    details["service"] = runs
    seconds, clients = args.service_seconds, args.clients
    for rep in range(args.repeats):
        # Which driver set runs first alternates: the first run of a fresh server is its least warm
        # (Kafka's JIT) and its log the smallest.
        order = DRIVERS if rep % 2 == 0 else DRIVERS[::-1]
        for side in ("kafka", "stratalog"):
            base = work / f"{side}-service"
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            progress(f"[{rep + 1}/{args.repeats}] {side}: service, {clients} clients, produce then fetch, "
                     f"{seconds:g} s each, {' then '.join(order)} drivers")
            loads: dict[str, list[Load]] = {}   # SERVICE_ROWS' keys -> [produce, fetch]
            informative = None
            if side == "kafka":
                broker = broker_class(toolchain, base)
                try:
                    broker.start(**BROKER_OVERRIDES)
                    assert broker.process is not None
                    pid = broker.process.pid
                    # the broker's JIT warms up on a topic of its own first, as a running broker's would be
                    broker.create_topic("warmup", {}, partitions=clients)
                    asyncio.run(kafka_service(side, broker.bootstrap, pid, "warmup", clients, warmup_seconds,
                                              SERVICE_FETCH_BYTES, pool))
                    for driver in order:
                        broker.create_topic(f"{TOPIC}-{driver}", {}, partitions=clients)
                        loads[driver] = asyncio.run(kafka_service(side, broker.bootstrap, pid, f"{TOPIC}-{driver}",
                                                                  clients, seconds, SERVICE_FETCH_BYTES, pool,
                                                                  driver))
                    progress(f"[{rep + 1}/{args.repeats}] kafka: informative, kafka-python KafkaProducer / "
                             f"KafkaConsumer, {seconds:g} s each")
                    broker.create_topic("records", {}, partitions=clients)
                    informative = kafka_python_clients(broker.bootstrap, "records", clients, seconds)
                finally:
                    broker.close()
                figures["kp_produce_mib"].add(side, informative["produce_mib_s"])
                figures["kp_produce_p99"].add(side, informative["produce_p99_ms"])
                figures["kp_fetch_mib"].add(side, informative["fetch_mib_s"])
                # Over the Kafka protocol both sides answer the very same requests: Kafka's run is its own row's.
                for driver in DRIVERS:
                    loads[f"wire-{driver}"] = loads[driver]
            else:
                process, url, kafka_address = start_stratalog_serve(base / "data", base / "serve.log")
                try:
                    for driver in order:
                        loads[driver] = asyncio.run(stratalog_service(url, process.pid, f"{TOPIC}-{driver}", clients,
                                                                      seconds, SERVICE_FETCH_BYTES, pool, driver))
                    progress(f"[{rep + 1}/{args.repeats}] stratalog: service over its Kafka listener, Kafka's "
                             f"drivers, {seconds:g} s each")
                    for driver in order:
                        topic = f"{TOPIC}-wire-{driver}"
                        asyncio.run(create_stratalog_topic(url, topic, clients))
                        loads[f"wire-{driver}"] = asyncio.run(kafka_service(
                            side, kafka_address, process.pid, topic, clients, seconds, SERVICE_FETCH_BYTES, pool,
                            driver))
                finally:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
            for key, (produce, fetch) in loads.items():
                prefix = SERVICE_ROWS[key]
                for name, load in (("produce", produce), ("fetch", fetch)):
                    figures[f"{prefix}{name}_mib"].add(side, load.mib_per_second, load.server_cpu_s)
                    figures[f"{prefix}{name}_p99"].add(side, load.p99_ms)
                    figures[f"{prefix}{name}_client_us"].add(side, load.client_us_per_request)
            runs[side].append({**{f"{key}_{load.operation}": asdict(load) for key, pair in loads.items()
                                  for load in pair},
                               "kafka_python": informative, "loadavg": machine.load_average()})
            shutil.rmtree(base, ignore_errors=True)
