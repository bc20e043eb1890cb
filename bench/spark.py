"""Spark benchmarks (issue 8). Not a test: it prints figures, it asserts nothing.

* read: a full-topic batch read through ``format("stratalog")`` into Spark's
  ``noop`` sink on ``local[2]`` (Arrow batches from the data source), all
  columns and projected to ``partition, offset, key``; rows/s. Beside it, two
  ceilings on the same machine: the JVM alone producing the same seven columns
  (``spark.range``), and the data source's decoding alone in one Python
  process (no Spark), times the two cores.
* compaction-plan: the Spark job over the same topic (scan of keys, groupBy,
  sorted keep files); keyed records scanned per second. For scale, the engine's
  own cleaner compacting a copy of the topic in one pass, and the engine
  applying the plan (``apply_compaction_plan``).

``python -m bench.spark [--records N] [--partitions P] [--dir D] [--json F]``

On a shared 2-core machine the wall times hold time waiting for a core; the
load average at the start is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.cleaner.plan import apply_to_partition
from stratalog.common.config import EngineConfig
from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.records import Record, build_batch
from stratalog.broker.topics import TopicAdmin

RECORDS_PER_BATCH = 500
VALUE_BYTES = 100


def fill(data: Path, records: int, partitions: int, distinct_fraction: float = 0.1) -> None:
    """Keyed 100-byte records, 10% distinct keys, in 32 MiB segments, all rolled (all cleanable)."""
    rng = random.Random(1)
    keys = max(1, int(records * distinct_fraction))
    value = b"v" * VALUE_BYTES
    now = int(time.time() * 1000)
    with open_log_manager([data]) as manager:
        TopicAdmin(manager).create_topic("bench", partitions, {"cleanup.policy": "compact", "segment.bytes": str(32 << 20),
                                                   "retention.ms": "-1"})
        for partition in range(partitions):
            log = manager.get_log("bench", partition)
            for _ in range(records // partitions // RECORDS_PER_BATCH):
                batch = [Record(i, now, b"key-%09d" % rng.randrange(keys), value) for i in range(RECORDS_PER_BATCH)]
                log.append(build_batch(batch))
            log.roll()


def session(jars: Path | None = None) -> Any:
    """A ``local[2]`` session with the stratalog data source; ``jars``: a directory of jars to add
    (Spark's Kafka connector, for ``bench.spark_peer``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("stratalog bench")
    if jars is not None:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in sorted(jars.glob("*.jar"))))
    spark = (builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from stratalog_spark import register

    register(spark)
    return spark


def timed(action: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def read_figures(spark: Any, data: Path, records: int, repeats: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    def frame(schema: str | None = None) -> Any:
        reader = spark.read.format("stratalog").option("path", str(data)).option("subscribe", "bench")
        return (reader.schema(schema) if schema else reader).load()

    frame().write.format("noop").mode("overwrite").save()  # warm-up: Spark's Python daemons start here
    tasks = frame().rdd.getNumPartitions()
    full = timed(lambda: frame().write.format("noop").mode("overwrite").save(), repeats)
    projected = timed(lambda: frame("partition INT, offset BIGINT, key BINARY").write.format("noop")
                      .mode("overwrite").save(), repeats)
    value = F.lit(b"v" * VALUE_BYTES)
    jvm = spark.range(records).select(F.col("id").cast("string").cast("binary").alias("key"), value.alias("value"),
                                      F.lit("bench").alias("topic"), (F.col("id") % 2).cast("int").alias("partition"),
                                      F.col("id").alias("offset"), F.current_timestamp().alias("timestamp"),
                                      F.lit(0).alias("timestampType"))
    jvm_seconds = timed(lambda: jvm.write.format("noop").mode("overwrite").save(), repeats)
    return {"tasks": tasks, "full_seconds": full, "full_rows_per_s": records / full,
            "projected_seconds": projected, "projected_rows_per_s": records / projected,
            "jvm_rows_per_s": records / jvm_seconds}


def python_decode_rate(data: Path) -> float:
    """Rows/s of the data source's own read path for one partition in this process (no Spark)."""
    from stratalog_spark.reader import ReadSettings, read_range
    from stratalog_spark.planning import OffsetRange
    from stratalog_spark.schema import KAFKA_COLUMNS, arrow_schema
    from stratalog_spark.store import Location, open_store

    location = Location(paths=(str(data),))
    bounds = open_store(location).offsets("bench", 0)
    settings = ReadSettings(location, arrow_schema(KAFKA_COLUMNS), True, False)
    started = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(settings, OffsetRange("bench", 0, bounds.log_start, bounds.end)))
    return rows / (time.perf_counter() - started)


def plan_figures(spark: Any, root: Path, data: Path) -> dict[str, Any]:
    from stratalog_spark.jobs.compaction_plan import plan_topic
    from stratalog_spark.store import Location

    plan_dir = root / "plans"
    report = plan_topic(spark, Location(paths=(str(data),)), "bench", plan_dir)
    applied_dir = root / "applied"
    shutil.copytree(data, applied_dir)
    started = time.perf_counter()
    with open_log_manager([applied_dir]) as manager:
        applied = [apply_to_partition(manager, "bench", p, Path(s["plan"])) for p, s in report["partitions"].items()]
    apply_seconds = time.perf_counter() - started
    cleaned_dir = root / "cleaned"
    shutil.copytree(data, cleaned_dir)
    config = EngineConfig.from_properties({"log.cleaner.threads": "1", "log.cleaner.dedupe.buffer.size": str(1 << 30)})
    manager = LogManager([cleaned_dir], config).open()
    started = time.perf_counter()
    reports = LogCleaner(manager).run_pass(force=True)
    clean_seconds = time.perf_counter() - started
    manager.close()
    read = sum(r.stats.records_read for r in reports)
    return {"plan_seconds": report["seconds"], "plan_records_per_s": report["recordsPerSecond"],
            "plan_records": report["keyedRecordsScanned"], "kept_offsets": report["keptOffsets"],
            "apply_seconds": apply_seconds,
            "apply_records_per_s": sum(a.stats.records_read for a in applied) / apply_seconds,
            "cleaner_passes": len(reports), "cleaner_seconds": clean_seconds,
            "cleaner_records_per_s": read / clean_seconds if clean_seconds else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the data (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-spark-", dir=args.dir))
    try:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        data = root / "data"
        fill(data, args.records, args.partitions)
        size = sum(f.stat().st_size for f in data.glob("bench-*/*.log"))
        print(f"{args.records:,} records ({size / 2**20:.0f} MiB) in {time.perf_counter() - started:.1f} s; "
              f"load average {load:.1f} on {os.cpu_count()} cores", flush=True)
        spark = session()
        figures: dict[str, Any] = {"records": args.records, "bytes": size, "load_average": load}
        figures.update(read_figures(spark, data, args.records, args.repeats))
        figures["python_decode_rows_per_s_one_core"] = python_decode_rate(data)
        figures.update(plan_figures(spark, root, data))
        spark.stop()
        two_cores = 2 * figures["python_decode_rows_per_s_one_core"]
        print(f"read, all columns  : {figures['full_rows_per_s'] / 1e6:.2f} M rows/s ({figures['tasks']} tasks); "
              f"{figures['full_rows_per_s'] / figures['jvm_rows_per_s']:.2f} of the JVM-only "
              f"{figures['jvm_rows_per_s'] / 1e6:.2f} M rows/s, {figures['full_rows_per_s'] / two_cores:.2f} of "
              f"2 x the decoder alone ({two_cores / 1e6:.2f} M rows/s)")
        print(f"read, projected    : {figures['projected_rows_per_s'] / 1e6:.2f} M rows/s (partition, offset, key)")
        print(f"compaction-plan    : {figures['plan_records_per_s'] / 1e6:.2f} M records/s "
              f"({figures['plan_records']:,} records, {figures['kept_offsets']:,} kept, "
              f"{figures['plan_seconds']:.1f} s)")
        print(f"engine applies it  : {figures['apply_records_per_s'] / 1e6:.2f} M records/s "
              f"({figures['apply_seconds']:.1f} s)")
        print(f"engine cleaner     : {figures['cleaner_records_per_s'] / 1e6:.2f} M records/s "
              f"({figures['cleaner_passes']} pass(es), {figures['cleaner_seconds']:.1f} s)")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
