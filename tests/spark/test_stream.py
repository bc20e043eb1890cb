"""Structured Streaming over a topic being appended to: every record exactly once, across stop and restart."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from stratalog.storage.log_manager import LogManager
from stratalog.records import Compression, Record
from stratalog_spark.offsets import rate_limit
from stratalog.broker.topics import TopicAdmin

from .conftest import append, engine

MAX_PER_TRIGGER = 50
WAIT_S = 120


class Producer:
    """Appends records whose value names their sequence number; remembers what it wrote."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.sequence = 0
        self.written: list[tuple[int, str]] = []  # (partition, value)

    def produce(self, count: int, partitions: int) -> None:
        for _ in range(count):
            partition = self.sequence % partitions
            value = f"v{self.sequence}"
            append(self.manager, "s", partition, [Record(0, int(time.time() * 1000), b"k", value.encode())],
                   compression=list(Compression)[self.sequence % 5])
            self.written.append((partition, value))
            self.sequence += 1


def start(spark: Any, data: Path, out: Path, checkpoint: Path, **trigger: Any) -> Any:
    source = (spark.readStream.format("stratalog").option("path", str(data)).option("subscribe", "s")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER)).load())
    return (source.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
            .trigger(**trigger).start())


def committed_offsets(checkpoint: Path) -> tuple[dict[str, Any], str]:
    """The end offsets of the last planned micro-batch, parsed and as Spark stored the text."""
    batches = [p for p in (checkpoint / "offsets").glob("*") if p.name.isdigit()]
    if not batches:
        return {"s": {}}, ""
    text = max(batches, key=lambda p: int(p.name)).read_text().splitlines()[-1]
    return json.loads(text), text


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_stream_reads_every_record_once_while_appended_to_stopped_and_restarted(spark, tmp_path):
    data, out, checkpoint = tmp_path / "data", tmp_path / "out", tmp_path / "checkpoint"
    with engine(data) as manager:
        TopicAdmin(manager).create_topic("s", 2, {"segment.bytes": "700"})
        producer = Producer(manager)
        producer.produce(60, 2)

        # 1. A running query while the topic grows (and gains a partition), stopped mid-flight.
        running = start(spark, data, out, checkpoint, processingTime="0 seconds")
        writer = threading.Thread(target=lambda: (producer.produce(80, 2), TopicAdmin(manager).add_partitions("s", 3),
                                                  producer.produce(60, 3)))
        writer.start()
        writer.join(WAIT_S)
        wait_for(lambda: sum(committed_offsets(checkpoint)[0]["s"].values()) >= 150, "the running query to move")
        running.stop()

        # 2. More data while nothing runs; the restart resumes from the checkpoint and, with
        #    AvailableNow, drains the backlog in micro-batches of at most maxOffsetsPerTrigger, then stops.
        producer.produce(130, 3)
        restarted = start(spark, data, out, checkpoint, availableNow=True)
        assert restarted.awaitTermination(WAIT_S)
        sizes = [p["numInputRows"] for p in restarted.recentProgress if p["numInputRows"]]
        assert sum(sizes) >= 130 and len(sizes) >= 3 and max(sizes) <= MAX_PER_TRIGGER, sizes

    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r["partition"], r["offset"], r["value"]) for r in rows)
    assert len(got) == len(set(got)) == len(producer.written) == 330, "a record was lost or read twice"
    assert sorted((p, v) for p, _, v in got) == sorted(producer.written)
    for partition in range(3):  # offsets of each partition: 0..n-1, each once
        offsets = [o for p, o, _ in got if p == partition]
        assert offsets == list(range(len(offsets)))
    offsets, text = committed_offsets(checkpoint)
    counts = {str(p): sum(1 for q, _ in producer.written if q == p) for p in range(3)}
    assert offsets == {"s": counts}
    assert text == json.dumps({"s": {"0": counts["0"], "1": counts["1"], "2": counts["2"]}}), \
        "Kafka's checkpoint form, in canonical order"


def test_max_offsets_per_trigger_is_shared_in_proportion_to_backlog_as_kafka_does():
    start = {("t", 0): 0, ("t", 1): 100, ("u", 0): 5}
    until = {("t", 0): 1000, ("t", 1): 110, ("u", 0): 5, ("u", 1): 7}
    # Backlogs 1000 and 10 share 100: floor(99.01) and ceil(0.99) (small partitions are never starved).
    assert rate_limit(100, start, until) == {("t", 0): 99, ("t", 1): 101, ("u", 0): 5, ("u", 1): 7}
    assert rate_limit(10**6, start, until) == until
