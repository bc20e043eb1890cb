"""stratalog against Apache Kafka 4.3.1 on this machine, figure by figure (issue 5, item 3).

    python -m bench.compare [--size-mb N] [--compact-mb N] [--segments N] [--repeats R]
                            [--service-seconds S] [--clients C] [--dir D] [--out FILE] [--json F] [--quick]

Every figure is measured as paired repetitions -- Kafka, stratalog, Kafka, stratalog, ... -- in
this one process tree on this one machine, and reported as each side's median with its spread
(min-max) and the ratio of the medians, stratalog / Kafka. The run ends by writing
``bench/RESULTS.md`` (regenerated on every run: never edit it by hand) with the machine's
description, the load average, ``dd``'s page-cache bandwidth as the physical ceiling, and the table.

Storage layer, in process, no network. Kafka's side is ``bench/kafka/harness/KafkaLogBench.java``
(ours), compiled at run time against the pinned jars (``scripts/kafka-toolchain``) into a cache
outside the repository and run one JVM per measurement; it calls Kafka's own ``UnifiedLog``,
``LogSegment`` and ``Cleaner``. stratalog's side runs the same workload through the engine's
public entry points, one Python process per measurement (``python -m bench.compare _side ...``,
or ``bench.append_child`` for the appends):

* append: 1 KiB records, 16 per uncompressed v2 batch (16,589 B), a pool of 64 distinct batches
  appended round-robin through the leader path (``UnifiedLog.appendAsLeader`` / ``Log.append``),
  one partition, default topic configs (``segment.bytes`` 1 GiB, no fsync); ``--size-mb``. The
  appending process is then killed with SIGKILL (its recovery-point checkpoint says 0).
* open after unclean shutdown: the killed process's directory opened the way the broker's
  LogManager opens it (checkpoints, no clean-shutdown marker, recovery from offset 0:
  ``UnifiedLog.create`` / ``open_log_manager``), so all ``--size-mb`` are CRC-scanned.
* sequential read: right after that open, the whole log in 1 MiB fetches
  (``UnifiedLog.read(offset, 1 MiB, HIGH_WATERMARK)`` with the bytes copied into a heap buffer /
  ``Log.read``), each next fetch starting after the last complete batch of the previous one.
* open after clean shutdown: ``--segments`` one-batch segments, written once by stratalog and
  copied afresh for every run of either side.
* compaction: a compacted partition of ``--compact-mb`` of 1 KiB records and again of 100-byte
  records, keys drawn so 10% of the records are distinct keys, 64 MiB segments all rolled;
  written once by stratalog (``bench.cleaning``'s fill) and copied afresh for every run; one
  cleaner with the default 128 MiB dedupe buffer cleans until nothing is cleanable. MiB/s and
  records/s over the log's size and record count before cleaning.

Service level, over loopback, ``--clients`` concurrent clients (one partition each), each
closed-loop (one request in flight), all in one asyncio loop of this process: a real Kafka
broker (KRaft, single node, started as ``tests/kafka_broker.py`` does but with
``kafka-server-start.sh``'s JVM settings and Kafka's default thread counts) driven with
ProduceRequest v9 / FetchRequest v12 frames carrying the very same pre-built 16 KiB batches,
against ``stratalog serve`` driven with ``bench/service.py``'s requests (raw-batch POST, binary
GET), each side twice: by minimal drivers and by library clients (``bench/service_drivers.py``
says what each does and why both). Produce with acks=1 for ``--service-seconds``, then fetch
16 KiB at a time from offset 0 (starting over at the end) for as long; MiB/s, per-request p99
latency and the client's CPU per request. Then the same ``stratalog serve`` is driven over its
Kafka listener by the very drivers and frames Kafka's broker was (the "over the Kafka protocol"
rows, whose Kafka column is that broker's same run).

Benchmarks print and record; they never assert on time (they do check that what they read
back is complete).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from stratalog.broker.topics import TopicAdmin
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import machine
from . import compare_report
from .compare_report import markdown
from .service_drivers import (
    DRIVERS,
    SERVICE_ROWS,
    Load,
    create_stratalog_topic,
    kafka_service,
    stratalog_service,
)
from .service import kafka_address, start_server
from .workload import MIB, RECORDS_PER_BATCH, TOPIC, Stopwatch, build_pool, read_raw, write_small_segments

REPO = Path(__file__).resolve().parent.parent
HARNESS_SOURCE = REPO / "bench" / "kafka" / "harness" / "KafkaLogBench.java"
HARNESS_CLASS = "KafkaLogBench"
KAFKA_VERSION = compare_report.KAFKA_VERSION
# The JVM settings kafka-server-start.sh / kafka-run-class.sh give a broker (KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS), used for the harness and the broker alike.
KAFKA_JVM_OPTIONS = (
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)
COMPACT_TOPIC = "c"
COMPACT_SEGMENT_BYTES = 64 * MIB
COMPACT_OVERRIDES = {"cleanup.policy": "compact", "segment.bytes": str(COMPACT_SEGMENT_BYTES),
                     "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}
SMALL_TOPIC = "small"
SMALL_SEGMENT_BYTES = 200
FETCH_BYTES = 1 << 20
SERVICE_FETCH_BYTES = 16 * 1024
CHILD_TIMEOUT_S = 3600


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- processes ------------------------------------------------------------------------------------

def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "KAFKA_OPTS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _last_json_line(stdout: str, command: Sequence[str], stderr: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise RuntimeError(f"no JSON result from {' '.join(command)}\n--- stdout ---\n{stdout[-3000:]}\n"
                       f"--- stderr ---\n{stderr[-5000:]}")


def run_json(command: Sequence[str]) -> dict[str, Any]:
    """Run ``command`` to completion; its last stdout line that is a JSON object is the result."""
    done = subprocess.run(list(command), cwd=REPO, env=_clean_env(), capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}\n--- stdout ---\n"
                           f"{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-5000:]}")
    return _last_json_line(done.stdout, command, done.stderr)


def run_json_then_kill(command: Sequence[str]) -> dict[str, Any]:
    """Start ``command``, read its one JSON line, then SIGKILL it (the unclean shutdown)."""
    err_path = Path(tempfile.mkstemp(prefix="stratalog-compare-", suffix=".err")[1])
    try:
        with open(err_path, "w") as err:
            child = subprocess.Popen(list(command), cwd=REPO, env=_clean_env(), stdout=subprocess.PIPE,
                                     stderr=err, text=True)
        assert child.stdout is not None
        line = child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        if not line.startswith("{"):
            raise RuntimeError(f"{' '.join(command)} reported no result (exit {child.returncode}):\n{line}"
                               f"{err_path.read_text(errors='replace')[-5000:]}")
        if child.returncode != -signal.SIGKILL:
            raise RuntimeError(f"{' '.join(command)} ended with {child.returncode}, not by SIGKILL")
        result: dict[str, Any] = json.loads(line)
        return result
    finally:
        err_path.unlink(missing_ok=True)


# -- Kafka's side: the jars and our harness -------------------------------------------------------

def kafka_libs() -> Path:
    done = subprocess.run(["bash", str(REPO / "scripts" / "kafka-toolchain")], capture_output=True, text=True,
                          timeout=900, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not Path(lines[-1]).is_dir():
        raise SystemExit(f"scripts/kafka-toolchain failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    return Path(lines[-1])


def compile_harness(libs: Path) -> Path:
    """javac the harness into a cache directory keyed by its source and the jars (never into the repo)."""
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit("javac is not on PATH (the Kafka harness is compiled at run time; needs a JDK 17+)")
    source = HARNESS_SOURCE.read_bytes()
    key = hashlib.sha256(source + str(libs).encode() + b"\0" + KAFKA_VERSION.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("STRATALOG_CACHE", Path.home() / ".cache" / "stratalog"))
    classes = cache / "kafka-bench-harness" / key
    if (classes / f"{HARNESS_CLASS}.class").exists():
        return classes
    tmp = classes.with_name(f"{key}.tmp.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    done = subprocess.run([javac, "-nowarn", "-cp", f"{libs}/*", "-d", str(tmp), str(HARNESS_SOURCE)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"javac failed on {HARNESS_SOURCE}:\n{done.stdout}{done.stderr}")
    shutil.rmtree(classes, ignore_errors=True)
    tmp.rename(classes)
    return classes


@dataclass(frozen=True)
class KafkaHarness:
    libs: Path
    classes: Path

    def command(self, subcommand: str, *args: str) -> list[str]:
        java = shutil.which("java") or "java"
        return [java, *KAFKA_JVM_OPTIONS, "-cp", f"{self.classes}{os.pathsep}{self.libs}/*", HARNESS_CLASS,
                subcommand, *args]


def stratalog_side(subcommand: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "bench.compare", "_side", subcommand, *args]


# -- stratalog's side (run in a child: python -m bench.compare _side ...) --------------------------

def _timed(watch: Stopwatch) -> dict[str, float]:
    return watch.timed.as_dict()


def side_open(data_dir: Path, reads: int) -> dict[str, Any]:
    from stratalog.storage.log_manager import open_log_manager

    with Stopwatch() as watch:
        manager = open_log_manager([data_dir])
    out: dict[str, Any] = _timed(watch)
    logs = list(manager.logs().values())
    if len(logs) != 1:
        raise RuntimeError(f"expected one partition in {data_dir}, found {len(logs)}")
    log = logs[0]
    clean = all(manager.had_clean_shutdown().values())
    out.update(had_clean_shutdown=clean, log_end_offset=log.log_end_offset, log_bytes=log.size,
               segments=len(log.segments), recovery_point=log.recovery_point)
    runs = []
    for _ in range(reads):
        raw = read_raw(log, FETCH_BYTES)
        runs.append({**raw.timed.as_dict(), "fetches": raw.fetches, "batches": raw.batches, "records": raw.records,
                     "bytes": raw.bytes})
    if reads:
        out["reads"] = runs
    started = time.perf_counter()
    manager.close()
    out["close_seconds"] = time.perf_counter() - started
    return out


def side_clean(data_dir: Path) -> dict[str, Any]:
    from stratalog.storage.cleaner import LogCleaner
    from stratalog.common.config import EngineConfig
    from stratalog.storage.log_manager import LogManager

    config = EngineConfig.from_properties({"log.cleaner.threads": "1"})
    manager = LogManager([data_dir], config).open()
    log = next(iter(manager.logs().values()))
    rss_before = _rss_mib()
    size_before, segments_before = log.size, len(log.segments)
    cleaner = LogCleaner(manager)
    passes = 0
    stats = []
    with Stopwatch() as watch:
        while True:
            reports = cleaner.run_pass()
            if not reports:
                break
            passes += 1
            stats.append(reports[0].stats)
    out: dict[str, Any] = _timed(watch)
    out.update(passes=passes, log_bytes_before=size_before, log_bytes_after=log.size,
               segments_before=segments_before, segments_after=len(log.segments),
               records_read=sum(s.records_read for s in stats), records_written=sum(s.records_retained for s in stats),
               io_bytes_read=sum(s.bytes_read for s in stats), io_bytes_written=sum(s.bytes_written for s in stats),
               log_end_offset=log.log_end_offset,
               # ru_maxrss is the process's peak (KiB on Linux): what cleaning added to the opened log's RSS
               rss_before_mib=rss_before, peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               dedupe_buffer_mib=config.log_cleaner_dedupe_buffer_size / MIB)
    manager.close()
    return out


def _rss_mib() -> float:
    """This process's resident set now (``VmRSS``), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def side_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare _side")
    parser.add_argument("subcommand", choices=["open", "clean"])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--reads", type=int, default=0)
    args = parser.parse_args(argv)
    result = side_open(args.dir, args.reads) if args.subcommand == "open" else side_clean(args.dir)
    print(json.dumps(result), flush=True)


# -- figures --------------------------------------------------------------------------------------

@dataclass
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    ceiling: float | None = None
    ceiling_label: str = ""
    kafka: list[float] = field(default_factory=list)
    stratalog: list[float] = field(default_factory=list)
    kafka_cpu: list[float] = field(default_factory=list)  # CPU seconds of the measured span, per run
    stratalog_cpu: list[float] = field(default_factory=list)
    note: str = ""

    def add(self, side: str, value: float, cpu: float | None = None) -> None:
        getattr(self, side).append(value)
        if cpu is not None:
            getattr(self, f"{side}_cpu").append(cpu)

    @property
    def ratio(self) -> float | None:
        if not self.kafka or not self.stratalog:
            return None
        k = statistics.median(self.kafka)
        return statistics.median(self.stratalog) / k if k else None

    @property
    def pair_ratios(self) -> list[float]:
        return [s / k for k, s in zip(self.kafka, self.stratalog) if k]


class FigureSet:
    def __init__(self) -> None:
        self.items: dict[str, Figure] = {}

    def define(self, key: str, label: str, unit: str, higher_is_better: bool, ceiling: float | None = None,
               ceiling_label: str = "", note: str = "") -> Figure:
        figure = Figure(key, label, unit, higher_is_better, ceiling, ceiling_label, note=note)
        self.items[key] = figure
        return figure

    def __getitem__(self, key: str) -> Figure:
        return self.items[key]


def _cpu(result: dict[str, Any]) -> float:
    return float(result.get("user_cpu_s", 0.0)) + float(result.get("system_cpu_s", 0.0))


# -- storage: append, unclean open, read ------------------------------------------------------------

def append_open_read(work: Path, args: argparse.Namespace, harness: KafkaHarness, figures: FigureSet,
                     ceilings: machine.Ceilings, details: dict[str, Any]) -> None:
    size_bytes = args.size_mb * MIB
    runs: dict[str, list[dict[str, Any]]] = {"kafka": [], "stratalog": []}
    for rep in range(args.repeats):
        for side in ("kafka", "stratalog"):
            data = work / f"{side}-append" / "data"
            shutil.rmtree(data.parent, ignore_errors=True)
            data.parent.mkdir(parents=True)
            machine.settle(ceilings.settle_seconds)
            progress(f"[{rep + 1}/{args.repeats}] {side}: append {args.size_mb} MiB, SIGKILL, open (recovery from 0), "
                     "sequential read")
            if side == "kafka":
                appended = run_json_then_kill(harness.command("append", "--dir", str(data),
                                                              "--size-bytes", str(size_bytes)))
                opened = run_json(harness.command("open", "--dir", str(data), "--reads", "1"))
            else:
                appended = run_json_then_kill([sys.executable, "-m", "bench.append_child", str(data),
                                               str(size_bytes)])
                opened = run_json(stratalog_side("open", "--dir", str(data), "--reads", "1"))
            if opened["had_clean_shutdown"] or opened["log_end_offset"] != appended["log_end_offset"]:
                raise RuntimeError(f"{side}: reopened log at LEO {opened['log_end_offset']} (clean shutdown: "
                                   f"{opened['had_clean_shutdown']}), appended up to {appended['log_end_offset']}")
            read = opened["reads"][0]
            if read["bytes"] != opened["log_bytes"] or read["records"] != appended["records"]:
                raise RuntimeError(f"{side}: the read returned {read['bytes']} bytes / {read['records']} records of "
                                   f"{opened['log_bytes']} / {appended['records']}")
            wall = appended["seconds"]
            figures["append_mib"].add(side, appended["bytes"] / MIB / wall, _cpu(appended))
            figures["append_rec"].add(side, appended["records"] / wall, _cpu(appended))
            figures["unclean_open"].add(side, opened["seconds"] * 1000, _cpu(opened))
            figures["read_mib"].add(side, read["bytes"] / MIB / read["seconds"], _cpu(read))
            runs[side].append({"append": appended, "open": {k: v for k, v in opened.items() if k != "reads"},
                               "read": read, "loadavg": machine.load_average()})
            shutil.rmtree(data.parent, ignore_errors=True)
    details["append_open_read"] = runs


# -- storage: clean open of many segments -----------------------------------------------------------

def make_small_segments(directory: Path, count: int) -> tuple[int, float]:
    """``count`` one-batch segments written with stratalog's LogSegment, then a clean open + close."""
    from stratalog.storage.log_manager import open_log_manager
    from stratalog.common.names import TopicPartition

    manager = open_log_manager([directory])
    TopicAdmin(manager).create_topic(SMALL_TOPIC, 1, {"segment.bytes": str(SMALL_SEGMENT_BYTES)})
    config = manager.get_log(SMALL_TOPIC, 0).config
    manager.close()
    started = time.perf_counter()
    written = write_small_segments(directory / TopicPartition(SMALL_TOPIC, 0).dir_name, count, config)
    # one clean open and close, so the checkpoints hold what a clean shutdown leaves
    open_log_manager([directory]).close()
    return written, time.perf_counter() - started


def clean_open_small(work: Path, args: argparse.Namespace, harness: KafkaHarness, figures: FigureSet,
                     details: dict[str, Any]) -> None:
    source = work / "small-source"
    progress(f"write {args.segments} one-batch segments (stratalog LogSegment), once for both sides")
    written, seconds = make_small_segments(source, args.segments)
    # Each side opens the segments as its own clean shutdown leaves them: stratalog's source has had a
    # stratalog open + close; Kafka's copy gets one Kafka open + close (its producer-state snapshot, its
    # checkpoints and marker), untimed, before it is copied for the measured runs.
    sources = {"stratalog": source, "kafka": work / "small-source-kafka"}
    shutil.copytree(source, sources["kafka"])
    progress("one untimed Kafka open + clean shutdown of its copy")
    run_json(harness.command("open", "--dir", str(sources["kafka"])))
    floors = []
    runs: dict[str, list[dict[str, Any]]] = {"kafka": [], "stratalog": []}
    for rep in range(args.repeats):
        for side in ("kafka", "stratalog"):
            data = work / f"{side}-small"
            shutil.rmtree(data, ignore_errors=True)
            shutil.copytree(sources[side], data)
            floors.append(machine.open_floor_seconds(data / f"{SMALL_TOPIC}-0"))
            progress(f"[{rep + 1}/{args.repeats}] {side}: open after clean shutdown, {args.segments} segments")
            if side == "kafka":
                opened = run_json(harness.command("open", "--dir", str(data)))
            else:
                opened = run_json(stratalog_side("open", "--dir", str(data)))
            if not opened["had_clean_shutdown"] or opened["segments"] != args.segments:
                raise RuntimeError(f"{side}: opened {opened['segments']} segments (clean shutdown: "
                                   f"{opened['had_clean_shutdown']}), expected {args.segments} after a clean one")
            figures["clean_open"].add(side, opened["seconds"] * 1000, _cpu(opened))
            runs[side].append({**opened, "loadavg": machine.load_average()})
            shutil.rmtree(data, ignore_errors=True)
    figure = figures["clean_open"]
    figure.ceiling = statistics.median(floors) * 1000
    details["clean_open_small"] = {"segments": args.segments, "bytes": written, "write_seconds": seconds,
                                   "floor_runs_s": floors, **runs}
    for path in sources.values():
        shutil.rmtree(path, ignore_errors=True)


# -- storage: compaction ------------------------------------------------------------------------------

def make_compacted(directory: Path, size_mb: int, record_bytes: int) -> dict[str, Any]:
    from stratalog.common.config import EngineConfig
    from stratalog.storage.log_manager import LogManager

    from .cleaning import _fill

    manager = LogManager([directory], EngineConfig.from_properties({"log.cleaner.threads": "1"})).open()
    TopicAdmin(manager).create_topic(COMPACT_TOPIC, 1, COMPACT_OVERRIDES)
    started = time.perf_counter()
    records, keys = _fill(manager, COMPACT_TOPIC, size_mb * MIB, record_bytes, 0.10)
    log = manager.get_log(COMPACT_TOPIC, 0)
    info = {"records": records, "key_space": keys, "log_bytes": log.size, "segments": len(log.segments),
            "fill_seconds": time.perf_counter() - started}
    manager.close()
    return info


def compaction(work: Path, args: argparse.Namespace, harness: KafkaHarness, figures: FigureSet,
               details: dict[str, Any]) -> None:
    kafka_config = [arg for k, v in COMPACT_OVERRIDES.items() for arg in ("--config", f"{k}={v}")]
    for record_bytes in (1024, 100):
        source = work / f"compact-{record_bytes}-source"
        progress(f"fill {args.compact_mb} MiB of {record_bytes}-byte keyed records (10% distinct keys), once")
        info = make_compacted(source, args.compact_mb, record_bytes)
        runs: dict[str, list[dict[str, Any]]] = {"kafka": [], "stratalog": []}
        for rep in range(args.repeats):
            for side in ("kafka", "stratalog"):
                data = work / f"{side}-compact"
                shutil.rmtree(data, ignore_errors=True)
                shutil.copytree(source, data)
                progress(f"[{rep + 1}/{args.repeats}] {side}: compact {info['log_bytes'] / MIB:.0f} MiB of "
                         f"{record_bytes}-byte records")
                if side == "kafka":
                    cleaned = run_json(harness.command("clean", "--dir", str(data), *kafka_config))
                else:
                    cleaned = run_json(stratalog_side("clean", "--dir", str(data)))
                if cleaned["log_bytes_before"] != info["log_bytes"] or cleaned["passes"] < 1:
                    raise RuntimeError(f"{side}: cleaned {cleaned}, expected a log of {info['log_bytes']} bytes")
                seconds = cleaned["seconds"]
                figures[f"compact_{record_bytes}_mib"].add(side, info["log_bytes"] / MIB / seconds, _cpu(cleaned))
                figures[f"compact_{record_bytes}_rec"].add(side, info["records"] / seconds, _cpu(cleaned))
                runs[side].append({**cleaned, "loadavg": machine.load_average()})
                shutil.rmtree(data, ignore_errors=True)
        after = {side: {r["log_bytes_after"] for r in runs[side]} for side in runs}
        details[f"compaction_{record_bytes}"] = {**info, **runs, "log_bytes_after": {k: sorted(v) for k, v in
                                                                                     after.items()}}
        shutil.rmtree(source, ignore_errors=True)


# -- service level --------------------------------------------------------------------------------------
#
# The drivers (closed loops in one asyncio loop of this process, minimal and library) are
# bench/service_drivers.py's.

def start_stratalog_serve(directory: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """``stratalog serve`` on free loopback ports, no periodic tasks, as bench/service.py starts it, with its
    Kafka listener: (process, API URL, Kafka address)."""
    process, url = start_server(directory, log_path, env=_clean_env(), extra=("--kafka-listen", "127.0.0.1:0"))
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


# -- the run ----------------------------------------------------------------------------------------------

def define_figures(args: argparse.Namespace, ceilings: machine.Ceilings) -> FigureSet:
    figures = FigureSet()
    dd_w, dd_r = ceilings.write_mib_s, ceilings.read_mib_s
    batch_bytes = 16_589
    record_share = batch_bytes / RECORDS_PER_BATCH
    size = f"{args.size_mb} MiB" if args.size_mb < 1024 else f"{args.size_mb / 1024:g} GiB"
    csize = f"{args.compact_mb} MiB" if args.compact_mb < 1024 else f"{args.compact_mb / 1024:g} GiB"
    figures.define("append_mib", f"append, 1 KiB records, 16/batch, {size}, no fsync", "MiB/s", True, dd_w, "dd write")
    figures.define("append_rec", "append, records", "rec/s", True, dd_w * MIB / record_share, "dd write / record")
    figures.define("read_mib", f"sequential read, 1 MiB fetches, {size}", "MiB/s", True, dd_r, "dd read")
    figures.define("unclean_open", f"open after unclean shutdown, {size} past the recovery point", "ms", False,
                   args.size_mb / dd_r * 1000, "dd read of the same bytes")
    figures.define("clean_open", f"open after clean shutdown, {args.segments:,} segments", "ms", False, None,
                   "list dir + open/fstat/close each .log")
    for record_bytes, name in ((1024, "1 KiB"), (100, "100-byte")):
        figures.define(f"compact_{record_bytes}_mib", f"compaction, {csize} of {name} records, 10% unique keys",
                       "MiB/s", True, dd_r, "dd read")
        figures.define(f"compact_{record_bytes}_rec", f"compaction, {name} records", "rec/s", True, dd_r * MIB /
                       (record_bytes + 0.0), "dd read / record")
    clients = f"{args.clients} clients"
    for prefix, how in (("", ""), ("wire_", " over the Kafka protocol"), ("lib_", ", library clients"),
                        ("lib_wire_", " over the Kafka protocol, library clients")):
        figures.define(f"{prefix}produce_mib", f"service produce{how}, acks=1, 16 KiB batches, {clients}", "MiB/s",
                       True)
        figures.define(f"{prefix}produce_p99", f"service produce{how}, p99 latency per request", "ms", False)
        figures.define(f"{prefix}fetch_mib", f"service fetch{how}, 16 KiB fetches, {clients}", "MiB/s", True)
        figures.define(f"{prefix}fetch_p99", f"service fetch{how}, p99 latency per request", "ms", False)
        figures.define(f"{prefix}produce_client_us", f"service produce{how}: client CPU per request (this process)",
                       "µs", False)
        figures.define(f"{prefix}fetch_client_us", f"service fetch{how}: client CPU per request (this process)", "µs",
                       False)
    figures.define("kp_produce_mib", "informative: kafka-python KafkaProducer(batch_size=16384, linger_ms=5, acks=1), "
                   "1 KiB records", "MiB/s", True)
    figures.define("kp_produce_p99", "informative: KafkaProducer p99 latency per record (send to ack)", "ms", False)
    figures.define("kp_fetch_mib", "informative: kafka-python KafkaConsumer, max_partition_fetch_bytes=16384",
                   "MiB/s", True)
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every phase in turn; a phase that fails is reported (and the others still run)."""
    started = time.perf_counter()
    base = Path(args.dir) if args.dir else None
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="stratalog-compare-", dir=base))
    details: dict[str, Any] = {}
    errors: dict[str, str] = {}
    timings: dict[str, float] = {}

    def result() -> dict[str, Any]:
        return {
            "command": "python -m bench.compare " + " ".join(args.argv),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "params": {k: getattr(args, k) for k in ("size_mb", "compact_mb", "segments", "repeats",
                                                     "service_seconds", "clients", "quick")},
            "machine": info,
            "ceilings": asdict(ceilings),
            "figures": [asdict(f) | {"ratio": f.ratio, "pair_ratios": f.pair_ratios}
                        for f in figures.items.values() if f.kafka or f.stratalog],
            "phase_seconds": timings,
            "errors": errors,
            "elapsed_s": time.perf_counter() - started,
            "details": details,
        }

    try:
        progress("Kafka jars (scripts/kafka-toolchain) and the harness (javac, cached)")
        libs = kafka_libs()
        harness = KafkaHarness(libs, compile_harness(libs))
        info = machine.describe(work)
        info["java"] = _java_version()
        progress(f"dd ceilings ({args.size_mb} MiB, 3 runs) in {work}")
        ceilings = machine.page_cache_ceilings(work / "dd", args.size_mb, 3, args.settle, batches=build_pool())
        shutil.rmtree(work / "dd", ignore_errors=True)
        print(machine.format_description(info, ceilings), flush=True)
        figures = define_figures(args, ceilings)
        phases: list[tuple[str, Callable[[], None]]] = [
            ("append_open_read", lambda: append_open_read(work, args, harness, figures, ceilings, details)),
            ("clean_open", lambda: clean_open_small(work, args, harness, figures, details)),
            ("compaction", lambda: compaction(work, args, harness, figures, details)),
            ("service", lambda: service(work, args, libs, figures, details)),
        ]
        for name, phase in phases:
            if args.only and name not in args.only:
                continue
            phase_started = time.perf_counter()
            try:
                phase()
            except Exception as error:  # noqa: BLE001 - reported in RESULTS.md; the other phases still run
                import traceback

                errors[name] = "".join(traceback.format_exception_only(type(error), error)).strip()[:3000]
                progress(f"{name} FAILED: {errors[name]}")
                traceback.print_exc()
            timings[name] = time.perf_counter() - phase_started
            progress(f"{name} done in {timings[name]:.0f} s (load average {machine.load_average()})")
            info["loadavg_at_end"] = machine.load_average()
            if args.json is not None:  # partial results survive a later failure
                args.json.write_text(json.dumps(result(), indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info["loadavg_at_end"] = machine.load_average()
    return result()


def _java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[1].strip() if len(lines) > 1 else (lines[0] if lines else "?")


# -- main ---------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_side":
        side_main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=None, help="MiB appended, recovered and read (default 1024)")
    parser.add_argument("--compact-mb", type=int, default=None,
                        help="MiB of each compaction input (default 1024)")
    parser.add_argument("--segments", type=int, default=None, help="segments of the clean-open log (10000)")
    parser.add_argument("--repeats", type=int, default=None, help="pairs per figure (default 3)")
    parser.add_argument("--service-seconds", type=float, default=None, help="per service operation (default 10)")
    parser.add_argument("--clients", type=int, default=8, help="service clients, one partition each (default 8)")
    parser.add_argument("--settle", type=float, default=None,
                        help="seconds to wait before each write (default 5 with free page reporting, else 0)")
    parser.add_argument("--only", action="append", choices=["append_open_read", "clean_open", "compaction", "service"],
                        help="run only these phases (repeatable)")
    parser.add_argument("--dir", default=None, help="parent of the work directory (default /tmp)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md", help="Markdown output")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure and run as JSON")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 64 MiB, 64 MiB compaction, 1,000 segments, 1 pair, 3 s service")
    parser.add_argument("--render", type=Path, default=None, metavar="JSON",
                        help="measure nothing: rewrite --out from the JSON a previous run saved with --json")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.render is not None:
        text = markdown(json.loads(args.render.read_text()))
        args.out.write_text(text)
        progress(f"wrote {args.out} from {args.render}")
        return
    q = args.quick
    args.size_mb = args.size_mb or (64 if q else 1024)
    args.compact_mb = args.compact_mb or (64 if q else 1024)
    args.segments = args.segments or (1000 if q else 10_000)
    args.repeats = args.repeats or (1 if q else 3)
    args.service_seconds = args.service_seconds or (3.0 if q else 10.0)
    result = run(args)
    text = markdown(result)
    args.out.write_text(text)
    print(text)
    progress(f"wrote {args.out} ({result['elapsed_s'] / 60:.1f} min)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
