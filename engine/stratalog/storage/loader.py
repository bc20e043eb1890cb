"""Open a partition directory after any shutdown, clean or not (Kafka's ``LogLoader``).

The order of the steps is what makes the suffix protocols crash-safe:

1. ``.deleted`` files go; ``.cleaned`` files go, and with them any ``.swap`` at or
   above the lowest ``.cleaned`` base (a split that never finished); so does a
   producer snapshot's unfinished ``.snapshot.tmp``.
2. The remaining ``.swap`` segments were complete when written: the segments they
   replace are deleted and the ``.swap`` suffix is dropped.
3. Index files without a ``.log`` go; a segment whose index is missing or fails
   its sanity check is rebuilt from its ``.log``.
4. Unless the directory shut down cleanly, every segment from the one holding the
   recovery point is re-read and CRC-checked; at the first invalid batch the
   segment is truncated and every later segment deleted.
5. The log start offset and recovery point are restored from the checkpoints.
6. Producer snapshots past the log end (recovery cut the log below them) go, and
   strays not at a segment's base, as Kafka's ``removeStraySnapshots``.

Where current Kafka goes further than the seeds (``.swap`` completion, the time
index rebuilt with the offset index), this follows current Kafka; where Kafka
trusts an index without reading it, this module also rebuilds a missing time
index, which Kafka would recreate empty.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from stratalog.common.config import LogConfig
from stratalog.common.files import fsync_dir
from stratalog.common.errors import CorruptIndexError
from stratalog.storage.leader_epoch import LeaderEpochCache
from stratalog.storage.log_dir_failure import LogDirFailureChannel
from stratalog.storage.log import Clock, Log, wall_clock_ms
from stratalog.common.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TopicPartition,
    parse_segment_file,
)
from stratalog.storage.producer_snapshot import delete_producer_snapshots, stale_snapshots
from stratalog.storage.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass
class LoadReport:
    """What loading had to repair, for logs, tests and the verify command."""

    deleted_temp_files: list[str] = field(default_factory=list)
    completed_swaps: list[int] = field(default_factory=list)
    deleted_orphan_files: list[str] = field(default_factory=list)
    rebuilt_indexes: list[int] = field(default_factory=list)
    recovered_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    deleted_segments_after_corruption: list[int] = field(default_factory=list)
    deleted_stale_snapshots: list[int] = field(default_factory=list)


def load_log(
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    had_clean_shutdown: bool = False,
    clock: Clock = wall_clock_ms,
    failure_channel: LogDirFailureChannel | None = None,
) -> tuple[Log, LoadReport]:
    report = LoadReport()
    _remove_temp_files(directory, report)
    _complete_swaps(directory, config, report)
    # Recovery re-reads every segment from the one holding the recovery point, so their
    # indexes need no check first (Kafka skips it for the same reason).
    recovered_from = None if had_clean_shutdown else recovery_point
    snapshots: list[int] = []
    segments = _load_segments(directory, config, clock, report, recovered_from, snapshots)
    epoch_cache = LeaderEpochCache(directory)

    if not had_clean_shutdown and segments:
        segments = _recover_from(segments, recovery_point, epoch_cache, report)

    next_offset = segments[-1].next_offset() if segments else 0
    if segments and next_offset < log_start_offset:
        # Everything we have is below the checkpointed start: Kafka starts afresh there.
        for segment in segments:
            segment.delete_files()
        segments = []
        epoch_cache.clear()
    if not segments:
        segments = [_open_segment(directory, log_start_offset, config, clock, create=True)]

    log_end = segments[-1].next_offset()
    segments[-1].resize_indexes_to_max()
    recovery = log_end if had_clean_shutdown else min(recovery_point, log_end)
    start = max(log_start_offset, segments[0].base_offset)
    epoch_cache.truncate_from_end(log_end)
    epoch_cache.truncate_from_start(start)
    stale = stale_snapshots(snapshots, {s.base_offset for s in segments}, log_end)
    if stale:
        delete_producer_snapshots(directory, stale)
        # Durably: a snapshot past a recovered end, back after a power loss once the log has grown
        # past it again, would describe a log that is no longer there.
        fsync_dir(directory)
        report.deleted_stale_snapshots.extend(stale)
    log = Log(directory, tp, config, segments, log_start_offset=start, recovery_point=recovery,
              leader_epoch_cache=epoch_cache, clock=clock, failure_channel=failure_channel,
              producer_snapshots=sorted(set(snapshots) - set(stale)))
    return log, report


def _open_segment(directory: Path, base_offset: int, config: LogConfig, clock: Clock, *,
                  create: bool = False, suffix: str = "") -> LogSegment:
    return LogSegment(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                      max_index_size=config.segment_index_bytes, create=create, suffix=suffix, now_ms=clock())


_TEMP_STATES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_UNFINISHED_SNAPSHOT = SNAPSHOT_SUFFIX + ".tmp"   # atomic_write's name beside the snapshot


def _remove_temp_files(directory: Path, report: LoadReport) -> None:
    swaps: list[Path] = []
    min_cleaned: int | None = None
    for name in sorted(os.listdir(directory)):  # sorting names: Path comparisons cost 10x
        if name.endswith(_UNFINISHED_SNAPSHOT):   # a snapshot write a crash cut short
            (directory / name).unlink()
            report.deleted_temp_files.append(name)
            continue
        if not name.endswith(_TEMP_STATES):
            continue   # nearly every file: no Path, no parse
        path = directory / name
        parsed = parse_segment_file(name)
        if parsed is None:
            continue
        if parsed.state == DELETED_SUFFIX:
            path.unlink()
            report.deleted_temp_files.append(path.name)
        elif parsed.state == CLEANED_SUFFIX:
            min_cleaned = parsed.base_offset if min_cleaned is None else min(min_cleaned, parsed.base_offset)
            path.unlink()
            report.deleted_temp_files.append(path.name)
        elif parsed.state == SWAP_SUFFIX:
            swaps.append(path)
    if min_cleaned is not None:
        for path in swaps:
            parsed = parse_segment_file(path.name)
            if parsed is not None and parsed.base_offset >= min_cleaned:
                path.unlink()
                report.deleted_temp_files.append(path.name)


def _complete_swaps(directory: Path, config: LogConfig, report: LoadReport) -> None:
    """Finish an interrupted ``.swap`` → final rename: the swap files replace what they cover."""
    swap_logs = sorted(p for p in directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}"))
    if not swap_logs:
        return
    low, high = None, None
    for path in swap_logs:
        parsed = parse_segment_file(path.name)
        assert parsed is not None
        segment = _open_segment(directory, parsed.base_offset, config, wall_clock_ms, suffix=SWAP_SUFFIX)
        next_offset = segment.next_offset()
        segment.log.close()
        low = parsed.base_offset if low is None else min(low, parsed.base_offset)
        high = next_offset if high is None else max(high, next_offset)
    assert low is not None and high is not None
    for path in sorted(directory.iterdir()):
        parsed = parse_segment_file(path.name)
        if parsed is not None and parsed.state == "" and low <= parsed.base_offset < high:
            path.unlink()
    for path in sorted(directory.glob(f"*{SWAP_SUFFIX}")):
        path.rename(path.with_name(path.name[: -len(SWAP_SUFFIX)]))
        parsed = parse_segment_file(path.name)
        if parsed is not None and parsed.kind == LOG_SUFFIX:
            report.completed_swaps.append(parsed.base_offset)


def _load_segments(directory: Path, config: LogConfig, clock: Clock, report: LoadReport,
                   recovered_from: int | None, snapshots: list[int]) -> list[LogSegment]:
    """The segments, opened (and their indexes checked); ``snapshots`` gets the producer snapshots' offsets."""
    log_bases: set[int] = set()
    index_files: list[tuple[int, str, str]] = []
    for name in os.listdir(directory):   # names, not Paths: a directory may hold tens of thousands
        parsed = parse_segment_file(name)
        if parsed is None or parsed.state:
            continue
        if parsed.kind == LOG_SUFFIX:
            log_bases.add(parsed.base_offset)
        elif parsed.kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            index_files.append((parsed.base_offset, parsed.kind, name))
        elif parsed.kind == SNAPSHOT_SUFFIX:
            snapshots.append(parsed.base_offset)
    indexed: dict[int, int] = {}   # base offset → how many of its two index files are there
    for base, _, name in index_files:
        if base not in log_bases:
            (directory / name).unlink()
            report.deleted_orphan_files.append(name)
        else:
            indexed[base] = indexed.get(base, 0) + 1
    bases = sorted(log_bases)
    # The first segment recovery will re-read: the one holding the recovery point.
    first_recovered = None
    if recovered_from is not None and bases:
        first_recovered = max([b for b in bases if b <= recovered_from], default=bases[0])
    segments = []
    for base in bases:
        segment = _open_segment(directory, base, config, clock)
        if first_recovered is not None and base >= first_recovered:
            segments.append(segment)
            continue
        if indexed.get(base, 0) < 2 or not _indexes_sane(segment):
            logger.warning("rebuilding the indexes of segment %s in %s", base, directory)
            report.truncated_bytes += segment.recover()
            report.rebuilt_indexes.append(base)
        segments.append(segment)
    return segments


def _indexes_sane(segment: LogSegment) -> bool:
    """Kafka's cheap sanity check, reading only file lengths and last entries (of indexes the caller
    has seen in the directory)."""
    try:
        segment.offset_index.sanity_check_cheaply(segment.size)
        segment.time_index.sanity_check_cheaply(segment.size)
    except CorruptIndexError as error:
        logger.warning("%s", error)
        return False
    return True


def _recover_from(segments: list[LogSegment], recovery_point: int, epoch_cache: LeaderEpochCache,
                  report: LoadReport) -> list[LogSegment]:
    first = 0
    for index, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            first = index
    for index in range(first, len(segments)):
        segment = segments[index]
        truncated = segment.recover(epoch_cache=epoch_cache)
        report.recovered_segments.append(segment.base_offset)
        if truncated:
            logger.warning("truncated %d invalid bytes from segment %d", truncated, segment.base_offset)
            report.truncated_bytes += truncated
            for later in segments[index + 1 :]:
                later.delete_files()
                report.deleted_segments_after_corruption.append(later.base_offset)
            return segments[: index + 1]
    return segments
