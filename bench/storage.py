"""Storage benchmarks (issue 2): each figure next to this machine's own ceiling.

    python -m bench.storage [--size-mb N] [--dir D] [--json out.json] [--quick]

Figures, all on one partition of a topic with default configs (segment.bytes 1 GiB,
no fsync: flush.messages/flush.ms unlimited):

* append: 1 KiB records, 16 per uncompressed batch, a pool of 64 distinct pre-built
  batches appended round-robin through ``Log.append`` (the validated leader path);
  MiB/s and records/s against dd's page-cache write bandwidth. The appends run in a
  child process, which the parent then kills with SIGKILL: the same data serves
  the unclean-shutdown figure.
* open after unclean shutdown: ``open_log_manager`` on the killed child's
  directory, whose recovery-point checkpoint is 0, so every byte is CRC-scanned;
  its time, and the scan's MiB/s against dd's page-cache read bandwidth.
* open after clean shutdown (``LogManager.close`` then ``open_log_manager``), of
  that log and of a log of 10,000 small segments, against a filesystem floor (list
  the directory, open + fstat + close every ``.log``).
* sequential read: the whole partition with ``Log.read(offset, 1 MiB)`` advancing
  past the last complete batch (raw bytes, the fetch path), and with
  ``Log.read_records`` (decoded records); MiB/s and records/s against dd read.
* roll: an append that rolls, in the 10,000-segment log against a fresh one.

Ratios are the fraction of the ceiling reached (1.00 = as fast as the machine
allows): value / ceiling for rates, ceiling / value for times. Benchmarks print;
they never assert on time (they do check that what they read back is complete).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stratalog.storage.checkpoint import OffsetCheckpointFile
from stratalog.storage.log import wall_clock_ms
from stratalog.storage.log_manager import open_log_manager
from stratalog.common.names import RECOVERY_POINT_CHECKPOINT, TopicPartition
from stratalog.records import Record, build_batch
from stratalog.broker.topics import TopicAdmin

from . import machine
from .workload import (
    MIB,
    RECORDS_PER_BATCH,
    TOPIC,
    Stopwatch,
    read_decoded,
    read_raw,
    write_small_segments,
)

REPO = Path(__file__).resolve().parent.parent
SMALL_TOPIC = "small"
FRESH_TOPIC = "fresh"
SMALL_SEGMENT_BYTES = 200  # one ~180-byte batch per segment: every append rolls


@dataclass
class Row:
    figure: str
    value: float
    unit: str
    ceiling: float | None = None
    ceiling_unit: str = ""
    ceiling_label: str = ""
    ratio: float | None = None
    notes: str = ""


def rate_row(figure: str, value: float, unit: str, ceiling: float, label: str, notes: str = "") -> Row:
    return Row(figure, value, unit, ceiling, unit, label, value / ceiling if ceiling else None, notes)


def time_row(figure: str, value: float, unit: str, floor: float | None, label: str, notes: str = "") -> Row:
    ratio = floor / value if floor is not None and value > 0 else None
    return Row(figure, value, unit, floor, unit if floor is not None else "", label, ratio, notes)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_note(timed_user: float, timed_system: float, wall: float, nbytes: float | None = None) -> str:
    """CPU the process got over the span; on a busy machine wall time also holds waiting for a core."""
    note = f"CPU user {timed_user:.2f}s + sys {timed_system:.2f}s of {wall:.2f}s wall"
    cpu = timed_user + timed_system
    if nbytes is not None and cpu > 0:
        note += f" ({nbytes / MIB / cpu:,.0f} MiB per CPU-second)"
    return note


# -- phases ---------------------------------------------------------------------------------

def run_append_child(data_dir: Path, size_bytes: int) -> dict[str, Any]:
    """Append in a child process, then SIGKILL it once it reports the data appended."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    child = subprocess.Popen([sys.executable, "-m", "bench.append_child", str(data_dir), str(size_bytes)],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline()
    if not line:
        child.wait()
        raise RuntimeError(f"append child exited with {child.returncode} before reporting:\n{child.stderr.read()}")
    result: dict[str, Any] = json.loads(line)
    child.send_signal(signal.SIGKILL)
    child.wait()
    if child.returncode != -signal.SIGKILL:
        raise RuntimeError(f"append child ended with {child.returncode}, not by SIGKILL")
    child.stdout.close()
    child.stderr.close()
    return result


def median_of(values: list[float]) -> float:
    return statistics.median(values)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[Row]]:
    size_bytes = args.size_mb * MIB
    base = Path(args.dir) if args.dir else None
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="stratalog-bench-", dir=base))
    rows: list[Row] = []
    details: dict[str, object] = {}
    try:
        info = machine.describe(work)
        progress(f"dd ceilings ({args.size_mb} MiB, {args.repeats} runs) in {work}")
        ceilings = machine.page_cache_ceilings(work / "dd", args.size_mb, args.repeats, args.settle)
        shutil.rmtree(work / "dd", ignore_errors=True)
        print(machine.format_description(info, ceilings), flush=True)
        dd_w, dd_r = ceilings.write_mib_s, ceilings.read_mib_s

        # 1. Appends in a child process, killed with SIGKILL afterwards.
        big = work / "data-big"
        machine.settle(ceilings.settle_seconds)
        progress(f"append {args.size_mb} MiB through Log.append in a child process, then SIGKILL it")
        appended = run_append_child(big, size_bytes)
        details["append"] = appended
        wall = appended["seconds"]
        mib_s = appended["bytes"] / MIB / wall
        per_record = appended["bytes"] / appended["records"]
        note = (f"{appended['batches']} batches of {appended['batch_bytes']} B, {wall / appended['batches'] * 1e6:.0f} "
                f"us/batch; {cpu_note(appended['user_cpu_s'], appended['system_cpu_s'], wall, appended['bytes'])}")
        rows.append(rate_row("append: Log.append, 16 x 1 KiB records/batch", mib_s, "MiB/s", dd_w, "dd write", note))
        rows.append(rate_row("append: records", appended["records"] / wall, "rec/s", dd_w * MIB / per_record,
                             "dd write / record size"))
        tp = TopicPartition(TOPIC, 0)
        on_disk = OffsetCheckpointFile(big / RECOVERY_POINT_CHECKPOINT).read()
        if on_disk.get(tp, 0) != 0:
            raise RuntimeError(f"recovery point checkpoint is {on_disk}, expected 0 for {tp}")

        # 2. Open after the SIGKILL: recovery from offset 0.
        progress("open_log_manager after SIGKILL (recovery point 0: CRC-scan everything)")
        with Stopwatch() as watch:
            manager = open_log_manager([big])
        unclean = watch.timed
        log = manager.get_log(TOPIC, 0)
        report = manager.load_reports[tp]
        if log.log_end_offset != appended["log_end_offset"] or report.truncated_bytes:
            raise RuntimeError(f"recovery lost data: LEO {log.log_end_offset} vs {appended['log_end_offset']}, "
                               f"{report.truncated_bytes} bytes truncated")
        log_bytes = log.size
        details["unclean_open"] = {**unclean.as_dict(), "recovered_segments": len(report.recovered_segments),
                                   "bytes": log_bytes}
        scan_floor_ms = log_bytes / MIB / dd_r * 1000
        rows.append(time_row(f"open after SIGKILL: {log_bytes / MIB:.0f} MiB from recovery point 0",
                             unclean.seconds * 1000, "ms", scan_floor_ms, "dd read of the same bytes",
                             f"{len(report.recovered_segments)} segment(s) recovered; "
                             + cpu_note(unclean.user, unclean.system, unclean.seconds, log_bytes)))
        rows.append(rate_row("recovery CRC scan (bytes / open time)", log_bytes / MIB / unclean.seconds, "MiB/s",
                             dd_r, "dd read"))

        # 3. Clean shutdown, then clean opens.
        progress("LogManager.close (clean shutdown: flushes the recovered log, writes checkpoints)")
        with Stopwatch() as watch:
            manager.close()
        rows.append(Row("clean shutdown: LogManager.close", watch.timed.seconds * 1000, "ms",
                        notes="informative: fsyncs the whole log (recovery leaves the recovery point at 0)"))
        progress(f"open after clean shutdown x{args.repeats}")
        opens, floors = [], []
        for _ in range(args.repeats):
            floors.append(machine.open_floor_seconds(big / tp.dir_name))
            with Stopwatch() as watch:
                manager = open_log_manager([big])
            opens.append(watch.timed.seconds)
            if manager.get_log(TOPIC, 0).log_end_offset != appended["log_end_offset"]:
                raise RuntimeError("clean open found a different log end offset")
            manager.close()
        details["clean_open_big"] = {"runs_s": opens, "floor_runs_s": floors}
        rows.append(time_row(f"open after clean shutdown: 1 segment, {log_bytes / MIB:.0f} MiB",
                             median_of(opens) * 1000, "ms", median_of(floors) * 1000, "list dir + open .log",
                             f"median of {len(opens)}"))

        # 4. Sequential reads.
        manager = open_log_manager([big])
        log = manager.get_log(TOPIC, 0)
        progress(f"sequential read with Log.read(offset, 1 MiB) x{args.repeats}")
        raws = []
        for _ in range(args.repeats):
            raw = read_raw(log)
            if raw.bytes != log_bytes or raw.records != appended["records"]:
                raise RuntimeError(f"raw read returned {raw.bytes} bytes / {raw.records} records, "
                                   f"expected {log_bytes} / {appended['records']}")
            raws.append(raw)
        raws.sort(key=lambda r: r.timed.seconds)
        raw = raws[len(raws) // 2]
        details["read_raw"] = {"runs_s": [r.timed.seconds for r in raws], "fetches": raw.fetches}
        rows.append(rate_row("read: Log.read 1 MiB fetches, raw bytes", raw.bytes / MIB / raw.timed.seconds,
                             "MiB/s", dd_r, "dd read",
                             f"median of {len(raws)}, {raw.fetches} fetches; "
                             + cpu_note(raw.timed.user, raw.timed.system, raw.timed.seconds, raw.bytes)))
        rows.append(rate_row("read: records (raw)", raw.records / raw.timed.seconds, "rec/s",
                             dd_r * MIB / per_record, "dd read / record size"))
        progress("sequential read with Log.read_records (decoded)")
        decoded = read_decoded(log)
        if decoded.records != appended["records"]:
            raise RuntimeError(f"read_records returned {decoded.records} records, expected {appended['records']}")
        details["read_decoded"] = decoded.timed.as_dict()
        rows.append(rate_row("read: Log.read_records, decoded", decoded.bytes / MIB / decoded.timed.seconds,
                             "MiB/s", dd_r, "dd read",
                             cpu_note(decoded.timed.user, decoded.timed.system, decoded.timed.seconds, decoded.bytes)))
        rows.append(rate_row("read: records (decoded)", decoded.records / decoded.timed.seconds, "rec/s",
                             dd_r * MIB / per_record, "dd read / record size"))
        manager.close()
        shutil.rmtree(big, ignore_errors=True)

        # 5. A log of many small segments.
        rows.extend(small_segments(work / "data-small", args, details))
    finally:
        if args.keep:
            progress(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    details["loadavg_at_end"] = machine.load_average()
    return {
        "params": {"size_mb": args.size_mb, "segments": args.segments, "rolls": args.rolls,
                   "repeats": args.repeats, "record_bytes": 1024, "records_per_batch": RECORDS_PER_BATCH},
        "machine": info,
        "ceilings": asdict(ceilings),
        "rows": [asdict(row) for row in rows],
        "details": details,
    }, rows


def small_segments(data_dir: Path, args: argparse.Namespace, details: dict[str, object]) -> list[Row]:
    rows: list[Row] = []
    count = args.segments
    tp = TopicPartition(SMALL_TOPIC, 0)
    manager = open_log_manager([data_dir])
    TopicAdmin(manager).create_topic(SMALL_TOPIC, 1, {"segment.bytes": str(SMALL_SEGMENT_BYTES)})
    config = manager.get_log(SMALL_TOPIC, 0).config
    manager.close()
    partition_dir = data_dir / tp.dir_name
    progress(f"write {count} one-batch segments with LogSegment")
    with Stopwatch() as watch:
        write_small_segments(partition_dir, count, config, lambda n: progress(f"  {n} segments") if n % 5000 == 0
                             else None)
    rows.append(Row(f"create {count} segments (LogSegment, no fsync)", watch.timed.seconds, "s",
                    notes="informative: setup, not a Log path"))
    progress(f"open after clean shutdown, {count} segments x{args.repeats}")
    opens, floors = [], []
    for _ in range(args.repeats):
        floors.append(machine.open_floor_seconds(partition_dir))
        with Stopwatch() as watch:
            manager = open_log_manager([data_dir])
        opens.append(watch.timed.seconds)
        log = manager.get_log(SMALL_TOPIC, 0)
        if len(log.segments) != count or log.log_end_offset != count:
            raise RuntimeError(f"opened {len(log.segments)} segments up to {log.log_end_offset}, expected {count}")
        manager.close()
    details["clean_open_small"] = {"runs_s": opens, "floor_runs_s": floors}
    rows.append(time_row(f"open after clean shutdown: {count} segments", median_of(opens) * 1000, "ms",
                         median_of(floors) * 1000, "list dir + open .log",
                         f"median of {len(opens)}; {count / median_of(opens):.0f} segments/s"))

    # Rolls: an append that rolls, with many segments in the directory and with few.
    if args.rolls > 0:
        progress(f"{args.rolls} rolling appends in the {count}-segment log and in a fresh one")
        manager = open_log_manager([data_dir])
        TopicAdmin(manager).create_topic(FRESH_TOPIC, 1, {"segment.bytes": str(SMALL_SEGMENT_BYTES)})
        batch = build_batch([Record(0, wall_clock_ms(), b"key", b"v" * 100)])
        timings = {}
        for topic in (SMALL_TOPIC, FRESH_TOPIC):
            log = manager.get_log(topic, 0)
            log.append(batch)  # the fresh log's first segment takes one batch without rolling
            before = len(log.segments)
            with Stopwatch() as watch:
                for _ in range(args.rolls):
                    log.append(batch)
            if len(log.segments) != before + args.rolls:
                raise RuntimeError(f"{topic}: {len(log.segments) - before} rolls for {args.rolls} appends")
            timings[topic] = watch.timed
        manager.close()
        big, fresh = timings[SMALL_TOPIC], timings[FRESH_TOPIC]
        details["rolls"] = {SMALL_TOPIC: big.as_dict(), FRESH_TOPIC: fresh.as_dict()}
        per_big, per_fresh = big.seconds / args.rolls * 1000, fresh.seconds / args.rolls * 1000
        rows.append(time_row(f"roll: append that rolls, log of {count} segments", per_big, "ms/roll", per_fresh,
                             "same in a fresh log", cpu_note(big.user, big.system, big.seconds)))
        rows.append(Row("roll: append that rolls, fresh log", per_fresh, "ms/roll",
                        notes="informative: 3 fsyncs + a directory fsync per roll; "
                        + cpu_note(fresh.user, fresh.system, fresh.seconds)))
    return rows


# -- output ---------------------------------------------------------------------------------

def format_number(value: float) -> str:
    """A figure with three or so significant digits (thousands separated), as the reports print them."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def format_table(rows: list[Row]) -> str:
    header = ("figure", "value", "unit", "ceiling", "ratio", "notes")
    lines = []
    for row in rows:
        ceiling = f"{format_number(row.ceiling)} {row.ceiling_unit} ({row.ceiling_label})" if row.ceiling is not None else "-"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}" if row.ratio >= 0.1 else f"{row.ratio:.2g}"
        lines.append((row.figure, format_number(row.value), row.unit, ceiling, ratio, row.notes))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header[:-1])]
    out = []
    for line in [header, tuple("-" * w for w in widths) + ("-----",), *lines]:
        cells = [line[0].ljust(widths[0]), line[1].rjust(widths[1]), line[2].ljust(widths[2]),
                 line[3].ljust(widths[3]), line[4].rjust(widths[4]), line[5]]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.storage",
                                     description="stratalog storage benchmarks against this machine's ceilings")
    parser.add_argument("--size-mb", type=int, default=None, help="MiB appended and read back (default 1024)")
    parser.add_argument("--dir", default=None, help="parent of the temporary work directory (default /tmp)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smoke run: 64 MiB, 1,000 segments, 1 repeat")
    parser.add_argument("--segments", type=int, default=None, help="segments of the many-segment log (10000)")
    parser.add_argument("--rolls", type=int, default=None, help="rolling appends timed per log (default 50)")
    parser.add_argument("--repeats", type=int, default=None, help="runs of the repeated figures (default 3)")
    parser.add_argument("--settle", type=float, default=None,
                        help="seconds to wait before each write phase (default 5 on a VM with free page "
                             "reporting, else 0; see bench/machine.py)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    quick = args.quick
    args.size_mb = args.size_mb or (64 if quick else 1024)
    args.segments = args.segments or (1000 if quick else 10_000)
    args.rolls = args.rolls if args.rolls is not None else (10 if quick else 50)
    args.repeats = args.repeats or (1 if quick else 3)
    started = time.perf_counter()
    result, rows = run(args)
    print()
    print(format_table(rows))
    elapsed = time.perf_counter() - started
    print(f"\nload average at end: {result['details']['loadavg_at_end']}; total run time {elapsed:.0f} s")
    result["elapsed_s"] = elapsed
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
