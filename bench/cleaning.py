"""Compaction and retention benchmarks (issue 3). Not a test: it prints figures, it asserts nothing.

* compaction: a compacted partition of ``--size-mb`` (default 1 GiB) of 1 KiB records
  and again of 100-byte records, keys drawn so that 10% of the records carry distinct
  keys, every segment rolled so all of it is cleanable; one cleaner thread with the
  default 128 MiB dedupe buffer cleans until nothing is left to clean (a full map
  means more than one pass). Reported: MB/s and records/s over the data cleaned,
  passes, and the ratio to this machine's page-cache read bandwidth (``dd``).
* retention: one pass over a partition of 10,000 small segments, when nothing is
  due (the common case: one check per segment at most) and when all are expired.
* throttle: one pass over ~6 MB capped at ``log.cleaner.io.max.bytes.per.second``
  = 3 MB/s: the rate it held against the cap (read + written bytes / wall time).

``python -m bench.cleaning [--size-mb N] [--dir D] [--quick] [--json F]``
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from stratalog.storage.cleaner import LogCleaner
from stratalog.common.config import EngineConfig
from stratalog.storage.log_manager import LogManager
from stratalog.records import Record, build_batch
from stratalog.storage.retention import delete_old_segments
from stratalog.broker.topics import TopicAdmin

from .machine import page_cache_ceilings

MIB = 1 << 20
BATCH_BYTES = 16 * 1024


def _fill(manager: LogManager, topic: str, size_bytes: int, record_bytes: int, unique_fraction: float,
          seed: int = 1) -> tuple[int, int]:
    """Append ``size_bytes`` of keyed records; returns (records, distinct keys)."""
    rng = random.Random(seed)
    per_batch = max(1, BATCH_BYTES // record_bytes)
    total_records = size_bytes // record_bytes
    keys = max(1, int(total_records * unique_fraction))
    log = manager.get_log(topic, 0)
    key_width = 12
    value = b"v" * max(1, record_bytes - key_width - 8)  # ~record_bytes on disk with its framing
    now = int(time.time() * 1000)
    written = 0
    while written < total_records:
        records = [Record(i, now, b"key-%08d" % rng.randrange(keys), value) for i in range(per_batch)]
        log.append(build_batch(records))
        written += per_batch
    log.roll()
    return written, keys


def compaction(root: Path, size_mb: int, record_bytes: int) -> dict[str, Any]:
    directory = root / f"compact-{record_bytes}"
    config = EngineConfig.from_properties({"log.cleaner.threads": "1"})
    manager = LogManager([directory], config).open()
    TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": str(64 * MIB),
                                  "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    records, keys = _fill(manager, "c", size_mb * MIB, record_bytes, 0.10)
    log = manager.get_log("c", 0)
    size_before = log.size
    cleaner = LogCleaner(manager)
    started = time.perf_counter()
    passes = 0
    read = written = 0
    while True:
        reports = cleaner.run_pass()
        if not reports:
            break
        passes += 1
        read += reports[0].stats.bytes_read
        written += reports[0].stats.bytes_written
    seconds = time.perf_counter() - started
    result = {
        "record_bytes": record_bytes, "records": records, "distinct_keys": keys,
        "log_mb_before": size_before / MIB, "log_mb_after": log.size / MIB, "passes": passes,
        "seconds": seconds, "mb_per_s": size_before / MIB / seconds, "records_per_s": records / seconds,
        "io_mb_read": read / MIB, "io_mb_written": written / MIB,
    }
    manager.close()
    shutil.rmtree(directory)
    return result


def retention(root: Path, segments: int) -> dict[str, Any]:
    directory = root / "retention"
    manager = LogManager([directory]).open()
    TopicAdmin(manager).create_topic("r", 1, {"segment.bytes": "1000", "retention.ms": str(7 * 86_400_000),
                                  "file.delete.delay.ms": "0"})
    log = manager.get_log("r", 0)
    now = int(time.time() * 1000)
    for i in range(segments):
        log.append(build_batch([Record(0, now - 10 * 86_400_000, b"k", b"x" * 900)]))
    manager.close()
    manager = LogManager([directory]).open()  # a clean open: indexes not yet read, as after a restart
    log = manager.get_log("r", 0)
    count = len(log.segments)
    started = time.perf_counter()
    deleted_none = delete_old_segments(log, now_ms=now - 10 * 86_400_000)  # nothing due
    none_due = time.perf_counter() - started
    started = time.perf_counter()
    deleted = delete_old_segments(log, now_ms=now)  # everything expired
    all_due = time.perf_counter() - started
    manager.close()
    shutil.rmtree(directory)
    return {"segments": count, "nothing_due_seconds": none_due, "deleted_when_none_due": len(deleted_none),
            "all_expired_seconds": all_due, "deleted_when_all_expired": len(deleted)}


def throttle(root: Path, cap: int = 3_000_000) -> dict[str, Any]:
    directory = root / "throttle"
    config = EngineConfig.from_properties({"log.cleaner.io.max.bytes.per.second": str(cap)})
    manager = LogManager([directory], config).open()
    TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
    log = manager.get_log("c", 0)
    now = int(time.time() * 1000)
    for i in range(6000):
        log.append(build_batch([Record(0, now, b"k%d" % (i % 500), b"x" * 1000)]))
    log.roll()
    report = LogCleaner(manager).run_pass()[0]
    manager.close()
    shutil.rmtree(directory)
    moved = report.stats.bytes_read + report.stats.bytes_written
    return {"cap_bytes_per_s": cap, "bytes": moved, "seconds": report.stats.elapsed_seconds,
            "rate_to_cap": moved / report.stats.elapsed_seconds / cap}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="64 MB and 1,000 segments")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.size_mb, args.segments = 64, 1000
    root = Path(tempfile.mkdtemp(prefix="stratalog-bench-", dir=args.dir))
    try:
        ceilings = page_cache_ceilings(root, min(args.size_mb, 1024))
        results: dict[str, Any] = {"dd_read_mib_s": ceilings.read_mib_s, "compaction": [], "retention": None}
        for record_bytes in (1024, 100):
            row = compaction(root, args.size_mb, record_bytes)
            row["ratio_to_dd_read"] = row["mb_per_s"] / ceilings.read_mib_s
            results["compaction"].append(row)
            print(f"compaction, {record_bytes:>4}-byte records: {row['mb_per_s']:8.1f} MB/s "
                  f"{row['records_per_s']:10.0f} records/s  passes {row['passes']}  "
                  f"{row['log_mb_before']:.0f} MB -> {row['log_mb_after']:.0f} MB  "
                  f"(dd read {ceilings.read_mib_s:.0f} MiB/s, ratio {row['ratio_to_dd_read']:.4f})", flush=True)
        results["retention"] = row = retention(root, args.segments)
        print(f"retention pass over {row['segments']} segments: nothing due {row['nothing_due_seconds'] * 1000:.1f} ms, "
              f"all expired {row['all_expired_seconds']:.2f} s ({row['deleted_when_all_expired']} deleted)")
        results["throttle"] = row = throttle(root)
        print(f"throttle: {row['bytes'] / row['seconds'] / 1e6:.2f} MB/s held against a cap of "
              f"{row['cap_bytes_per_s'] / 1e6:.1f} MB/s (ratio {row['rate_to_cap']:.2f})")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
