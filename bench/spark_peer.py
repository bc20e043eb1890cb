"""Spark reading a topic: ``format("stratalog")`` over the files against Spark's own Kafka source
reading the same records from Apache Kafka 4.3.1, in one run (issue 17). Not a test: it prints
figures, it asserts nothing.

``python -m bench.spark_peer [--records 2000000] [--partitions 2] [--repeats 5] [--json F] [--out F]``
writes ``bench/RESULTS-spark.md`` (``--out`` elsewhere).

* The records (10-byte keys, 100-byte values) are written to a Kafka 4.3.1 broker (a single KRaft
  node with a broker's usual JVM settings, as in ``bench.compare``) by Spark's own Kafka sink, so
  the producer lays out the batches as a Kafka client does.
* The broker is stopped cleanly, its topic's partition directories copied, and it is started
  again on the same log directory: both sides read byte-identical segment files.
* Each repeat reads the whole topic into Spark's ``noop`` sink on ``local[2]`` twice, Kafka's
  source first (``format("kafka")``, the ``spark-sql-kafka-0-10`` connector, default options),
  then ``format("stratalog")`` over the copy. Two untimed reads of each warm Spark, its Python
  workers and the broker's JIT first.
* CPU seconds are user + system time over the read of every process that takes part: this
  Python driver, Spark's JVM and its Python workers (the process tree under this process, read
  from /proc), and for Kafka's read the broker as well. The broker idles through the stratalog
  read and is not counted there.

Figures: rows/s and CPU seconds per million rows, per side, with the median of each repeat's
ratio (the steady figure where the machine's speed drifts between repeats).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kafka_tools import KafkaToolchain  # type: ignore[import-not-found]  # noqa: E402

from . import machine  # noqa: E402
from .spark import session  # noqa: E402

from .compare_processes import KAFKA_VERSION, kafka_libs  # noqa: E402
from .compare_service import BROKER_OVERRIDES, bench_broker_class  # noqa: E402

TOPIC = "bench"
KEY_BYTES = 10
VALUE_BYTES = 100
WARM_UP_READS = 2  # Kafka's side still sped up by a fifth from the first timed read to the third after one
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """User + system seconds of ``root`` and every live process under it, each with its reaped children's."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone since the listing
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / _TICK


def connector_jars() -> Path:
    import subprocess

    done = subprocess.run(["bash", str(REPO / "scripts" / "spark-kafka-connector")], capture_output=True, text=True,
                          timeout=900, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"scripts/spark-kafka-connector failed ({done.returncode}):\n{done.stderr}")
    return Path(lines[-1])


def produce(spark: Any, bootstrap: str, records: int, partitions: int) -> None:
    """``records`` keyed records through Spark's Kafka sink, spread over the partitions in turn."""
    from pyspark.sql import functions as F

    frame = spark.range(records).select(
        F.format_string("k%09d", F.col("id")).cast("binary").alias("key"),
        F.concat(F.lpad(F.col("id").cast("string"), VALUE_BYTES, "v")).cast("binary").alias("value"),
        (F.col("id") % partitions).cast("int").alias("partition"))
    frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", TOPIC).save()


def read_once(make_frame: Any, leave_out: int | None) -> tuple[float, float]:
    """Wall and CPU seconds of one full read into ``noop``; CPU of this process's tree, less ``leave_out``'s."""
    def cpu() -> float:
        return tree_cpu_seconds(os.getpid()) - (tree_cpu_seconds(leave_out) if leave_out else 0.0)

    cpu0 = cpu()
    started = time.perf_counter()
    make_frame().write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - started
    return wall, cpu() - cpu0


def copy_partitions(log_dir: Path, into: Path) -> int:
    """The topic's partition directories (segments, indexes, checkpoints' partition files) into ``into``."""
    into.mkdir(parents=True)
    size = 0
    for partition in sorted(log_dir.glob(f"{TOPIC}-*")):
        shutil.copytree(partition, into / partition.name)
        size += sum(f.stat().st_size for f in partition.glob("*.log"))
    if size == 0:
        raise RuntimeError(f"no segment of {TOPIC!r} under {log_dir}")
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the data (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS-spark.md",
                        help="the Markdown report (default: bench/RESULTS-spark.md)")
    args = parser.parse_args(argv)
    command = "python -m bench.spark_peer " + " ".join(argv if argv is not None else sys.argv[1:])
    root = Path(tempfile.mkdtemp(prefix="bench-spark-peer-", dir=args.dir))
    broker = bench_broker_class()(KafkaToolchain(kafka_libs(), KAFKA_VERSION), root / "kafka")
    spark = None
    try:
        load = os.getloadavg()[0]
        described = machine.describe(root)
        began = time.monotonic()
        jars = connector_jars()
        spark = session(jars)
        broker.start(**BROKER_OVERRIDES)
        broker.create_topic(TOPIC, {}, partitions=args.partitions)
        started = time.perf_counter()
        produce(spark, broker.bootstrap, args.records, args.partitions)
        produced = time.perf_counter() - started
        broker.stop()  # clean shutdown: the copy is of closed, flushed segments
        data = root / "data"
        size = copy_partitions(broker.log_dir, data)
        broker.start(**BROKER_OVERRIDES)
        assert broker.process is not None
        broker_pid = broker.process.pid
        print(f"{args.records:,} records ({size / 2**20:.0f} MiB) produced through Spark's Kafka sink in "
              f"{produced:.1f} s; load average {load:.1f} on {os.cpu_count()} cores", flush=True)

        def kafka_frame() -> Any:
            return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", TOPIC).load())

        def stratalog_frame() -> Any:
            return spark.read.format("stratalog").option("path", str(data)).option("subscribe", TOPIC).load()

        counted = {"kafka": kafka_frame().count(), "stratalog": stratalog_frame().count()}
        if set(counted.values()) != {args.records}:
            raise RuntimeError(f"the two sources do not both read {args.records:,} rows: {counted}")
        for _ in range(WARM_UP_READS):  # the JIT of Spark's and the broker's JVMs, Spark's Python workers
            read_once(kafka_frame, None)
            read_once(stratalog_frame, broker_pid)
        runs: list[dict[str, Any]] = []
        for repeat in range(args.repeats):
            kafka_wall, kafka_cpu = read_once(kafka_frame, None)
            ours_wall, ours_cpu = read_once(stratalog_frame, broker_pid)
            run = {"kafka_rows_per_s": args.records / kafka_wall, "kafka_cpu_s": kafka_cpu,
                   "stratalog_rows_per_s": args.records / ours_wall, "stratalog_cpu_s": ours_cpu}
            runs.append(run)
            print(f"repeat {repeat + 1}: Kafka source {run['kafka_rows_per_s'] / 1e6:.2f} M rows/s "
                  f"({kafka_cpu:.1f} CPU s), stratalog {run['stratalog_rows_per_s'] / 1e6:.2f} M rows/s "
                  f"({ours_cpu:.1f} CPU s)", flush=True)
        figures = summarize(runs, args.records)
        figures.update({"records": args.records, "bytes": size, "load_average": load, "runs": runs,
                        "minutes": (time.monotonic() - began) / 60,
                        "pyspark": spark.version, "jars": sorted(jar.name for jar in jars.glob("*.jar"))})
        print(report(figures))
        args.out.write_text(markdown(figures, described, command.strip()))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
    finally:
        if spark is not None:
            spark.stop()
        broker.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


def summarize(runs: list[dict[str, Any]], records: int) -> dict[str, Any]:
    def median(key: str) -> float:
        return float(statistics.median(r[key] for r in runs))

    per_million = {side: statistics.median(r[f"{side}_cpu_s"] for r in runs) / records * 1e6
                   for side in ("kafka", "stratalog")}
    return {"kafka_rows_per_s": median("kafka_rows_per_s"), "stratalog_rows_per_s": median("stratalog_rows_per_s"),
            "rows_ratio": statistics.median(r["stratalog_rows_per_s"] / r["kafka_rows_per_s"] for r in runs),
            "kafka_cpu_s_per_million": per_million["kafka"],
            "stratalog_cpu_s_per_million": per_million["stratalog"],
            "cpu_ratio": statistics.median(r["stratalog_cpu_s"] / r["kafka_cpu_s"] for r in runs)}


def report(f: dict[str, Any]) -> str:
    return "\n".join([
        f"Spark full-topic read into noop, local[2], {f['records']:,} records, median of {len(f['runs'])}:",
        f"  Kafka 4.3.1 + format(\"kafka\")   {f['kafka_rows_per_s'] / 1e6:6.2f} M rows/s   "
        f"{f['kafka_cpu_s_per_million']:5.2f} CPU s per M rows (Spark, Python, broker)",
        f"  format(\"stratalog\") on the files {f['stratalog_rows_per_s'] / 1e6:6.2f} M rows/s   "
        f"{f['stratalog_cpu_s_per_million']:5.2f} CPU s per M rows (Spark, Python)",
        f"  stratalog/Kafka: rows/s {f['rows_ratio']:.2f} (goal >= 1.5), CPU s {f['cpu_ratio']:.2f} (goal <= 1.0); "
        "medians of each repeat's ratio"])


def markdown(f: dict[str, Any], described: dict[str, object], command: str) -> str:
    rows = "\n".join(
        f"| {i + 1} | {r['kafka_rows_per_s'] / 1e6:.2f} | {r['kafka_cpu_s']:.1f} | {r['stratalog_rows_per_s'] / 1e6:.2f} "
        f"| {r['stratalog_cpu_s']:.1f} | {r['stratalog_rows_per_s'] / r['kafka_rows_per_s']:.2f} "
        f"| {r['stratalog_cpu_s'] / r['kafka_cpu_s']:.2f} |" for i, r in enumerate(f["runs"]))
    return f"""<!-- Generated by bench/spark_peer.py; regenerate it, never edit it by hand. -->
# Spark: format("stratalog") against Spark's own Kafka source on Apache Kafka {KAFKA_VERSION}

Generated by `{command}` on {time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())} ({f["minutes"]:.0f} min).
{f["records"]:,} records (10-byte keys, 100-byte values; {f["bytes"] / 2**20:.0f} MiB of segments) written to the
broker by Spark's Kafka sink; each repeat reads the whole topic into `noop` on `local[2]` through
`format("kafka")` from the broker, then through `format("stratalog")` from a copy of the broker's
segment files. CPU seconds: this driver, Spark's JVM and Python workers, and for Kafka's read the
broker. How it is measured: `bench/spark_peer.py`'s docstring.

```
{machine.format_description(described)}
spark:       {f["pyspark"]} (local[2]); Kafka source jars: {", ".join(f["jars"])}
```

| | Kafka source | stratalog | stratalog / Kafka | goal |
|---|--:|--:|--:|---|
| rows/s ↑ | {f["kafka_rows_per_s"] / 1e6:.2f} M | {f["stratalog_rows_per_s"] / 1e6:.2f} M | {f["rows_ratio"]:.2f} | ≥ 1.5 |
| CPU s per million rows ↓ | {f["kafka_cpu_s_per_million"]:.2f} | {f["stratalog_cpu_s_per_million"]:.2f} | {f["cpu_ratio"]:.2f} | ≤ 1.0 |

Cells are medians over the repeats; each ratio is the median of the repeats' own ratios.

| repeat | Kafka M rows/s | Kafka CPU s | stratalog M rows/s | stratalog CPU s | rows/s ratio | CPU ratio |
|--:|--:|--:|--:|--:|--:|--:|
{rows}
"""


if __name__ == "__main__":
    sys.exit(main())
