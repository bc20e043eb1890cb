"""A bounded soak of ``stratalog serve``: concurrent producers, tailing consumers, retention and compaction.

For ``STRATALOG_SOAK_SECONDS`` (default 45) against one server subprocess with
its schedule on (short intervals, so background checkpoints, flushes and
cleaner threads run too):

* producer threads append to the 3 partitions of a compacted topic and of a
  delete topic over HTTP, as JSON records or raw batches, acks=1 or acks=all;
* a tailing consumer per partition long-polls from offset 0 and keeps every
  record it sees;
* a maintenance thread triggers retention, cleaning (forced), checkpoints and
  file deletions through the API;
* a sampler reads the server's VmRSS.

Afterwards every acknowledged record is read back: on the delete topic, every
acked record at or above the log start offset is at its acked offset, and
nothing else is there (so each appears exactly once, in each producer's
order); on the compacted topic, every record still there equals what was
acked at its offset and each key's latest acked value is present. Every record
a consumer saw equals what was acked at that offset. The server's RSS stays
under ``STRATALOG_SOAK_RSS_MB`` (default 500), and it shuts down cleanly into a
directory ``stratalog verify`` finds clean.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from server_harness import RECORD_BATCH, STRATALOG, Server
from stratalog.records import Record, build_batch

SECONDS = float(os.environ.get("STRATALOG_SOAK_SECONDS", "45"))
RSS_BOUND = int(os.environ.get("STRATALOG_SOAK_RSS_MB", "500")) * 1024 * 1024
PARTITIONS = 3
PRODUCERS_PER_TOPIC = 3
KEYS = 200

Acked = dict[tuple[str, int], dict[int, tuple[str | None, str | None]]]


class Soak:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: Acked = defaultdict(dict)
        self.seen: dict[tuple[str, int], list[tuple[int, str | None, str | None]]] = defaultdict(list)
        self.errors: list[str] = []
        self.rss: list[int] = []
        self.maintenance_runs: dict[str, int] = defaultdict(int)

    def guard(self, name: str, body: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                body()
            except Exception as error:  # noqa: BLE001 - reported by the test, with the thread's name
                self.errors.append(f"{name}: {type(error).__name__}: {error}")
                self.stop.set()

        thread = threading.Thread(target=run, name=name)
        thread.start()
        return thread

    # -- workers -------------------------------------------------------------------------------
    def producer(self, topic: str, number: int, compacted: bool) -> None:
        rng = random.Random(f"{topic}-{number}")
        session = requests.Session()
        sequence = 0
        while not self.stop.is_set():
            partition = rng.randrange(PARTITIONS)
            count = rng.randint(1, 20)
            records: list[tuple[str | None, str | None]] = []
            for _ in range(count):
                key: str | None = f"key-{rng.randrange(KEYS)}" if compacted or rng.random() < 0.5 else None
                tombstone = compacted and rng.random() < 0.05
                value = None if tombstone else f"{topic}/{number}/{sequence}/" + "x" * rng.randint(0, 400)
                records.append((key, value))
                sequence += 1
            query = {"acks": rng.choice(["1", "1", "all"])}
            path = self.server.url(f"/v1/topics/{topic}/partitions/{partition}/records")
            if rng.random() < 0.5:
                reply = session.post(path, params=query, timeout=60,
                                     json={"records": [{"key": k, "value": v} for k, v in records]})
            else:
                now = int(time.time() * 1000)
                batch = build_batch([Record(i, now, None if k is None else k.encode(),
                                            None if v is None else v.encode())
                                     for i, (k, v) in enumerate(records)])
                reply = session.post(path, params=query, data=batch, headers={"Content-Type": RECORD_BATCH},
                                     timeout=60)
            assert reply.status_code == 200, f"produce {topic}-{partition}: {reply.status_code} {reply.text}"
            result = reply.json()
            assert result["lastOffset"] - result["baseOffset"] + 1 == count, result
            with self.lock:
                for offset, record in enumerate(records, start=result["baseOffset"]):
                    self.acked[(topic, partition)][offset] = record

    def consumer(self, topic: str, partition: int) -> None:
        session = requests.Session()
        offset = 0
        path = self.server.url(f"/v1/topics/{topic}/partitions/{partition}/records")
        while not self.stop.is_set():
            reply = session.get(path, params={"offset": offset, "maxWaitMs": 500}, timeout=60)
            if reply.status_code == 416:  # retention passed us: go on from the log start offset (Kafka's reset)
                earliest = session.get(self.server.url(f"/v1/topics/{topic}/partitions/{partition}/offsets"),
                                       params={"timestamp": -2}, timeout=60)
                offset = earliest.json()["offset"]
                continue
            assert reply.status_code == 200, f"fetch {topic}-{partition}: {reply.status_code} {reply.text}"
            body = reply.json()
            for record in body["records"]:
                assert record["offset"] >= offset, (record["offset"], offset)
                self.seen[(topic, partition)].append((record["offset"], record.get("key"), record.get("value")))
            offset = body["nextOffset"]

    def maintenance(self) -> None:
        session = requests.Session()
        rng = random.Random("maintenance")
        while not self.stop.wait(rng.uniform(0.5, 1.5)):
            for task, query in (("retention", {}), ("clean", {"force": "true"}), ("checkpoints", {}),
                                ("deletions", {}), ("flush", {})):
                reply = session.post(self.server.url(f"/v1/maintenance/{task}"), params=query, timeout=300)
                assert reply.status_code == 200, f"{task}: {reply.status_code} {reply.text}"
                self.maintenance_runs[task] += 1
                if task == "retention":
                    self.maintenance_runs["segments deleted"] += reply.json()["segmentsDeleted"]
                if task == "clean":
                    self.maintenance_runs["records compacted away"] += sum(
                        r["recordsRemoved"] for r in reply.json()["reports"])

    def sampler(self) -> None:
        while not self.stop.wait(0.5):
            self.rss.append(self.server.rss_bytes())


def test_soak(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server([data], "--config", "log.initial.task.delay.ms=1000",
                    "--config", "log.retention.check.interval.ms=3000",
                    "--config", "log.flush.offset.checkpoint.interval.ms=2000",
                    "--config", "log.cleaner.backoff.ms=1000").start()
    segment = {"segment.bytes": 64 * 1024, "segment.index.bytes": 64 * 1024}
    server.ok("POST", "/v1/topics", json={"name": "soak-compact", "partitions": PARTITIONS, "configs": {
        **segment, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.05}})
    server.ok("POST", "/v1/topics", json={"name": "soak-delete", "partitions": PARTITIONS, "configs": {
        **segment, "retention.bytes": 256 * 1024, "file.delete.delay.ms": 2000}})
    soak = Soak(server)
    threads = [soak.guard("sampler", soak.sampler), soak.guard("maintenance", soak.maintenance)]
    for topic, compacted in (("soak-compact", True), ("soak-delete", False)):
        for partition in range(PARTITIONS):
            threads.append(soak.guard(f"consumer-{topic}-{partition}",
                                      lambda t=topic, p=partition: soak.consumer(t, p)))
        for number in range(PRODUCERS_PER_TOPIC):
            threads.append(soak.guard(f"producer-{topic}-{number}",
                                      lambda t=topic, n=number, c=compacted: soak.producer(t, n, c)))
    soak.stop.wait(SECONDS)
    soak.stop.set()
    for thread in threads:
        thread.join(timeout=300)
        assert not thread.is_alive(), thread.name
    assert not soak.errors, soak.errors + [server.log()[-5000:]]

    print(f"soak: {sum(len(v) for v in soak.acked.values())} records acked, "
          f"{sum(len(v) for v in soak.seen.values())} seen by consumers, maintenance {dict(soak.maintenance_runs)}, "
          f"peak RSS {max(soak.rss, default=0) >> 20} MiB")
    try:
        check_delete_topic(server, soak.acked)
        check_compacted_topic(server, soak.acked)
        check_consumers(soak)
        assert soak.rss and max(soak.rss) < RSS_BOUND, f"server RSS peaked at {max(soak.rss) >> 20} MiB"
        # The run did what it claims: real load, real retention, real compaction.
        assert sum(len(v) for v in soak.acked.values()) > 1000
        assert soak.maintenance_runs["segments deleted"] > 0, dict(soak.maintenance_runs)
        assert soak.maintenance_runs["records compacted away"] > 0, dict(soak.maintenance_runs)
    finally:
        code = server.terminate()
    assert code == 0, server.log()[-5000:]
    verify = subprocess.run([*STRATALOG, "verify", "--data-dir", str(data)], capture_output=True, text=True,
                            timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def stored(server: Server, topic: str, partition: int) -> tuple[int, dict[int, tuple[Any, Any]]]:
    start = server.stats(topic, partition)["logStartOffset"]
    records = server.read_all(topic, partition, start)
    offsets = [r["offset"] for r in records]
    assert offsets == sorted(set(offsets)), f"{topic}-{partition}: offsets not strictly increasing"
    return start, {r["offset"]: (r["key"], r["value"]) for r in records}


def check_delete_topic(server: Server, acked: Acked) -> None:
    for partition in range(PARTITIONS):
        expected = acked[("soak-delete", partition)]
        start, found = stored(server, "soak-delete", partition)
        kept = {offset: record for offset, record in expected.items() if offset >= start}
        assert found == kept, f"soak-delete-{partition}: stored records differ from the acknowledged ones"
        # each producer's records in the order it sent them, each once
        by_producer: dict[str, list[int]] = defaultdict(list)
        for offset in sorted(found):
            value = found[offset][1]
            _, producer, sequence, _ = value.split("/", 3)
            by_producer[producer].append(int(sequence))
        for sequences in by_producer.values():
            assert sequences == sorted(set(sequences))


def check_compacted_topic(server: Server, acked: Acked) -> None:
    for partition in range(PARTITIONS):
        expected = acked[("soak-compact", partition)]
        _, found = stored(server, "soak-compact", partition)
        for offset, record in found.items():
            assert expected.get(offset) == record, f"soak-compact-{partition} offset {offset}"
        latest: dict[str, int] = {}
        for offset, (key, _) in expected.items():
            latest[key] = max(latest.get(key, -1), offset)
        missing = {key: offset for key, offset in latest.items() if offset not in found}
        assert not missing, f"soak-compact-{partition}: latest values compacted away: {missing}"
        assert len(found) < len(expected), "compaction removed nothing"


def check_consumers(soak: Soak) -> None:
    for (topic, partition), seen in soak.seen.items():
        expected = soak.acked[(topic, partition)]
        offsets = [offset for offset, _, _ in seen]
        assert offsets == sorted(set(offsets)), f"{topic}-{partition}: a consumer saw offsets out of order"
        for offset, key, value in seen:
            assert expected.get(offset) == (key, value), f"{topic}-{partition} offset {offset}"
        assert seen, f"{topic}-{partition}: the consumer saw nothing"
