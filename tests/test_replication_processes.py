"""Replication factor 3 across three real engine processes, with the leader or a follower SIGKILLed.

``min.insync.replicas=2``; two producers send ``acks=all`` batches to whoever leads, a consumer
reads from the leader up to its high watermark. Each trial SIGKILLs the leader or a follower at
a random moment; the test controller moves leadership to the next ISR member (as a lapsed lease
would in part 2); the killed engine restarts and catches up. After every trial, once all three
are back in the ISR: every acknowledged record is on every replica at its offset and the three
logs are byte-identical; at the end, no consumer read a record that is not in the final log.

The trials run twice: followers fetching over their leaders' Kafka listeners (``kafka://``, what
agents use when their peers run one), then over the HTTP replication API, which the other tests
here drive too.

``STRATALOG_REPLICATION_TRIALS`` sets the number of trials (30 in CI).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from replication_cluster import ClusterController, Engines, round_woken_by_an_append
from server_harness import kafka_batch
from stratalog.broker.partition import ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition
from stratalog.records import decode_records, iter_batch_infos

TRIALS = int(os.environ.get("STRATALOG_REPLICATION_TRIALS", "30"))
TP = TopicPartition("t", 0)
SETTLE_S = 60.0


class Workload:
    """Producers (acks=all) and a consumer, each following the controller to the current leader."""

    def __init__(self, controller: ClusterController, engines: Engines) -> None:
        self.controller = controller
        self.engines = engines
        self.acked: dict[int, bytes] = {}
        self.read: dict[int, bytes] = {}
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, args=(n,), daemon=True) for n in range(2)]
        self._threads.append(threading.Thread(target=self._consume, daemon=True))
        self._sequence = 0

    def start(self) -> None:
        self._running.set()
        for thread in self._threads:
            thread.start()

    def pause(self) -> None:
        self._running.clear()
        time.sleep(0.3)   # let requests in flight end (their outcome is recorded either way)

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _leader_url(self) -> str | None:
        leader = self.controller.controller.state(TP).leader
        return self.engines.servers[leader].base if leader >= 0 and leader in self.engines.servers else None

    def _count(self, what: str) -> None:
        with self._lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def _produce(self, producer: int) -> None:
        session = requests.Session()
        while not self._stop.is_set():
            self._running.wait()
            url = self._leader_url()
            with self._lock:
                self._sequence += 1
                value = b"p%d-%08d" % (producer, self._sequence)
            try:
                reply = session.post(f"{url}/v1/topics/t/partitions/0/records", data=kafka_batch([(b"k", value)]),
                                     params={"acks": "all"},
                                     headers={"Content-Type": "application/vnd.kafka.record-batch"}, timeout=30)
            except requests.RequestException:
                self._count("connection")
                time.sleep(0.05)
                continue
            if reply.status_code == 200:
                with self._lock:
                    self.acked[reply.json()["baseOffset"]] = value
            else:
                self._count(reply.json().get("error_code", str(reply.status_code)))
                time.sleep(0.05)

    def _consume(self) -> None:
        session = requests.Session()
        offset = 0
        while not self._stop.is_set():
            self._running.wait()
            url = self._leader_url()
            try:
                reply = session.get(f"{url}/v1/topics/t/partitions/0/records",
                                    params={"offset": offset, "maxWaitMs": 200},
                                    headers={"Accept": "application/vnd.kafka.record-batch"}, timeout=30)
            except requests.RequestException:
                time.sleep(0.05)
                continue
            if reply.status_code != 200:
                time.sleep(0.05)
                continue
            for offset_, value in records_of(reply.content):
                if offset_ >= offset:
                    with self._lock:
                        self.read[offset_] = value
            offset = max([offset, *[o + 1 for o, _ in records_of(reply.content)]])


def records_of(data: bytes) -> Iterator[tuple[int, bytes]]:
    for info in iter_batch_infos(data):
        for record in decode_records(data[info.position: info.position + info.size]):
            assert record.value is not None
            yield record.offset, record.value


def log_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((directory / "t-0").glob("*.log")))


def wait_for(what: str, check, timeout: float = SETTLE_S):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (requests.RequestException, KeyError, ValueError) as error:
            last = error
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def settled(controller: ClusterController, engines: Engines) -> dict[int, dict]:
    state = controller.controller.state(TP)
    if len(state.isr) != 3 or state.leader < 0:
        return {}
    stats = {b: engines.servers[b].stats("t", 0) for b in range(3)}
    ends = {(s["logEndOffset"], s["highWatermark"]) for s in stats.values()}
    return stats if len(ends) == 1 and next(iter(ends))[0] == next(iter(ends))[1] else {}


@pytest.fixture(params=["kafka", "http"])
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ClusterController, Engines]]:
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 3, "min.insync.replicas=2", "replica.lag.time.max.ms=2000",
                      "replica.fetch.wait.max.ms=200", "request.timeout.ms=10000", transport=request.param)
    try:
        yield controller, engines
    finally:
        controller.close()
        for server in engines.servers.values():
            if server.proc is not None and server.proc.poll() is None:
                server.kill()


def test_acknowledged_records_survive_sigkills_of_leaders_and_followers(cluster, tmp_path):
    controller, engines = cluster
    rng = random.Random(int(os.environ.get("STRATALOG_REPLICATION_SEED", "4")))
    controller.controller.create(TP, (0, 1, 2))
    controller.settle()
    workload = Workload(controller, engines)
    workload.start()
    kills = {"leader": 0, "follower": 0}
    for trial in range(TRIALS):
        time.sleep(rng.uniform(0.2, 1.0))
        state = controller.controller.state(TP)
        role = rng.choice(["leader", "follower"])
        victim = state.leader if role == "leader" else rng.choice([b for b in state.isr if b != state.leader])
        engines.servers[victim].kill()
        kills[role] += 1
        controller.controller.fence(TP, victim)        # the lease lapsed
        controller.settle()
        time.sleep(rng.uniform(0.0, 0.5))              # the others go on without it for a while
        engines.start(victim)
        controller.controller.unfence(victim)   # registered again: it may rejoin the ISR
        assert controller.push(victim, TP), engines.servers[victim].log()
        # Let it catch up and rejoin, then check every replica against what was acknowledged.
        workload.pause()
        stats = wait_for(f"trial {trial}: all three replicas in the ISR with one log end",
                         lambda: settled(controller, engines))
        end = next(iter(stats.values()))["logEndOffset"]
        logs = {b: log_bytes(tmp_path / f"broker-{b}") for b in range(3)}
        assert logs[0] == logs[1] == logs[2], f"trial {trial}: the replicas' logs differ"
        final = dict(records_of(logs[0]))
        lost = {o: v for o, v in workload.acked.items() if final.get(o) != v}
        assert not lost, f"trial {trial}: acknowledged records lost or moved: {sorted(lost.items())[:5]}"
        assert end == len(final)
        workload.resume()
    workload.stop()
    stats = wait_for("the last records replicated", lambda: settled(controller, engines))
    end = next(iter(stats.values()))["highWatermark"]
    engines.stop_all()
    for broker in range(3):   # every replica, followers too, checkpointed its high watermark
        checkpoint = (tmp_path / f"broker-{broker}" / "replication-offset-checkpoint").read_text().split("\n")
        assert "t 0 %d" % end in checkpoint, (broker, checkpoint)
    final = dict(records_of(log_bytes(tmp_path / "broker-0")))
    phantom = {o: v for o, v in workload.read.items() if final.get(o) != v}
    assert not phantom, f"a consumer read records that are not in the final log: {sorted(phantom.items())[:5]}"
    assert workload.acked and workload.read, (workload.acked, workload.errors)
    assert kills["leader"] and kills["follower"], kills
    print(f"{TRIALS} trials, kills {kills}, {len(workload.acked)} acknowledged, {len(workload.read)} read, "
          f"errors {workload.errors}")


def test_a_followers_fetch_waits_for_replica_fetch_min_bytes(tmp_path):
    from test_server_api import metric_samples, wait_until

    controller = ClusterController()
    engines = Engines(tmp_path, controller, 1)   # broker 0 leads; broker 1 is only a name here
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        leader = engines.servers[0]
        one_batch = kafka_batch([(b"k", b"v" * 100)])
        answer: dict[str, requests.Response] = {}

        def fetch() -> None:
            answer["reply"] = requests.get(f"{leader.base}/v1/replication/partitions/t/0/fetch", params={
                "replicaId": 1, "fetchOffset": 0, "lastFetchedEpoch": -1, "currentLeaderEpoch": 0,
                "maxBytes": 1 << 20, "maxWaitMs": 30_000, "minBytes": 2 * len(one_batch)}, timeout=60)

        def parked() -> float:
            return metric_samples(leader).get(("stratalog_fetch_long_polls_waiting", ()), 0)

        waiting = threading.Thread(target=fetch)
        waiting.start()
        wait_until(lambda: parked() >= 1)
        woken = lambda: metric_samples(leader).get(  # noqa: E731
            ("stratalog_fetch_long_polls_total", (("outcome", "woken"),)), 0)
        before = woken()
        assert leader.produce_raw("t", 0, one_batch).status_code == 200
        # Woken by the append, it finds one batch, fewer bytes than asked: it parks again.
        wait_until(lambda: woken() > before and parked() >= 1 or not waiting.is_alive())
        assert waiting.is_alive(), "the fetch answered with fewer than minBytes before its wait ran out"
        assert leader.produce_raw("t", 0, one_batch).status_code == 200
        waiting.join(timeout=60)
        reply = answer["reply"]
        assert reply.status_code == 200 and len(reply.content) == 2 * len(one_batch)
    finally:
        controller.close()
        engines.stop_all()


def test_a_restarted_engine_serves_nothing_until_the_controller_has_spoken(tmp_path):
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 2, "min.insync.replicas=1")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        acked: dict[int, bytes] = {}
        for i in range(3):
            reply = engines.servers[0].produce_raw("t", 0, kafka_batch([(b"k", b"v%d" % i)]), acks="all")
            assert reply.status_code == 200, reply.text
        wait_for("both replicas at offset 3", lambda: all(
            engines.servers[b].stats("t", 0)["highWatermark"] == 3 for b in (0, 1)))
        engines.servers[0].kill()
        restarted = engines.start(0)     # no push yet: the controller has not said who leads
        refused = {
            "produce": restarted.produce_raw("t", 0, kafka_batch([(b"k", b"one copy only")]), acks="all"),
            "fetch": restarted.get("/v1/topics/t/partitions/0/records", params={"offset": 0}),
            "offsets": restarted.get("/v1/topics/t/partitions/0/offsets", params={"timestamp": -1}),
            "delete": restarted.post("/v1/topics/t/partitions/0/delete-records", json={"beforeOffset": 1}),
        }
        for what, reply in refused.items():
            assert reply.status_code == 421 and reply.json()["error_code"] == "NOT_LEADER_OR_FOLLOWER", (what, reply.text)
            assert "awaits the controller" in reply.json()["message"], what
        assert restarted.stats("t", 0)["logEndOffset"] == 3 and restarted.stats("t", 0)["highWatermark"] <= 3
        assert controller.push(0, TP) and controller.push(1, TP)   # with broker 0's new address for 1
        reply = restarted.produce_raw("t", 0, kafka_batch([(b"k", b"after the push")]), acks="all")
        assert reply.status_code == 200 and reply.json()["baseOffset"] == 3, reply.text
        follower = engines.servers[1].get("/v1/topics/t/partitions/0/records", params={"offset": 0})
        assert follower.status_code == 421 and "its leader is broker 0 at http" in follower.json()["message"]
    finally:
        controller.close()
        engines.stop_all()


def test_an_acks_all_produce_waiting_on_a_leader_that_is_replaced_answers_at_once(tmp_path):
    # request.timeout.ms is ten minutes: without the wake-up on demotion the produce could only
    # answer then, far past the client's 60 s bound.
    controller = ClusterController()
    engines = Engines(tmp_path, controller, 2, "min.insync.replicas=2", "request.timeout.ms=600000")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        follower = engines.servers[1]
        assert follower.proc is not None
        follower.proc.send_signal(signal.SIGSTOP)           # it fetches nothing more: the HW cannot pass
        answer: dict[str, requests.Response] = {}
        waiting = threading.Thread(target=lambda: answer.setdefault("reply", engines.servers[0].produce_raw(
            "t", 0, kafka_batch([(b"k", b"never committed")]), acks="all")))
        waiting.start()
        wait_for("the batch in the leader's log", lambda: engines.servers[0].stats("t", 0)["logEndOffset"] == 1)
        # Uncommitted: ListOffsets' latest is the high watermark, not the log end.
        latest = engines.servers[0].get("/v1/topics/t/partitions/0/offsets", params={"timestamp": -1}).json()
        assert latest["offset"] == 0, latest
        controller.controller.elect(TP, 1)                 # leadership moves while it waits
        waiting.join(timeout=60)
        assert not waiting.is_alive(), "the produce still waits on a leader that was replaced"
        reply = answer["reply"]
        assert reply.status_code == 421 and "leadership moved" in reply.json()["message"], reply.text
    finally:
        if follower.proc is not None and follower.proc.poll() is None:
            follower.proc.send_signal(signal.SIGCONT)
        controller.close()
        engines.stop_all()


def test_the_leader_reports_kafkas_replication_figures_as_a_follower_leaves_and_rejoins(tmp_path):
    from test_server_api import metric_samples

    controller = ClusterController()
    engines = Engines(tmp_path, controller, 2, "min.insync.replicas=2")
    try:
        controller.controller.create(TP, (0, 1))
        controller.settle()
        leader = engines.servers[0]

        def figures() -> dict[str, float]:
            samples = metric_samples(leader)
            names = ("stratalog_replica_leader_count", "stratalog_under_replicated_partitions",
                     "stratalog_under_min_isr_partition_count", "stratalog_isr_shrinks_total",
                     "stratalog_isr_expands_total")
            return {n: samples.get((n, ()), -1.0) for n in names}

        assert leader.produce_raw("t", 0, kafka_batch([(b"k", b"v")]), acks="all").status_code == 200
        assert figures() == {"stratalog_replica_leader_count": 1, "stratalog_under_replicated_partitions": 0,
                             "stratalog_under_min_isr_partition_count": 0, "stratalog_isr_shrinks_total": 0,
                             "stratalog_isr_expands_total": 0}
        engines.servers[1].kill()
        controller.controller.fence(TP, 1)
        controller.settle()
        wait_for("the leader to see its ISR shrink", lambda: figures()["stratalog_isr_shrinks_total"] == 1)
        assert figures()["stratalog_under_replicated_partitions"] == 1
        assert figures()["stratalog_under_min_isr_partition_count"] == 1
        engines.start(1)
        controller.controller.unfence(1)
        assert controller.push(1, TP)
        wait_for("the follower back in the ISR", lambda: figures()["stratalog_isr_expands_total"] == 1)
        assert figures()["stratalog_under_replicated_partitions"] == 0
        assert figures()["stratalog_under_min_isr_partition_count"] == 0
    finally:
        controller.close()
        engines.stop_all()


def test_one_fetch_serves_every_followed_partition_each_with_its_own_answer(tmp_path):
    """``POST /v1/replication/fetch``, as LeaderSession sends it: per-partition answers and errors,
    the response's byte budget, and a wait that any one partition's append ends."""
    from stratalog.server.replication import LeaderSession

    controller = ClusterController()
    engines = Engines(tmp_path, controller, 1)   # broker 0 leads; broker 1 is only a name here
    tp1 = TopicPartition("t", 1)
    try:
        for tp in (TP, tp1):
            controller.controller.create(tp, (0, 1))
        controller.settle()
        leader = engines.servers[0]
        batch = kafka_batch([(b"k", b"v" * 100)])
        assert leader.produce_raw("t", 0, batch).status_code == 200
        session = LeaderSession(leader.base)
        fetches = [(TP, ReplicaFetch(1, 0, -1, 0, 1 << 20)), (TopicPartition("t", 7), ReplicaFetch(1, 0, -1, 0, 1 << 20)),
                   (tp1, ReplicaFetch(1, 0, -1, 0, 1 << 20))]
        first, unknown, empty = session(fetches, 0, 1, 1 << 20)
        assert isinstance(first, ReplicaFetchResult) and first.data == batch and first.log_end_offset == 1
        assert isinstance(unknown, StratalogError) and unknown.code == "NOT_LEADER_OR_FOLLOWER"   # no replica here
        assert isinstance(empty, ReplicaFetchResult) and empty.data == b""
        # The whole answer's budget: the first partition with data gets a batch, the next none.
        assert leader.produce_raw("t", 1, batch).status_code == 200
        a, b = session([fetches[0], fetches[2]], 0, 1, 10)
        assert (len(a.data), len(b.data)) == (len(batch), 0) and b.log_end_offset == 1
        # A round with nothing new waits, and an append to any of its partitions ends the wait.
        still, woken = round_woken_by_an_append(
            session, [(TP, ReplicaFetch(1, 1, 0, 0, 1 << 20)), (tp1, ReplicaFetch(1, 1, 0, 0, 1 << 20))],
            lambda: leader.produce_raw("t", 1, batch).raise_for_status())
        assert still.data == b"" and len(woken.data) == len(batch) and woken.log_end_offset == 2
        # Bad input names the entry and the field.
        bad = requests.post(f"{leader.base}/v1/replication/fetch", timeout=10, json={
            "replicaId": 1, "partitions": [{"topic": "t", "partition": 0, "fetchOffset": 0},
                                           {"topic": "t", "partition": 1, "fetchOffset": -5}]})
        assert bad.status_code == 400 and "partitions[1].fetchOffset" in bad.json()["message"], bad.text
    finally:
        controller.close()
        engines.stop_all()
