"""End to end: keyed events written through Spark, compacted by the engine, read back as the latest state.

1. Spark generates account events (``account-N`` → a JSON balance, some
   deletions as tombstones) and writes them to a compacted topic with
   ``format("stratalog")``: each key goes to the partition Kafka's murmur2
   would pick.
2. The compaction-plan job computes the latest offset of every key with
   Spark; the engine applies the plans in one pass per partition (the same
   rewrite and crash-safe swap as its own cleaner).
3. The latest state is read back as a DataFrame (the newest record per key,
   deleted accounts dropped) and aggregated per region. The example checks
   the answer against a plain-Python model of the events and exits non-zero
   if they differ.

Run from the repository root (needs ``pip install -e '.[spark]'`` and Java 17):
``python examples/spark_pipeline.py [--events 200000] [--dir /tmp/pipeline]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

import stratalog_spark
from stratalog.storage.log_manager import open_log_manager
from stratalog_spark.jobs.compaction_plan import apply_plans, plan_topic
from stratalog_spark.store import Location
from stratalog.broker.topics import TopicAdmin

ACCOUNTS = 5_000
REGIONS = ("north", "south", "east", "west")


def model(events: int) -> dict[str, int]:
    """The expected answer, by replaying the same deterministic events in Python."""
    state: dict[int, tuple[str, int] | None] = {}
    for i in range(events):
        account = (i * 7919) % ACCOUNTS
        state[account] = None if i % 97 == 0 else (REGIONS[account % 4], i % 1000)
    totals: dict[str, int] = {}
    for entry in state.values():
        if entry is not None:
            totals[entry[0]] = totals.get(entry[0], 0) + entry[1]
    return dict(sorted(totals.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one, removed after)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="stratalog-pipeline-"))
    data, plans = work / "data", work / "plans"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("stratalog pipeline")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    stratalog_spark.register(spark)
    try:
        with open_log_manager([data]) as manager:
            TopicAdmin(manager).create_topic("accounts", 3, {"cleanup.policy": "compact", "segment.bytes": str(256 << 10)})

        # 1. Events, written through Spark: the same account keeps being updated; every 97th event deletes.
        started = time.perf_counter()
        events = spark.range(args.events).select(
            F.concat(F.lit("account-"), ((F.col("id") * 7919) % ACCOUNTS).cast("string")).alias("key"),
            F.when(F.col("id") % 97 == 0, F.lit(None)).otherwise(F.to_json(F.struct(
                F.element_at(F.array(*[F.lit(r) for r in REGIONS]),
                             (((F.col("id") * 7919) % ACCOUNTS) % 4 + 1).cast("int")).alias("region"),
                (F.col("id") % 1000).alias("balance")))).alias("value"))
        # One ordered task, so each key's events are appended in their order (a real feed would be keyed upstream).
        events.coalesce(1).write.format("stratalog").mode("append").option("path", str(data)) \
            .option("topic", "accounts").save()
        print(f"wrote {args.events:,} events in {time.perf_counter() - started:.1f} s")

        # 2. The latest offset per key, computed by Spark; the engine applies the plans.
        location = Location(paths=(str(data),))
        report = plan_topic(spark, location, "accounts", plans)
        applied = apply_plans([str(data)], "accounts", report)
        removed = sum(a["recordsRemoved"] for a in applied)
        print(f"compaction plan: {report['keptOffsets']:,} keys over {report['keyedRecordsScanned']:,} records "
              f"in {report['seconds']:.1f} s; the engine removed {removed:,} superseded records")

        # 3. The latest state: newest record per key (the active segments are not compacted), no tombstones.
        log = spark.read.format("stratalog").option("path", str(data)).option("subscribe", "accounts").load()
        newest = Window.partitionBy("key").orderBy(F.col("offset").desc())
        state = (log.withColumn("rank", F.row_number().over(newest)).where("rank = 1 AND value IS NOT NULL")
                 .select(F.from_json(F.col("value").cast("string"), "region STRING, balance INT").alias("account")))
        totals = state.groupBy("account.region").agg(F.sum("account.balance").alias("total")).orderBy("region")
        result = {row["region"]: row["total"] for row in totals.collect()}
        print(f"rows left in the log: {log.count():,}; live accounts: {state.count():,}")
        print(json.dumps(result))
        expected = model(args.events)
        if result != expected:
            print(f"MISMATCH: expected {expected}", file=sys.stderr)
            return 1
        print("matches the model of the events")
        return 0
    finally:
        spark.stop()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
