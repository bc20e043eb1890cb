"""Replication through the operator: three agents copy a Topic's partitions, and survive losing a leader.

The controller and three LogDir agents run as real processes against the real API server; the
agents keep 3 s Leases. A Topic of 6 partitions × 3 replicas with ``min.insync.replicas=2``
takes ``acks=all`` produces from two producers and is read by a tailing consumer, each sending
every request to the partition's leader as the Topic's status names it (and moving on when
told ``NOT_LEADER_OR_FOLLOWER``).

Each trial hits the agent leading a random partition, in one of three ways: SIGKILL; SIGSTOP for
longer than its Lease while a producer keeps writing to it, then SIGCONT (the zombie, which must
not acknowledge anything once replaced); or SIGKILL followed by a SIGKILL of the controller while
it elects. Its Lease lapses, the controller moves its leaderships to in-sync followers and bumps
their epochs; the agent comes back, truncates what its successors never had, catches up and
rejoins every ISR. Then, with the producers paused:
every acknowledged record is in the partition's log at the offset it was acknowledged with, the
three replicas' logs are byte-identical, and every record a consumer read is in the final log.

A Spark Structured Streaming query, given every agent's address, reads the Topic through one
such failover and ends with each acknowledged record exactly once.

``STRATALOG_KUBE_FAILOVER_TRIALS`` sets the number of trials of each kind (20 in CI, the issue's
minimum).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server_harness import kafka_batch
from stratalog.common.errors import UnknownTopicOrPartitionError
from stratalog.records import decode_records, iter_batch_infos
from stratalog_spark.store.http import HttpStore
from stratalog_operator.replica_records import broker_id

from .conftest import KubeCluster
from .roles import STRATALOG, Agent, Operator, logdir_manifests, wait_for

REPO = Path(__file__).resolve().parents[2]
NS = "failover"
LOGDIRS = ("dir-a", "dir-b", "dir-c")
TOPIC = "orders"
PARTITIONS = 6
TRIALS = int(os.environ.get("STRATALOG_KUBE_FAILOVER_TRIALS", "20"))
AGENT_ARGS = ("--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500",
              "--config", "replica.lag.time.max.ms=3000", "--config", "replica.fetch.wait.max.ms=200")


def _manifests() -> str:
    docs = logdir_manifests(LOGDIRS)
    docs.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
                f"metadata: {{name: {TOPIC}}}\n"
                f"spec: {{partitions: {PARTITIONS}, replicas: 3, config: {{min.insync.replicas: 2}}}}\n")
    return "---\n".join(docs)


class Bed:
    def __init__(self, kube: KubeCluster, root: Path) -> None:
        self.kube = kube
        self.root = root
        self.operator = Operator(kube.env, NS, root / "operator.log")
        self.agents = {n: Agent(kube.env, NS, n, [root / n / "data-0"], root / f"{n}.log", *AGENT_ARGS)
                       for n in LOGDIRS}
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {kube.token}"

    @property
    def logs(self) -> list[Path]:
        return [self.operator.log_path, *(a.log_path for a in self.agents.values())]

    def records(self, topic: str = TOPIC) -> dict[int, dict[str, Any]]:
        r = self.api.get(f"{self.kube.server}/apis/stratalog.io/v1alpha1/namespaces/{NS}/topics/{topic}",
                         verify=str(self.kube.ca), timeout=10)
        r.raise_for_status()
        return {p["partition"]: p for p in (r.json().get("status") or {}).get("partitions") or []}

    def stats(self, logdir: str, partition: int, topic: str = TOPIC) -> dict[str, Any]:
        r = requests.get(f"{self.agents[logdir].base}/v1/topics/{topic}/partitions/{partition}", timeout=10)
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result

    def partition_dir(self, logdir: str, partition: int, topic: str = TOPIC) -> Path:
        return self.root / logdir / "data-0" / f"{topic}-{partition}"

    def log_bytes(self, logdir: str, partition: int, topic: str = TOPIC) -> bytes:
        directory = self.partition_dir(logdir, partition, topic)
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    def settled(self) -> dict[int, dict[str, Any]] | None:
        """Every partition led, all three replicas in its ISR, one log end = HW on all of them, and
        each leader's engine acting on its record (it answers ListOffsets; before it has applied
        the record it refuses with 421, as a Kafka broker does before its LeaderAndIsr)."""
        records = self.records()
        if len(records) != PARTITIONS:
            return None
        for p, record in records.items():
            if record.get("leader") is None or len(record["isr"]) != 3:
                return None
            leader = self.agents[record["leader"]]
            if not leader.alive() or requests.get(f"{leader.base}/v1/topics/{TOPIC}/partitions/{p}/offsets",
                                                  params={"timestamp": -1}, timeout=10).status_code != 200:
                return None
            marks = {(s["logEndOffset"], s["highWatermark"]) for s in (self.stats(d, p) for d in LOGDIRS)}
            if len(marks) != 1 or len({m for pair in marks for m in pair}) != 1:
                return None
        return records


class Workload:
    """acks=all producers and a tailing consumer, each asking the Topic's status who leads."""

    def __init__(self, bed: Bed, *, retry_for: float = 0.0) -> None:
        self.bed = bed
        self.retry_for = retry_for   # a producer retries a record this long (a Kafka client's delivery.timeout.ms)
        self.failed: list[tuple[int, bytes, str]] = []   # records given up on
        self.leaders: dict[int, str] = {}
        self.acked: dict[tuple[int, int], bytes] = {}
        self.read: dict[tuple[int, int], bytes] = {}
        self.errors: dict[str, int] = {}
        self.pinned: tuple[str, list[int]] | None = None
        self.pinned_replies: dict[str, int] = {}
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._stop = threading.Event()
        self._sequence = 0
        self._threads = [threading.Thread(target=self._produce, args=(n,), daemon=True) for n in range(2)]
        self._threads += [threading.Thread(target=self._consume, daemon=True),
                          threading.Thread(target=self._track_leaders, daemon=True)]

    def start(self) -> None:
        self._running.set()
        for thread in self._threads:
            thread.start()

    def pause(self) -> None:
        self._running.clear()
        time.sleep(0.5)   # requests in flight end; their outcome is recorded either way

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _count(self, what: str) -> None:
        with self._lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def _track_leaders(self) -> None:
        while not self._stop.is_set():
            try:
                self.leaders = {p: r["leader"] for p, r in self.bed.records().items() if r["leader"]}
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.2)

    def pin(self, logdir: str | None, partitions: list[int]) -> None:
        """Producer 0 sends to ``logdir`` for ``partitions``, whoever leads them (None: back to leaders)."""
        self.pinned = (logdir, partitions) if logdir else None

    def _url(self, partition: int) -> str | None:
        leader = self.leaders.get(partition)
        agent = self.bed.agents.get(leader) if leader else None
        return agent.base if agent is not None and agent.alive() else None

    def _produce(self, producer: int) -> None:
        session = requests.Session()
        partition = producer
        while not self._stop.is_set():
            self._running.wait()
            partition = (partition + 1) % PARTITIONS
            url = self._url(partition)
            pinned = self.pinned if producer == 0 else None
            if pinned is not None:
                partition = pinned[1][partition % len(pinned[1])]
                url = self.bed.agents[pinned[0]].base
            if url is None:
                time.sleep(0.05)
                continue
            with self._lock:
                self._sequence += 1
                value = b"p%d-%08d" % (producer, self._sequence)
            if self.retry_for:
                self._deliver(session, partition, value)
                continue
            try:
                reply = session.post(f"{url}/v1/topics/{TOPIC}/partitions/{partition}/records",
                                     data=kafka_batch([(b"k", value)]), params={"acks": "all"},
                                     headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)
            except requests.RequestException:
                self._count("connection")
                time.sleep(0.05)
                continue
            if pinned is not None:
                code = "ok" if reply.status_code == 200 else reply.json().get("error_code", str(reply.status_code))
                with self._lock:
                    self.pinned_replies[code] = self.pinned_replies.get(code, 0) + 1
            if reply.status_code == 200:
                with self._lock:
                    self.acked[(partition, reply.json()["baseOffset"])] = value
            else:
                self._count(reply.json().get("error_code", str(reply.status_code)))
                time.sleep(0.05)

    def _deliver(self, session: requests.Session, partition: int, value: bytes) -> None:
        """Send one record until a leader acknowledges it, as a Kafka producer retries retriable errors."""
        deadline = time.monotonic() + self.retry_for
        last = ""
        while time.monotonic() < deadline:
            url = self._url(partition)
            if url is None:
                time.sleep(0.05)
                continue
            try:
                reply = session.post(f"{url}/v1/topics/{TOPIC}/partitions/{partition}/records",
                                     data=kafka_batch([(b"k", value)]), params={"acks": "all"},
                                     headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)
            except requests.RequestException as error:
                last = f"connection: {error}"
                self._count("connection")
                time.sleep(0.05)
                continue
            if reply.status_code == 200:
                with self._lock:
                    self.acked[(partition, reply.json()["baseOffset"])] = value
                return
            last = reply.json().get("error_code", str(reply.status_code))
            self._count(last)
            time.sleep(0.05)
        with self._lock:
            self.failed.append((partition, value, last))

    def _consume(self) -> None:
        session = requests.Session()
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        partition = 0
        while not self._stop.is_set():
            self._running.wait()
            partition = (partition + 1) % PARTITIONS
            url = self._url(partition)
            if url is None:
                continue
            try:
                reply = session.get(f"{url}/v1/topics/{TOPIC}/partitions/{partition}/records",
                                    params={"offset": offsets[partition], "maxWaitMs": 50},
                                    headers={"Accept": "application/vnd.kafka.record-batch"}, timeout=30)
            except requests.RequestException:
                continue
            if reply.status_code != 200:
                continue
            for offset, value in records_of(reply.content):
                if offset >= offsets[partition]:
                    with self._lock:
                        self.read[(partition, offset)] = value
                    offsets[partition] = offset + 1


def records_of(data: bytes) -> Iterator[tuple[int, bytes]]:
    for info in iter_batch_infos(data):
        for record in decode_records(data[info.position: info.position + info.size]):
            assert record.value is not None
            yield record.offset, record.value


@pytest.fixture(scope="module")
def bed(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    bed = Bed(kube_cluster, tmp_path_factory.mktemp("failover"))
    bed.operator.start()
    for agent in bed.agents.values():
        agent.start()
    kube_cluster.kubectl_run("-n", NS, "apply", "-f", "-", input=_manifests())
    try:
        yield bed
    finally:
        for role in (*bed.agents.values(), bed.operator):
            role.stop()


@pytest.fixture(autouse=True)
def every_role_up(request: pytest.FixtureRequest) -> None:
    """Each test starts with the controller and every agent running: one test's failure (an agent
    it stopped and never restarted) must not fail the tests after it."""
    if "bed" in request.fixturenames:
        bed: Bed = request.getfixturevalue("bed")
        for role in (bed.operator, *bed.agents.values()):
            if not role.alive():
                role.start()


def check_replicas(bed: Bed, acked: dict[tuple[int, int], bytes], when: str) -> dict[int, dict[int, bytes]]:
    """The three replicas of every partition are byte-identical and hold every acknowledged record."""
    finals = {}
    for p in range(PARTITIONS):
        logs = {d: bed.log_bytes(d, p) for d in LOGDIRS}
        assert len(set(logs.values())) == 1, f"{when}: the replicas of partition {p} differ"
        finals[p] = dict(records_of(logs[LOGDIRS[0]]))
    lost = {k: v for k, v in acked.items() if finals[k[0]].get(k[1]) != v}
    assert not lost, f"{when}: acknowledged records lost or moved: {sorted(lost.items())[:5]}"
    return finals


def test_an_acknowledged_record_is_on_all_three_replicas(bed):
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    records = bed.records()
    leader = bed.agents[records[0]["leader"]]
    follower = bed.agents[next(d for d in LOGDIRS if d != records[0]["leader"])]
    reply = requests.post(f"{leader.base}/v1/topics/{TOPIC}/partitions/0/records", params={"acks": "all"},
                          json={"records": [{"key": "k", "value": "v1"}]}, timeout=30)
    assert reply.status_code == 200, reply.text
    refused = requests.post(f"{follower.base}/v1/topics/{TOPIC}/partitions/0/records",
                            json={"records": [{"value": "v2"}]}, timeout=30)
    assert refused.status_code == 421 and refused.json()["error_code"] == "NOT_LEADER_OR_FOLLOWER", refused.text
    assert refused.json()["leader"] == {"brokerId": broker_id(leader.logdir), "url": leader.base,
                                        "leaderEpoch": records[0]["leaderEpoch"]}   # where to go instead
    # The CLI, given a follower, follows that answer to the leader.
    cli = subprocess.run([*STRATALOG, "consume", "--server", follower.base, "--topic", TOPIC, "--partition", "0"],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0 and "v1" in cli.stdout, (cli.stdout, cli.stderr)
    # So does the Spark data source's store (option url), on the executors' side.
    def no_loss(*where: object) -> None:
        raise AssertionError(f"data loss reported at {where}")
    data = b"".join(HttpStore(follower.base).read_batches(TOPIC, 0, 0, 1, no_loss))
    assert [v for _, v in records_of(data)] == [b"v1"]
    wait_for("the record on every replica", bed.settled, timeout=60, logs=bed.logs)
    values = {d: [v for _, v in records_of(bed.log_bytes(d, 0))] for d in LOGDIRS}
    assert all(v == [b"v1"] for v in values.values()), values


def sigkill_a_leader(bed: Bed, workload: Workload, rng: random.Random, trial: int) -> str:
    records = bed.records()
    victim: str = records[rng.randrange(PARTITIONS)]["leader"]
    bed.agents[victim].kill()
    wait_moved(bed, victim, [p for p, r in records.items() if r["leader"] == victim], trial)
    time.sleep(rng.uniform(0.0, 1.0))          # the others go on without it for a while
    bed.agents[victim].start()
    return victim


def pause_a_leader_past_its_lease(bed: Bed, workload: Workload, rng: random.Random, trial: int) -> str:
    """The zombie: SIGSTOP while one producer keeps writing to it; SIGCONT once it has been replaced."""
    records = bed.records()
    victim: str = records[rng.randrange(PARTITIONS)]["leader"]
    led = [p for p, r in records.items() if r["leader"] == victim]
    workload.pin(victim, led)
    time.sleep(0.3)
    agent = bed.agents[victim]
    assert agent.proc is not None
    agent.proc.send_signal(signal.SIGSTOP)
    try:
        wait_moved(bed, victim, led, trial)
        time.sleep(rng.uniform(0.0, 1.0))
    finally:
        agent.proc.send_signal(signal.SIGCONT)
    time.sleep(rng.uniform(0.5, 1.5))          # the zombie's producer goes on after it wakes
    workload.pin(None, [])
    return victim


def sigkill_the_controller_mid_failover(bed: Bed, workload: Workload, rng: random.Random, trial: int) -> str:
    records = bed.records()
    victim: str = records[rng.randrange(PARTITIONS)]["leader"]
    bed.agents[victim].kill()
    time.sleep(rng.uniform(0.0, 4.0))          # before, during or after the Lease lapses and elections run
    bed.operator.kill()
    time.sleep(rng.uniform(0.0, 1.0))
    bed.operator.start()
    wait_moved(bed, victim, [p for p, r in records.items() if r["leader"] == victim], trial)
    bed.agents[victim].start()
    return victim


def wait_moved(bed: Bed, victim: str, led: list[int], trial: int) -> None:
    wait_for(f"trial {trial}: {victim}'s leaderships to move",
             lambda: all(r["leader"] not in (None, victim) and victim not in r["isr"]
                         for p, r in bed.records().items() if p in led),
             timeout=60, logs=bed.logs)


@pytest.mark.parametrize("fault", [sigkill_a_leader, pause_a_leader_past_its_lease,
                                   sigkill_the_controller_mid_failover],
                         ids=["SIGKILL of a leader's agent", "SIGSTOP of a leader past its Lease (zombie)",
                              "SIGKILL of the controller mid-failover"])
def test_acknowledged_records_survive(bed, fault):
    rng = random.Random(int(os.environ.get("STRATALOG_KUBE_FAILOVER_SEED", "15")))
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    workload = Workload(bed)
    workload.start()
    try:
        for trial in range(TRIALS):
            time.sleep(rng.uniform(0.5, 1.5))
            victim = fault(bed, workload, rng, trial)
            workload.pause()
            wait_for(f"trial {trial}: {victim} back in every ISR, one log end everywhere", bed.settled,
                     timeout=90, logs=bed.logs)
            check_replicas(bed, workload.acked, f"trial {trial}")
            workload.resume()
    finally:
        workload.stop()
    wait_for("the last records replicated", bed.settled, timeout=90, logs=bed.logs)
    finals = check_replicas(bed, workload.acked, "at the end")
    phantom = {k: v for k, v in workload.read.items() if finals[k[0]].get(k[1]) != v}
    assert not phantom, f"a consumer read records that are not in the final log: {sorted(phantom.items())[:5]}"
    assert len(workload.acked) > 10 * TRIALS and workload.read, (len(workload.acked), workload.errors)
    if fault is pause_a_leader_past_its_lease:
        assert workload.pinned_replies, "no request reached a paused leader"
    print(f"{fault.__name__}: {TRIALS} trials, {len(workload.acked)} acknowledged, {len(workload.read)} read, "
          f"errors {workload.errors}, answers of paused leaders {workload.pinned_replies}")


def test_a_rolling_controlled_shutdown_under_load_fails_no_produce(bed):
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    workload = Workload(bed, retry_for=30.0)
    workload.start()
    try:
        for name in LOGDIRS:
            time.sleep(1.0)
            agent = bed.agents[name]
            # SIGTERM while kopf is still starting can hang kopf's stop (seen once in CI, right after
            # the previous test restarted this agent): stop it only once its handlers have run.
            wait_for(f"{name}'s kopf handlers running", lambda: 'stratalog_agent_reconciles_total{kind="Topic"'
                     in agent.metrics(), logs=bed.logs)
            led = [p for p, r in bed.records().items() if r["leader"] == name]
            assert agent.stop() == 0, agent.log()[-3000:]
            assert "controlled shutdown: no leadership left here" in agent.log(), agent.log()[-3000:]
            records = bed.records()
            assert all(records[p]["leader"] not in (None, name) for p in led), records
            agent.start()
            wait_for(f"{name} back in every ISR", lambda: all(len(r["isr"]) == 3 for r in bed.records().values()),
                     timeout=90, logs=bed.logs)
    finally:
        workload.stop()
    assert not workload.failed, f"produces failed after retries: {workload.failed[:5]} ({workload.errors})"
    wait_for("the last records replicated", bed.settled, timeout=90, logs=bed.logs)
    check_replicas(bed, workload.acked, "after the rolling restart")
    # Leadership went back to each partition's first replica once it was in sync again.
    wait_for("the preferred replicas leading", lambda: all(r["leader"] == r["replicas"][0]
                                                           for r in bed.records().values()), logs=bed.logs)
    moves = bed.operator.metrics()
    assert 'stratalog_operator_partition_elections_total{reason="ControlledShutdown"}' in moves
    assert 'stratalog_operator_partition_elections_total{reason="PreferredLeader"}' in moves
    assert len(workload.acked) > 100, (len(workload.acked), workload.errors)
    print(f"rolling restart: {len(workload.acked)} acknowledged, none failed; retried errors {workload.errors}")


def test_a_spark_stream_given_every_agent_reads_each_acknowledged_record_once_across_a_leader_failover(
        bed, spark, tmp_path):
    """Spark's data source, option url listing the agents (the one about to die first), as a
    Kafka client lists bootstrap servers: its micro-batches go on while a leader is SIGKILLed and
    replaced, and the stream ends up with every acknowledged record exactly once at its offset,
    and with nothing that is not in the final log."""
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    victim: str = bed.records()[0]["leader"]
    urls = ",".join(bed.agents[d].base for d in sorted(LOGDIRS, key=lambda d: d != victim))
    stream = (spark.readStream.format("stratalog").option("url", urls).option("subscribe", TOPIC)
              .option("startingOffsets", "latest").load()
              .select("partition", "offset", "value")
              .writeStream.format("memory").queryName("failover_stream")
              .option("checkpointLocation", str(tmp_path / "checkpoint"))
              .trigger(processingTime="500 milliseconds").start())
    workload = Workload(bed, retry_for=30.0)
    try:
        wait_for("the stream's first micro-batch", lambda: stream.lastProgress is not None, timeout=120,
                 logs=bed.logs)
        workload.start()
        time.sleep(3.0)
        led = [p for p, r in bed.records().items() if r["leader"] == victim]
        bed.agents[victim].kill()
        wait_moved(bed, victim, led, 0)
        time.sleep(3.0)   # producers and the stream go on with the new leaders
        workload.stop()

        def streamed() -> dict[tuple[int, int], list[bytes]]:
            found: dict[tuple[int, int], list[bytes]] = {}
            for row in spark.sql("SELECT partition, offset, value FROM failover_stream").collect():
                found.setdefault((row["partition"], row["offset"]), []).append(bytes(row["value"]))
            return found

        wait_for("the stream to read every acknowledged record",
                 lambda: stream.exception() is None and set(workload.acked) <= set(streamed()),
                 timeout=180, interval=1.0, logs=bed.logs)
        assert stream.isActive and stream.exception() is None, stream.exception()
        got = streamed()
    finally:
        workload.stop()
        stream.stop()
        if not bed.agents[victim].alive():
            bed.agents[victim].start()
    assert not workload.failed, f"produces failed after retries: {workload.failed[:5]} ({workload.errors})"
    assert {k for k, v in got.items() if len(v) > 1} == set(), "records streamed twice"
    assert all(got[k] == [v] for k, v in workload.acked.items())
    wait_for(f"{victim} back in every ISR, one log end everywhere", bed.settled, timeout=90, logs=bed.logs)
    finals = check_replicas(bed, workload.acked, "after the stream's failover")
    phantom = {k: v for k, v in got.items() if finals[k[0]].get(k[1]) != v[0]}
    assert not phantom, f"the stream read records that are not in the final log: {sorted(phantom.items())[:5]}"
    assert len(workload.acked) > 50 and led, (len(workload.acked), led)
    print(f"spark stream through a failover of {victim}: {len(got)} records streamed, "
          f"{len(workload.acked)} acknowledged; retried errors {workload.errors}")


def test_with_no_isr_member_alive_a_partition_stays_offline_until_unclean_election_is_enabled(bed):
    """Kafka's unclean.leader.election.enable, read from the Topic's config: with it off, a partition
    whose only in-sync replica is down waits for it (no leader, nothing acknowledged); turned on, the
    controller elects the out-of-sync replica, and what only the old leader had is lost for good:
    the old leader, back, truncates to its successor's log."""
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    topic = "lonely"

    def apply(unclean: str) -> None:
        bed.kube.kubectl_run("-n", NS, "apply", "-f", "-", input=(
            "apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
            f"metadata: {{name: {topic}}}\nspec: {{partitions: 1, replicas: 2, config: "
            f"{{min.insync.replicas: 1, unclean.leader.election.enable: {unclean}}}}}\n"))

    def record() -> dict[str, Any]:
        return bed.records(topic).get(0) or {}

    def produce(logdir: str, values: list[bytes]) -> None:
        for value in values:
            reply = requests.post(f"{bed.agents[logdir].base}/v1/topics/{topic}/partitions/0/records",
                                  data=kafka_batch([(b"k", value)]), params={"acks": "all"},
                                  headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)
            assert reply.status_code == 200, reply.text

    def leads(logdir: str) -> None:
        """A Kafka client retries NOT_LEADER until the elected broker has applied the election."""
        wait_for(f"{logdir} acting as leader", lambda: requests.get(
            f"{bed.agents[logdir].base}/v1/topics/{topic}/partitions/0/offsets", params={"timestamp": -1},
            timeout=10).status_code == 200, timeout=30, logs=bed.logs)

    apply("false")
    first = wait_for("the two replicas in sync",
                     lambda: (r := record()) and r.get("leader") and len(r["isr"]) == 2 and r, timeout=60,
                     logs=bed.logs)
    leader, follower = first["leader"], next(d for d in first["replicas"] if d != first["leader"])
    leads(leader)
    produce(leader, [b"both-0", b"both-1"])        # on both replicas
    bed.agents[follower].kill()
    wait_for(f"{follower} out of the ISR", lambda: record()["isr"] == [leader], timeout=60, logs=bed.logs)
    produce(leader, [b"alone-0", b"alone-1"])      # acknowledged by the only in-sync replica
    bed.agents[leader].kill()
    bed.agents[follower].start()
    offline = wait_for("the partition offline", lambda: (r := record()) and r.get("leader") is None and r, timeout=60,
                       logs=bed.logs)
    assert offline["isr"] == [leader]               # the last in-sync replica is remembered
    time.sleep(3 * 3.0)                             # three Lease timeouts: no election comes
    assert record().get("leader") is None and record()["leaderEpoch"] == offline["leaderEpoch"], record()
    refused = requests.post(f"{bed.agents[follower].base}/v1/topics/{topic}/partitions/0/records",
                            json={"records": [{"value": "nobody-leads"}]}, timeout=30)
    assert refused.status_code == 421, refused.text

    apply("true")
    unclean = wait_for(f"{follower} elected uncleanly", lambda: (r := record()).get("leader") == follower and r,
                       timeout=60, logs=bed.logs)
    assert unclean["isr"] == [follower] and unclean["leaderEpoch"] == offline["leaderEpoch"] + 1, unclean
    assert 'stratalog_operator_partition_elections_total{reason="Unclean"}' in bed.operator.metrics()
    leads(follower)
    produce(follower, [b"after-0"])
    bed.agents[leader].start()
    wait_for(f"{leader} truncated and back in the ISR", lambda: len(record()["isr"]) == 2 and len(
        {(s["logEndOffset"], s["highWatermark"]) for s in (bed.stats(d, 0, topic) for d in (leader, follower))}) == 1,
        timeout=90, logs=bed.logs)
    logs = {d: bed.log_bytes(d, 0, topic) for d in (leader, follower)}
    assert logs[leader] == logs[follower]
    assert [v for _, v in records_of(logs[leader])] == [b"both-0", b"both-1", b"after-0"]
    bed.kube.kubectl_run("-n", NS, "delete", "topic", topic)


def test_a_retained_topic_deleted_stops_replicating_and_recreated_under_its_name_serves_again(bed):
    """deletionPolicy Retain keeps a deleted Topic's data on its LogDirs, but the partitions stop
    being replicas (Kafka's StopReplica without deletion): nothing more is acknowledged on them. A
    Topic made again under the same name starts its partition records afresh at leader epoch 0; its
    agents take them up (an engine that still held the old partition state at a higher epoch would
    ignore them as stale), lead and follow again, and the retained records are still there."""
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    topic = "kept"
    manifest = ("apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
                f"metadata: {{name: {topic}}}\nspec: {{partitions: 1, replicas: 2, deletionPolicy: Retain, "
                "config: {min.insync.replicas: 2}}\n")

    def record() -> dict[str, Any]:
        return bed.records(topic).get(0) or {}

    def produce(logdir: str, value: bytes) -> requests.Response:
        return requests.post(f"{bed.agents[logdir].base}/v1/topics/{topic}/partitions/0/records",
                             data=kafka_batch([(b"k", value)]), params={"acks": "all"},
                             headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)

    def led_in_sync() -> dict[str, Any] | None:
        r = record()
        if not r.get("leader") or len(r["isr"]) != 2:
            return None
        answer = requests.get(f"{bed.agents[r['leader']].base}/v1/topics/{topic}/partitions/0/offsets",
                              params={"timestamp": -1}, timeout=10)
        return r if answer.status_code == 200 else None

    bed.kube.kubectl_run("-n", NS, "apply", "-f", "-", input=manifest)
    first = wait_for("the two replicas in sync", led_in_sync, timeout=60, logs=bed.logs)
    for value in (b"before-0", b"before-1"):
        reply = produce(first["leader"], value)
        assert reply.status_code == 200, reply.text
    # A failover first, so that the engines hold the old partition at a leader epoch above 0.
    bed.agents[first["leader"]].kill()
    wait_for("the leadership moved", lambda: (r := record()).get("leader") not in (None, first["leader"]),
             timeout=60, logs=bed.logs)
    bed.agents[first["leader"]].start()
    moved = wait_for("both replicas in sync again", led_in_sync, timeout=60, logs=bed.logs)
    assert moved["leaderEpoch"] >= 1, moved

    bed.kube.kubectl_run("-n", NS, "delete", "topic", topic, "--timeout=60s")
    after_delete = produce(moved["leader"], b"after-delete")
    assert after_delete.status_code == 421, after_delete.text

    bed.kube.kubectl_run("-n", NS, "apply", "-f", "-", input=manifest)
    again = wait_for("the recreated Topic led and in sync", led_in_sync, timeout=60, logs=bed.logs)
    assert again["leaderEpoch"] == 0, again
    reply = produce(again["leader"], b"recreated-0")
    assert reply.status_code == 200, reply.text
    assert reply.json()["baseOffset"] == 2, reply.text   # the retained records keep their offsets
    wait_for("one log end on both replicas", lambda: len({(s["logEndOffset"], s["highWatermark"]) for s in (
        bed.stats(d, 0, topic) for d in again["replicas"])}) == 1, timeout=30, logs=bed.logs)
    logs = {d: bed.log_bytes(d, 0, topic) for d in again["replicas"]}
    assert len(set(logs.values())) == 1
    assert [v for _, v in records_of(logs[again["leader"]])] == [b"before-0", b"before-1", b"recreated-0"]
    bed.kube.kubectl_run("-n", NS, "patch", "topic", topic, "--type=merge", "-p", '{"spec":{"deletionPolicy":"Delete"}}')
    bed.kube.kubectl_run("-n", NS, "delete", "topic", topic, "--timeout=60s")


def test_a_leader_back_within_its_session_after_losing_its_unflushed_tail_loses_no_acknowledged_record(bed):
    """A power loss, simulated (no power can be cut here): SIGKILL, then the active segment cut
    where the page cache's unwritten tail began. The leader's agent dies, its log loses that tail, and it
    is back before its Lease lapses (the controller, paused meanwhile, never saw it gone). Leading
    on at its old leader epoch, it would make its followers truncate acknowledged records to its
    shorter log; instead it rejoins: the controller moves its leaderships under a new epoch, and it
    catches up as a follower."""
    wait_for("every partition led and replicated", bed.settled, timeout=120, logs=bed.logs)
    records = bed.records()
    victim: str = records[0]["leader"]
    agent = bed.agents[victim]
    acked: dict[tuple[int, int], bytes] = {}
    for i in range(20):
        value = b"tail-%02d" % i
        reply = requests.post(f"{agent.base}/v1/topics/{TOPIC}/partitions/0/records", data=kafka_batch([(b"k", value)]),
                              params={"acks": "all"}, headers={"Content-Type": "application/vnd.kafka.record-batch"},
                              timeout=30)
        assert reply.status_code == 200, reply.text
        acked[(0, reply.json()["baseOffset"])] = value
    wait_for("the records on every replica", bed.settled, timeout=60, logs=bed.logs)
    lost_from = sorted(o for _, o in acked)[10]
    assert bed.operator.proc is not None
    bed.operator.proc.send_signal(signal.SIGSTOP)
    try:
        agent.kill()
        active = sorted(bed.partition_dir(victim, 0).glob("*.log"))[-1]
        data = active.read_bytes()
        cut = next(i.position for i in iter_batch_infos(data) if i.base_offset == lost_from)
        with open(active, "r+b") as f:
            f.truncate(cut)   # the page cache's tail, never written back
        super(Agent, agent).start()   # spawned only: it gets ready once the controller runs again
        lease_url = (f"{bed.kube.server}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/"
                     f"stratalog-agent-{victim}")
        wait_for(f"{victim}'s new process holding its Lease", lambda: str(agent.proc.pid) in bed.api.get(
            lease_url, verify=str(bed.kube.ca), timeout=10).json()["spec"]["holderIdentity"], logs=bed.logs)
    finally:
        bed.operator.proc.send_signal(signal.SIGCONT)
    agent.wait_ready()
    moved = bed.records()[0]
    assert moved["leader"] != victim or moved["leaderEpoch"] > records[0]["leaderEpoch"], moved
    wait_for(f"{victim} caught up and back in every ISR", bed.settled, timeout=90, logs=bed.logs)
    check_replicas(bed, acked, "after the leader's power loss")
    assert 'stratalog_operator_partition_elections_total{reason="LeaderRestarted"}' in bed.operator.metrics()


def test_every_dashboard_query_names_metrics_the_agents_and_the_controller_export(bed):
    dashboard = json.loads((REPO / "charts" / "stratalog" / "dashboards" / "stratalog.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    wanted = {name for q in queries for name in re.findall(r"\b(stratalog_[a-z0-9_]+)\b", q)}
    # Per-partition series exist once a partition has traffic, so give the agents some: earlier
    # tests may have restarted every agent since its last produce.
    workload = Workload(bed)
    workload.start()
    try:
        wait_for("records produced and read", lambda: workload.acked and workload.read, timeout=60, logs=bed.logs)
    finally:
        workload.stop()
    exported = set()
    for text in [bed.operator.metrics(), *(a.metrics() for a in bed.agents.values())]:
        exported |= {m.group(0) for line in text.splitlines() if not line.startswith("#")
                     if (m := re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line))}
    assert len(queries) >= 10 and wanted
    assert wanted <= exported, f"dashboard queries name metrics nobody exports: {sorted(wanted - exported)}"


@pytest.mark.parametrize("topic, before, after", [
    ("moves", ["dir-a", "dir-b"], ["dir-b", "dir-c"]),   # two replicas; the leader leaves
    ("solo", ["dir-a"], ["dir-c"]),                      # the only copy moves
])
def test_a_partition_moves_to_another_logdir_under_load_and_loses_nothing(bed, topic, before, after):
    """KIP-455: dir-a leaves the Topic's LogDirs and dir-c joins; dir-c is added, catches up and joins
    the ISR before dir-a (the leader) is removed and deletes its copy."""
    kube = bed.kube
    pool = f"pool-{topic}"
    kube.kubectl_run("-n", NS, "label", "logdir", *before, f"{pool}=yes", "--overwrite")
    kube.kubectl_run("-n", NS, "apply", "-f", "-", input=(
        f"apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {{name: {topic}}}\n"
        f"spec: {{partitions: 1, replicas: {len(before)}, logDirSelector: {{matchLabels: {{{pool}: 'yes'}}}}, "
        f"config: {{min.insync.replicas: {len(before)}}}}}\n"))
    wait_for(f"{topic}-0 on {before}, all in sync", lambda: (r := bed.records(topic).get(0)) and
             (r["replicas"], r["leader"], r["isr"]) == (before, "dir-a", before), timeout=60, logs=bed.logs)
    acked: dict[int, bytes] = {}
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        session, n = requests.Session(), 0
        while not stop.is_set():
            n += 1
            value, deadline = b"m-%06d" % n, time.monotonic() + 30
            last = ""
            while True:
                try:
                    leader = bed.records(topic)[0]["leader"]
                    reply = session.post(f"{bed.agents[leader].base}/v1/topics/{topic}/partitions/0/records",
                                         data=kafka_batch([(b"k", value)]), params={"acks": "all"}, timeout=30,
                                         headers={"Content-Type": "application/vnd.kafka.record-batch"})
                    if reply.status_code == 200:
                        acked[reply.json()["baseOffset"]] = value
                        break
                    last = f"{leader}: {reply.text[:300]}"
                except (requests.RequestException, KeyError, TypeError) as error:
                    last = repr(error)
                if time.monotonic() > deadline:
                    failed.append(f"{value.decode()}: {last}")
                    break
                time.sleep(0.05)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        time.sleep(2.0)
        kube.kubectl_run("-n", NS, "label", "logdir", "dir-a", f"{pool}-")
        kube.kubectl_run("-n", NS, "label", "logdir", "dir-c", f"{pool}=yes", "--overwrite")
        seen = wait_for("the move to start", lambda: (r := bed.records(topic).get(0)) and r.get("addingReplicas")
                        and r, timeout=60, logs=bed.logs)
        assert (seen["addingReplicas"], seen["removingReplicas"]) == (["dir-c"], ["dir-a"])
        assert set(seen["replicas"]) == {*before, *after}
        moved = wait_for("the move to finish", lambda: (r := bed.records(topic).get(0)) and
                         r["replicas"] == after and "addingReplicas" not in r and r, timeout=90, logs=bed.logs)
        assert moved["leader"] == after[0] and moved["isr"] == after
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not failed, failed
    wait_for("dir-a's copy deleted", lambda: not bed.partition_dir("dir-a", 0, topic).exists(), timeout=60,
             logs=bed.logs)

    def in_step() -> bool:
        marks = {(s["logEndOffset"], s["highWatermark"]) for s in (bed.stats(d, 0, topic) for d in after)}
        return len(marks) == 1 and len(set(next(iter(marks)))) == 1

    wait_for(f"{after} in step", in_step, timeout=60, logs=bed.logs)
    logs = {d: bed.log_bytes(d, 0, topic) for d in after}
    assert len(set(logs.values())) == 1
    final = dict(records_of(logs[after[0]]))
    lost = {o: v for o, v in acked.items() if final.get(o) != v}
    assert len(acked) > 20 and not lost, (len(acked), sorted(lost.items())[:5])
    reasons = {e["reason"] for e in json.loads(kube.kubectl_run("-n", NS, "get", "events", "-o", "json").stdout)["items"]
               if e["involvedObject"]["name"] == topic}
    assert {"ReassignmentStarted", "Reassigned"} <= reasons, reasons
    # Spark's url option may list every agent, as Kafka clients list bootstrap servers: the one
    # holding the partition now is found past those that no longer do (dir-a), then its leader.
    store = HttpStore(",".join(bed.agents[d].base for d in LOGDIRS))
    assert topic in store.topics() and store.partitions(topic) == [0]

    def no_loss(*where: object) -> None:
        raise AssertionError(f"data loss reported at {where}")
    data = b"".join(store.read_batches(topic, 0, 0, len(final), no_loss))
    assert dict(records_of(data)) == final
    with pytest.raises(UnknownTopicOrPartitionError):
        HttpStore(bed.agents["dir-a"].base).partitions(topic)   # dir-a alone no longer holds it
