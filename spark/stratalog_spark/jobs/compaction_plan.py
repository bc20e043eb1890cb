"""``compaction-plan``: the latest offset of every key of a topic, computed by Spark, as engine plans.

Kafka's cleaner keeps its key → latest-offset map in one process's memory;
a key space larger than ``log.cleaner.dedupe.buffer.size`` takes it several
passes. Here Spark computes the map for the whole topic at once:

1. scan ``partition, offset, key`` up to each partition's current end (the
   plan's high watermark) - a projected read, values are never copied -
   with ``read_committed`` so aborted transactional data is no key's latest;
2. ``groupBy(partition, key).max(offset)``, keyless records left out (the
   cleaner drops them). A key whose latest record is a tombstone keeps the
   tombstone's offset: when a tombstone itself goes (its delete horizon) is
   the engine's rule, applied when the plan is;
3. shuffle by partition, sort by offset, and stream each partition's offsets
   into ``<out>/<topic>-<p>.keep`` (+ ``.keep.json``), see ``keep_sink``.

``stratalog apply-compaction-plan`` (or ``--apply`` here, for data
directories) then rewrites each partition in one pass with the cleaner's
crash-safe swap. Offsets at or above a plan's high watermark - appended
after the scan - are not its business and stay as they are.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from stratalog.storage.cleaner.plan import apply_to_partition
from stratalog.storage.log_manager import open_log_manager

from ..store import Location, open_store
from .keep_sink import NAME, SUMMARY_SUFFIX, KeepFilesDataSource


def location_options(location: Location) -> dict[str, str]:
    return {"url": location.url} if location.url else {"path": ",".join(location.paths)}


def plan_topic(spark: SparkSession, location: Location, topic: str, out_dir: Path) -> dict[str, Any]:
    started = time.monotonic()
    store = open_store(location)
    partitions = store.partitions(topic)
    bounds = {p: store.offsets(topic, p) for p in partitions}
    ending = json.dumps({topic: {str(p): b.end for p, b in bounds.items()}})
    keys = (spark.read.format("stratalog").schema("partition INT, offset BIGINT, key BINARY")
            .options(**location_options(location)).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("endingOffsets", ending)
            .option("kafka.isolation.level", "read_committed")
            # Retention removing a segment mid-scan takes its keys out of the log anyway: not a failure here.
            .option("failOnDataLoss", "false").load())
    latest = (keys.where(F.col("key").isNotNull()).groupBy("partition", "key")
              .agg(F.max("offset").alias("offset"), F.count(F.lit(1)).alias("records")))
    rows = (latest.select("partition", "offset", "records")
            .repartition(len(partitions), "partition").sortWithinPartitions("partition", "offset"))
    out_dir.mkdir(parents=True, exist_ok=True)
    spark.dataSource.register(KeepFilesDataSource)
    (rows.write.format(NAME).mode("append").option("dir", str(out_dir)).option("topic", topic)
     .option("bounds", json.dumps({str(p): [b.end, b.log_start] for p, b in bounds.items()})).save())
    summary = json.loads((out_dir / f"{topic}{SUMMARY_SUFFIX}").read_text())
    seconds = time.monotonic() - started
    scanned = sum(s["recordsScanned"] for s in summary.values())
    return {"topic": topic, "outDir": str(out_dir), "seconds": round(seconds, 3), "keyedRecordsScanned": scanned,
            "keptOffsets": sum(s["keptOffsets"] for s in summary.values()),
            "recordsPerSecond": round(scanned / seconds) if seconds > 0 else None,
            "partitions": {int(p): s for p, s in summary.items()}}


def apply_plans(paths: list[str], topic: str, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Apply every partition's plan through the engine (takes the directories' lock, as the CLI does)."""
    with open_log_manager(paths, create_missing=False) as manager:
        return [apply_to_partition(manager, topic, partition, Path(summary["plan"])).to_json()
                for partition, summary in sorted(report["partitions"].items())]
