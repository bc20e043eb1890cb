"""The storage figures of ``bench.compare``: append, open after an unclean and a clean shutdown,
sequential read, compaction; Kafka's side through our harness, stratalog's through the engine's
public entry points, one child process per measurement (``python -m bench.compare_storage ...``,
or ``bench.append_child`` for the appends)."""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from stratalog.broker.topics import TopicAdmin

from . import machine
from .compare_figures import FigureSet, cpu_seconds
from .compare_processes import KafkaHarness, progress, run_json, run_json_then_kill
from .workload import MIB, Stopwatch, read_raw, write_small_segments

COMPACT_TOPIC = "c"
COMPACT_SEGMENT_BYTES = 64 * MIB
COMPACT_OVERRIDES = {"cleanup.policy": "compact", "segment.bytes": str(COMPACT_SEGMENT_BYTES),
                     "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}
SMALL_TOPIC = "small"
SMALL_SEGMENT_BYTES = 200
FETCH_BYTES = 1 << 20


def stratalog_side(subcommand: str, *args: str) -> list[str]:
    """The command of a stratalog-side measurement in a child process of its own."""
    return [sys.executable, "-m", "bench.compare_storage", subcommand, *args]


# -- stratalog's side (run in a child) ------------------------------------------------------------

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
    parser = argparse.ArgumentParser(prog="python -m bench.compare_storage")
    parser.add_argument("subcommand", choices=["open", "clean"])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--reads", type=int, default=0)
    args = parser.parse_args(argv)
    result = side_open(args.dir, args.reads) if args.subcommand == "open" else side_clean(args.dir)
    print(json.dumps(result), flush=True)


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
            figures["append_mib"].add(side, appended["bytes"] / MIB / wall, cpu_seconds(appended))
            figures["append_rec"].add(side, appended["records"] / wall, cpu_seconds(appended))
            figures["unclean_open"].add(side, opened["seconds"] * 1000, cpu_seconds(opened))
            figures["read_mib"].add(side, read["bytes"] / MIB / read["seconds"], cpu_seconds(read))
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
            figures["clean_open"].add(side, opened["seconds"] * 1000, cpu_seconds(opened))
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
                figures[f"compact_{record_bytes}_mib"].add(side, info["log_bytes"] / MIB / seconds, cpu_seconds(cleaned))
                figures[f"compact_{record_bytes}_rec"].add(side, info["records"] / seconds, cpu_seconds(cleaned))
                runs[side].append({**cleaned, "loadavg": machine.load_average()})
                shutil.rmtree(data, ignore_errors=True)
        after = {side: {r["log_bytes_after"] for r in runs[side]} for side in runs}
        details[f"compaction_{record_bytes}"] = {**info, **runs, "log_bytes_after": {k: sorted(v) for k, v in
                                                                                     after.items()}}
        shutil.rmtree(source, ignore_errors=True)


if __name__ == "__main__":
    side_main(sys.argv[1:])
