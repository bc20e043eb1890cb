"""cProfile of the storage benchmark's hot paths: where the time of each figure goes.

    python -m bench.profiling [--size-mb 256] [--segments 10000] [--top 10] [--phase P ...] [--out DIR]

Phases: ``append`` (Log.append), ``read`` (Log.read 1 MiB fetches), ``decode``
(Log.read_records), ``open-big`` (clean open of that log), ``recover`` (open_log_manager after a real SIGKILL of the
appending child, recovery point 0), ``open-small`` (clean open of many one-batch
segments), ``roll`` (appends that roll in that many-segment log). Each prints its
wall time without and with the profiler, then the top functions by cumulative and
by own (tottime) time. cProfile adds a fixed cost per Python call, so it inflates
call-heavy code; the unprofiled wall time is the reference.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stratalog.storage.log import wall_clock_ms
from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.broker.topics import TopicAdmin

from . import machine
from .storage import SMALL_SEGMENT_BYTES, SMALL_TOPIC, run_append_child
from .workload import MIB, TOPIC, append_batches, batches_for, build_pool, read_decoded, read_raw, write_small_segments

PHASES = ("append", "read", "decode", "open-big", "recover", "open-small", "roll")


def report(key: str, name: str, profile: cProfile.Profile, wall: float, plain: float | None, top: int,
           out: Path | None) -> None:
    print(f"\n=== {name}: {plain:.3f} s unprofiled, {wall:.3f} s under cProfile ===" if plain is not None
          else f"\n=== {name}: {wall:.3f} s under cProfile ===")
    if out is not None:
        profile.dump_stats(str(out / f"{key}.prof"))
    for order in ("cumulative", "tottime"):
        stream = io.StringIO()
        stats = pstats.Stats(profile, stream=stream).strip_dirs().sort_stats(order)
        stats.print_stats(top)
        text = stream.getvalue()
        body = text[text.index("   ncalls"):] if "   ncalls" in text else text
        print(f"-- top {top} by {order}")
        print(body.rstrip())


TIMER: Callable[[], float] | None = None  # None: cProfile's default wall clock


def profiled(fn: Callable[[], object]) -> tuple[cProfile.Profile, float]:
    profile = cProfile.Profile(TIMER) if TIMER is not None else cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    fn()
    profile.disable()
    return profile, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profiling", description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--rolls", type=int, default=30)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--phase", action="append", choices=PHASES, default=None)
    parser.add_argument("--dir", default=None, help="parent of the temporary work directory (default /tmp)")
    parser.add_argument("--out", type=Path, default=None, help="also dump <phase>.prof files here")
    parser.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                        help="cpu: charge functions their process CPU time only, steadier on a busy machine "
                             "but blind to waiting (fsync, page faults on the host)")
    args = parser.parse_args(argv)
    global TIMER
    TIMER = time.process_time if args.timer == "cpu" else None
    phases = args.phase or list(PHASES)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="stratalog-profile-", dir=args.dir))
    print(f"load average at start: {machine.load_average()}")
    try:
        if {"append", "read", "decode", "open-big"} & set(phases):
            data = work / "data"
            manager = open_log_manager([data])
            TopicAdmin(manager).create_topic(TOPIC, 1)
            log = manager.get_log(TOPIC, 0)
            pool = build_pool()
            count = batches_for(args.size_mb * MIB, len(pool[0]))
            half = count // 2
            machine.settle(machine.default_settle_seconds())
            # First half unprofiled (the reference), second half profiled: same log, same regime.
            plain = append_batches(log, pool, half).timed.seconds * (count - half) / half
            prof, wall = profiled(lambda: append_batches(log, pool, count - half))
            if "append" in phases:
                report("append", f"append {args.size_mb} MiB (16 x 1 KiB/batch; unprofiled time extrapolated from the "
                       "first half)", prof, wall, plain, args.top, args.out)
            if "read" in phases:
                plain = read_raw(log).timed.seconds
                prof, wall = profiled(lambda: read_raw(log))
                report("read", "read (Log.read 1 MiB fetches, raw)", prof, wall, plain, args.top, args.out)
            if "decode" in phases:
                plain = read_decoded(log).timed.seconds
                prof, wall = profiled(lambda: read_decoded(log))
                report("decode", "decode (Log.read_records)", prof, wall, plain, args.top, args.out)
            manager.close()
            if "open-big" in phases:
                start = time.perf_counter()
                open_log_manager([data]).close()
                plain = time.perf_counter() - start
                holder: list[LogManager] = []
                prof, wall = profiled(lambda: holder.append(open_log_manager([data])))
                report("open-big", f"open-big (clean open, 1 segment of {args.size_mb} MiB)", prof, wall, plain,
                       args.top, args.out)
                holder[0].close()
            shutil.rmtree(data, ignore_errors=True)
        if "recover" in phases:
            killed = work / "killed"
            machine.settle(machine.default_settle_seconds())
            run_append_child(killed, args.size_mb * MIB)
            holder = []
            prof, wall = profiled(lambda: holder.append(open_log_manager([killed])))
            report("recover", f"recover (open_log_manager after SIGKILL, {args.size_mb} MiB from recovery point 0)",
                   prof, wall, None, args.top, args.out)
            holder[0].close()
            shutil.rmtree(killed, ignore_errors=True)
        if {"open-small", "roll"} & set(phases):
            small = work / "small"
            manager = open_log_manager([small])
            TopicAdmin(manager).create_topic(SMALL_TOPIC, 1, {"segment.bytes": str(SMALL_SEGMENT_BYTES)})
            config = manager.get_log(SMALL_TOPIC, 0).config
            manager.close()
            write_small_segments(small / TopicPartition(SMALL_TOPIC, 0).dir_name, args.segments, config)
            start = time.perf_counter()
            open_log_manager([small]).close()
            plain = time.perf_counter() - start
            holder = []
            prof, wall = profiled(lambda: holder.append(open_log_manager([small])))
            if "open-small" in phases:
                report("open-small", f"open-small (clean open, {args.segments} segments)", prof, wall, plain, args.top, args.out)
            manager = holder[0]
            if "roll" in phases:
                log = manager.get_log(SMALL_TOPIC, 0)
                batch = build_batch([Record(0, wall_clock_ms(), b"key", b"v" * 100)])

                def rolls() -> None:
                    for _ in range(args.rolls):
                        log.append(batch)

                start = time.perf_counter()
                rolls()
                plain = time.perf_counter() - start
                prof, wall = profiled(rolls)
                report("roll", f"roll ({args.rolls} rolling appends, log of ~{args.segments} segments)", prof, wall, plain,
                       args.top, args.out)
            manager.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average at end: {machine.load_average()}")


if __name__ == "__main__":
    main()
