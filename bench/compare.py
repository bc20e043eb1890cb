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
public entry points, one Python process per measurement (``python -m bench.compare_storage ...``,
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

This module runs the phases and writes the results; the storage phases are ``compare_storage``'s,
the service phase ``compare_service``'s, the figures ``compare_figures``', the child processes and
Kafka's harness ``compare_processes``', the Markdown ``compare_report``'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import machine
from .compare_figures import define_figures
from .compare_processes import REPO, KafkaHarness, compile_harness, kafka_libs, progress
from .compare_report import markdown
from .compare_service import service
from .compare_storage import append_open_read, clean_open_small, compaction
from .workload import build_pool


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
