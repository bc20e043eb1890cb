"""Apache Kafka 4.3.1 measured as ``bench/replication.py`` measures stratalog: three brokers on this machine.

Kafka's published replication ratios (three copies keep 0.96 of one copy's throughput at acks=1,
0.51 at acks=all) come from one machine per broker; stratalog's three engines share this machine's
cores, so the two ratios were not comparable. This module measures Kafka's ratio here, in the same
run: one producer of 100-byte records, one partition, the same three setups (one copy acks=1;
three copies acks=1; three copies acks=all with ``min.insync.replicas=2``).

The cluster is three combined nodes (``process.roles=broker,controller``) with a static three-voter
quorum (``controller.quorum.voters``): three JVMs rather than four with a dedicated controller, and
no dynamic-quorum bootstrapping to get wrong. Each node is the interop tests' broker
(``tests/kafka_broker.py``) with fixed ports, a shared cluster id, Kafka's default thread counts and
``kafka-server-start.sh``'s JVM settings with a 512 MiB heap; all on 127.0.0.1. The nodes start in
their own sessions, so a Ctrl-C reaches Python only and ``KafkaCluster.close`` stops them in order
(SIGTERM, then SIGKILL); if Python itself dies they get SIGKILL from the kernel (PR_SET_PDEATHSIG).

The producer is Kafka's ``kafka-producer-perf-test`` (``ProducerPerformance``), set up like our
client: batches of as many records as ours (``batch.size`` = the size of our batch), up to
``--inflight`` requests in flight, no compression, no idempotence (our batches carry no producer
id), and ``buffer.memory`` of ``inflight + 1`` batches so that ``send()`` blocks as our closed loop
waits instead of queueing megabytes whose wait would be all of the latency. Its p99 is per record,
from ``send()`` to the acknowledgement, in whole ms; ours is per request.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .compare_processes import KAFKA_JVM_OPTIONS, KAFKA_VERSION, kafka_libs, progress

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import kafka_broker  # noqa: E402  # the interop tests' single-node broker: its formatting, properties, helpers
from kafka_broker import _clean_env, _die_with_parent, _random_cluster_id, free_ports  # noqa: E402
from kafka_tools import KafkaToolchain  # noqa: E402
from server_harness import kafka_batch  # noqa: E402

NODES = 3
RECORD_BYTES = 100
# kafka-server-start.sh's settings (bench/compare_processes.py), but three brokers and a producer share the memory here.
HEAP = ("-Xmx512m", "-Xms512m")
JVM_OPTIONS = (*HEAP, *(o for o in KAFKA_JVM_OPTIONS if not o.startswith(("-Xmx", "-Xms"))),
               "-Duser.language=en", "-Duser.country=US")  # the summary line's numbers, whatever the locale
# Kafka's defaults where tests/kafka_broker.py lowers them for tests (as bench/compare_service.py's BROKER_OVERRIDES).
BROKER_OVERRIDES = {"num.network.threads": "3", "num.io.threads": "8", "background.threads": "10"}
PERF_CLASS = "org.apache.kafka.tools.ProducerPerformance"
STOP_TIMEOUT_S = 30
# Records of each measured run left out of its figures: the producer's JVM is new and cold each time.
PRODUCER_WARMUP_S = 2.0
# Each setup's probe runs max(PROBE_MIN_S, --seconds / 2) past its first report, reporting every PROBE_WINDOW_MS.
# Its rate is its last second's: later than PRODUCER_WARMUP_S, so its producer is as warm as the measured one's
# (a shorter probe underestimated the rate and the measured runs came out short).
PROBE_MIN_S = PRODUCER_WARMUP_S + 1.0
PROBE_WINDOW_MS = 500
WINDOW = re.compile(r"^(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \(", re.M)
SUMMARY = re.compile(
    r"^(?P<records>\d+)(?P<steady> steady state)? records sent, (?P<rate>[\d.]+) records/sec "
    r"\([\d.]+ MB/sec\), (?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$", re.M)


class ClusterNode(kafka_broker.KafkaBroker):  # type: ignore[misc]
    """One broker + controller of the cluster: fixed ports and a shared cluster id, and launched without
    waiting for it to serve (a voter alone cannot elect a quorum leader)."""

    def __init__(self, toolchain: KafkaToolchain, base_dir: Path, node_id: int, cluster_id: str,
                 ports: list[int]) -> None:
        super().__init__(toolchain, base_dir)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.port, self.controller_port = ports

    def _jvm(self, main_class: str, args: list[str]) -> list[str]:
        return [kafka_broker._java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.log4j2_path}",
                "-cp", self.toolchain.classpath, main_class, *args]

    def launch(self, voters: str) -> None:
        self._write_properties({**BROKER_OVERRIDES, "node.id": self.node_id, "controller.quorum.voters": voters})
        if not self._formatted:
            self._format()
        self._output = self.base_dir / "broker.log"
        with open(self._output, "wb") as out:
            self.process = subprocess.Popen(
                self._jvm(kafka_broker.MAIN_CLASS, [str(self.config_path)]), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=_clean_env(), preexec_fn=_die_with_parent,
                start_new_session=True)


class KafkaCluster:
    """Three combined nodes on loopback; a context manager that always stops every JVM it started."""

    def __init__(self, libs: Path, root: Path) -> None:
        toolchain = KafkaToolchain(libs, KAFKA_VERSION)
        cluster_id = _random_cluster_id()
        ports = free_ports(2 * NODES)
        self.nodes = [ClusterNode(toolchain, root / f"node-{i}", i, cluster_id, ports[2 * i - 2:2 * i])
                      for i in range(1, NODES + 1)]
        self.libs = libs

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self) -> None:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.launch(voters)
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + kafka_broker.START_TIMEOUT_S
        last: object = None
        while time.monotonic() < deadline:
            for node in self.nodes:
                node._check_alive("while the cluster was starting")
            try:
                admin = self.admin()
                try:
                    brokers = admin.describe_cluster().get("brokers", [])
                    last = brokers
                    if len([b for b in brokers if not b.get("is_fenced", False)]) == NODES:
                        return
                finally:
                    admin.close()
            except Exception as error:  # noqa: BLE001 - any client error means "not yet"
                last = error
            time.sleep(0.5)
        raise kafka_broker.KafkaBrokerError(
            f"the {NODES} brokers did not all serve within {kafka_broker.START_TIMEOUT_S} s (last: {last!r})\n"
            + "\n".join(node.describe_output() for node in self.nodes))

    def close(self) -> None:
        """SIGTERM to all at once (one at a time, the last ones would wait on a lost quorum), then SIGKILL."""
        running = [node.process for node in self.nodes if node.process is not None]
        for process in running:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node in self.nodes:
            node.process = None

    # -- topics ----------------------------------------------------------------------------------
    def admin(self) -> Any:
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="stratalog-bench",
                                request_timeout_ms=30_000)

    def create_topic(self, name: str, replicas: list[int], configs: dict[str, str]) -> None:
        """One partition on ``replicas``, the first of them its (preferred) leader, as our engine 0 is."""
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, replica_assignments={0: replicas}, topic_configs=configs)])
        finally:
            admin.close()
        self.wait_for_isr(name, replicas)

    def partition(self, topic: str) -> dict[str, Any]:
        admin = self.admin()
        try:
            for info in admin.describe_topics([topic]):
                for p in info.get("partitions", []):
                    if p.get("partition_index", p.get("partition")) == 0 and info.get("error_code", 0) == 0:
                        # kafka-python 3 names the fields as the protocol does; 2.x used shorter names.
                        return {"leader": p.get("leader_id", p.get("leader", -1)),
                                "isr": sorted(p.get("isr_nodes", p.get("isr", [])))}
            return {"leader": -1, "isr": []}
        finally:
            admin.close()

    def wait_for_isr(self, topic: str, replicas: list[int], timeout_s: float = 60) -> dict[str, Any]:
        """Until ``replicas[0]`` leads and every replica is in sync: the followers really have the log."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.partition(topic)
            if state["leader"] == replicas[0] and state["isr"] == sorted(replicas):
                return state
            if time.monotonic() > deadline:
                raise kafka_broker.KafkaBrokerError(f"{topic}-0 is {state} after {timeout_s} s, not {replicas} in "
                                                    "sync\n" + "\n".join(n.describe_output() for n in self.nodes))
            time.sleep(0.2)

    def log_bytes(self, topic: str) -> dict[int, int]:
        """Bytes of ``topic-0``'s segments on each node: three copies should be three equal logs."""
        return {node.node_id: sum(f.stat().st_size for f in (node.log_dir / f"{topic}-0").glob("*.log"))
                for node in self.nodes if (node.log_dir / f"{topic}-0").is_dir()}


# -- the producer ------------------------------------------------------------------------------------

def producer_properties(acks: str, records_per_batch: int, inflight: int) -> dict[str, str]:
    batch = len(kafka_batch([(None, b"x" * RECORD_BYTES)] * records_per_batch))  # our client's batch, in bytes
    return {"acks": acks, "batch.size": str(batch), "linger.ms": "5",
            "max.in.flight.requests.per.connection": str(inflight), "buffer.memory": str(batch * (inflight + 1)),
            "compression.type": "none", "enable.idempotence": "false"}


def perf_command(cluster: KafkaCluster, topic: str, props: dict[str, str], records: int, warmup: int,
                 *extra: str) -> list[str]:
    return [kafka_broker._java(), *JVM_OPTIONS, "-cp", f"{cluster.libs}/*", PERF_CLASS, "--topic", topic,
            "--bootstrap-server", cluster.bootstrap, "--num-records", str(records), "--warmup-records", str(warmup),
            "--record-size", str(RECORD_BYTES), "--throughput", "-1", *extra,
            "--command-property", *(f"{k}={v}" for k, v in props.items())]


def probe_rate(cluster: KafkaCluster, topic: str, props: dict[str, str], seconds: float, work: Path) -> float:
    """Records/s of this setup once warm: a producer left running ``seconds`` past its first report, then killed.

    kafka-producer-perf-test stops after a number of records, not a time; this rate sizes the measured run to
    last about ``--seconds``. The probe also warms this path of the brokers (JIT), as bench/compare_service.py's
    warm-up topic does for its broker."""
    out = work / f"probe-{topic}-{props['acks']}.out"
    command = perf_command(cluster, topic, props, 10**12, 0, "--reporting-interval", str(PROBE_WINDOW_MS))
    with open(out, "wb") as sink:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   env=_clean_env(), preexec_fn=_die_with_parent, start_new_session=True)
    try:
        started: float | None = None
        deadline = time.monotonic() + 120 + seconds
        while time.monotonic() < deadline and process.poll() is None:
            if started is None and WINDOW.search(out.read_text(errors="replace")):
                started = time.monotonic()   # the producer is connected and acknowledged: from here, warm up
            if started is not None and time.monotonic() - started >= seconds:
                break
            time.sleep(0.2)
    finally:
        process.kill()
        process.wait()
    windows = [(int(m["records"]), float(m["rate"])) for m in WINDOW.finditer(out.read_text(errors="replace"))]
    if started is None or len(windows) < 2:
        raise RuntimeError(f"{PERF_CLASS} reported no progress on {topic} (exit {process.returncode})\n"
                           f"command: {' '.join(command)}\n--- output ---\n{out.read_text(errors='replace')[-5000:]}")
    last = windows[-2:]   # the warmest second
    return sum(n for n, _ in last) / sum(n / rate for n, rate in last)


def producer_perf(cluster: KafkaCluster, topic: str, props: dict[str, str], records: int, warmup: int,
                  timeout_s: float) -> dict[str, float]:
    """One kafka-producer-perf-test run; the figures of its steady-state summary (records after ``warmup``)."""
    command = perf_command(cluster, topic, props, records, warmup)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=_clean_env(),
                          preexec_fn=_die_with_parent, start_new_session=True, check=False)
    lines = {bool(m["steady"]): m for m in SUMMARY.finditer(done.stdout)}
    steady, total = lines.get(True), lines.get(False)
    # Failed sends are printed and left out of the count: every record must have been acknowledged.
    if done.returncode != 0 or steady is None or total is None or int(total["records"]) != records:
        raise RuntimeError(f"{PERF_CLASS} failed (exit {done.returncode})\ncommand: {' '.join(command)}\n"
                           f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-5000:]}")
    rate = float(steady["rate"])
    return {"mib_per_s": rate * RECORD_BYTES / 2**20, "records_per_s": rate, "p99_ms": float(steady["p99"]),
            "p50_ms": float(steady["p50"]), "max_ms": float(steady["max"]), "records": int(steady["records"]),
            "seconds": int(steady["records"]) / rate}


def measure(cluster: KafkaCluster, topic: str, props: dict[str, str], seconds: float, work: Path) -> dict[str, Any]:
    """The probe, then a run sized by its rate to last ``PRODUCER_WARMUP_S`` (left out) + ``seconds``."""
    rate = probe_rate(cluster, topic, props, max(PROBE_MIN_S, seconds / 2), work)
    warmup = max(1, int(rate * PRODUCER_WARMUP_S))
    figures: dict[str, Any] = producer_perf(cluster, topic, props, warmup + max(1, int(rate * seconds)), warmup,
                                            timeout_s=120 + 20 * seconds)
    figures["probe_records_per_s"] = rate
    return figures


def kafka_replication(root: Path, seconds: float, records_per_batch: int, inflight: int, rounds: int = 1
                      ) -> dict[str, Any]:
    """The three setups on one three-broker cluster, one after the other, ``rounds`` times; each figure the
    median over the rounds, with the median of its ratios to Kafka's own one copy within a round."""
    progress("Kafka: jars (scripts/kafka-toolchain), then three brokers on loopback")
    libs = kafka_libs()
    out: dict[str, Any] = {"producer": producer_properties("1", records_per_batch, inflight) | {"acks": "per setup"}}
    with KafkaCluster(libs, root) as cluster:
        cluster.start()
        # Separate topics so that the one-copy log is never replicated; broker 1 leads both.
        cluster.create_topic("one", [1], {})
        cluster.create_topic("three", [1, 2, 3], {"min.insync.replicas": "2"})
        # The brokers' JIT warms up first, on every path (leader appends, follower fetches, acks=all waits) and
        # on a topic of its own: the setups below are measured in a row, so a cold start would cost the first
        # (one copy, the denominator of every ratio) the most.
        cluster.create_topic("warmup", [1, 2, 3], {"min.insync.replicas": "2"})
        progress(f"Kafka: warm-up, {seconds:g} s of acks=all on three copies")
        out["warmup_records_per_s"] = probe_rate(cluster, "warmup", producer_properties("all", records_per_batch,
                                                                                        inflight), seconds, root)
        setups = (("single_copy_acks_1", "one", "1"), ("rf3_acks_1", "three", "1"), ("rf3_acks_all", "three", "all"))
        runs: list[dict[str, dict[str, Any]]] = []
        for round_number in range(1, rounds + 1):
            runs.append({})
            for name, topic, acks in setups:
                if topic == "three":
                    # All three replicas in sync now, so acks=all below waits on both followers.
                    out[f"{name}_partition_before"] = cluster.wait_for_isr(topic, [1, 2, 3])
                progress(f"Kafka: round {round_number}/{rounds}, {name}: a probe, then about {seconds:g} s measured")
                runs[-1][name] = measure(cluster, topic, producer_properties(acks, records_per_batch, inflight),
                                         seconds, root)
        out["rf3_partition_after"] = cluster.wait_for_isr("three", [1, 2, 3])
        out["log_bytes"] = {"one": cluster.log_bytes("one"), "three": cluster.log_bytes("three")}
    out["rounds"] = runs
    for name, _, _ in setups:
        figures = [run[name] for run in runs]
        out[name] = {key: statistics.median(f[key] for f in figures) for key in ("mib_per_s", "records_per_s",
                                                                                 "p99_ms")}
        out[name]["round_ratios"] = [run[name]["mib_per_s"] / run["single_copy_acks_1"]["mib_per_s"] for run in runs]
        out[name]["ratio_to_one_copy"] = statistics.median(out[name]["round_ratios"])
    return out
