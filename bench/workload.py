"""The workloads the storage benchmarks time, shared by ``storage``, ``append_child`` and ``profiling``.

Everything here goes through the engine's public entry points: ``open_log_manager``,
``LogManager.create_topic``, ``Log.append`` (the validated leader path), ``Log.read``
(the fetch path) and ``Log.read_records`` (decoding). Batches are built before the
clock starts: building them is the producer's cost, not the log's.
"""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.config import LogConfig
from stratalog.storage.leader_epoch import LeaderEpochCache
from stratalog.storage.log import Log, wall_clock_ms
from stratalog.records import Record, build_batch, set_offsets_in_place
from stratalog.records.info import whole_batches
from stratalog.storage.segment import LogSegment

MIB = 1 << 20
TOPIC = "bench"
RECORD_VALUE_BYTES = 1024  # 1 KiB records (value; no key, no headers)
RECORDS_PER_BATCH = 16  # 16 KiB uncompressed batches
POOL_SIZE = 64  # distinct batches, appended round-robin
FETCH_BYTES = 1 << 20  # Log.read max_bytes, as a consumer's fetch.max.bytes per partition


@dataclass(frozen=True)
class Timed:
    """Wall time of a loop with the process's user and system CPU time over the same span."""

    seconds: float
    user: float
    system: float

    def as_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds, "user_cpu_s": self.user, "system_cpu_s": self.system}


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        end = time.perf_counter()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.timed = Timed(end - self._start, usage.ru_utime - self._usage.ru_utime,
                           usage.ru_stime - self._usage.ru_stime)


def build_pool(seed: int = 0, now_ms: int | None = None) -> list[bytes]:
    """``POOL_SIZE`` distinct producer batches of ``RECORDS_PER_BATCH`` records of 1 KiB random values."""
    rng = random.Random(seed)
    now = wall_clock_ms() if now_ms is None else now_ms
    return [
        build_batch([Record(i, now + i, None, rng.randbytes(RECORD_VALUE_BYTES)) for i in range(RECORDS_PER_BATCH)])
        for _ in range(POOL_SIZE)
    ]


def batches_for(size_bytes: int, batch_size: int) -> int:
    """How many batches fit in ``size_bytes`` (never more, so 1024 MiB stays within one 1 GiB segment)."""
    return max(1, size_bytes // batch_size)


@dataclass(frozen=True)
class AppendResult:
    timed: Timed
    batches: int
    records: int
    bytes: int


def append_batches(log: Log, pool: list[bytes], count: int) -> AppendResult:
    """``count`` calls of ``Log.append`` cycling through ``pool`` (no fsync: flush.messages is unlimited)."""
    append = log.append
    size = len(pool)
    with Stopwatch() as watch:
        for i in range(count):
            append(pool[i % size])
    total = sum(len(pool[i % size]) for i in range(size)) * (count // size) + sum(
        len(pool[i]) for i in range(count % size))
    return AppendResult(watch.timed, count, count * RECORDS_PER_BATCH, total)


@dataclass(frozen=True)
class ReadResult:
    timed: Timed
    fetches: int
    batches: int
    records: int
    bytes: int


def read_raw(log: Log, fetch_bytes: int = FETCH_BYTES) -> ReadResult:
    """Fetch the whole partition with ``Log.read(offset, fetch_bytes)``: raw bytes, no decoding.

    Like a consumer, the next fetch starts after the last *complete* batch of the
    previous one (a fetch may end inside a batch); only headers are looked at to
    find it, by ``records.info.whole_batches`` (the native kernel's walk, where Kafka's
    harness walks the same headers in JIT-compiled Java).
    """
    read = log.read
    offset = log.log_start_offset
    end = log.high_watermark
    fetches = batches = records = total = 0
    with Stopwatch() as watch:
        while offset < end:
            data = read(offset, fetch_bytes).data
            fetches += 1
            kept = whole_batches(data)
            if kept.last_offset < offset or kept.records is None:
                raise RuntimeError(f"fetch at offset {offset} returned no complete v2 batch ({len(data)} bytes)")
            batches += kept.batches
            records += kept.records
            total += kept.size
            offset = kept.last_offset + 1
    return ReadResult(watch.timed, fetches, batches, records, total)


def read_decoded(log: Log) -> ReadResult:
    """Every record of the partition through ``Log.read_records`` (fetch + CRC check + decoding)."""
    records = 0
    value_bytes = 0
    with Stopwatch() as watch:
        for record in log.read_records(log.log_start_offset):
            records += 1
            value_bytes += len(record.value) if record.value is not None else 0
    return ReadResult(watch.timed, 0, 0, records, log.size)


def write_small_segments(partition_dir: Path, count: int, config: LogConfig,
                         progress: Callable[[int], None] | None = None) -> int:
    """Fill an empty, cleanly closed partition directory with ``count`` one-batch segments.

    Written with the engine's own ``LogSegment`` (append, then ``on_become_inactive``
    as a roll does, then close): the files are those ``Log.append`` would leave with
    a tiny ``segment.bytes``, without its per-roll fsyncs and directory scan, which
    would make 10,000 rolls take minutes (see the README). Returns bytes written.
    """
    for path in partition_dir.iterdir():
        if path.suffix in (".log", ".index", ".timeindex"):
            path.unlink()
    now = wall_clock_ms()
    batch = bytearray(build_batch([Record(0, now, b"key", b"v" * 100)]))
    for base in range(count):
        segment = LogSegment(partition_dir, base, index_interval_bytes=config.index_interval_bytes,
                             max_index_size=config.segment_index_bytes, create=True, now_ms=now)
        set_offsets_in_place(batch, 0, base, 0)
        segment.append(base, now, base, batch)
        if base < count - 1:
            segment.on_become_inactive()
        segment.close()
        if progress is not None and (base + 1) % 1000 == 0:
            progress(base + 1)
    LeaderEpochCache(partition_dir).assign(0, 0)
    return count * len(batch)
