"""One compaction of one log (Kafka's ``Cleaner.doClean``).

1. Build the offset map over the dirty range [first dirty, first uncleanable):
   key → latest offset, until the map is full; the pass then covers only up
   to where the map reached (``end offset``), and the next pass goes on.
2. Group every segment below the end offset by size (a group must fit one
   segment, its indexes and int32 relative offsets) and rewrite each group
   into one ``.cleaned`` segment, keeping original offsets:
   * a record stays if it is past the map's reach, or if its offset is the
     latest for its key and it has a value or is a tombstone still inside its
     delete horizon; keyless records go;
   * unchanged batches are copied byte for byte; changed ones are rebuilt
     with their codec, producer fields and last offset; a batch that keeps a
     tombstone (or a discardable marker) and has no horizon gets one,
     ``now + delete.retention.ms`` (KIP-534), and loses it once passed;
   * the last batch of the round is kept even when emptied, so its last
     offset survives.
3. Swap each group in with the ``.cleaned`` → ``.swap`` → final protocol.

Which keyed records are superseded is a ``KeepDecision``: the offset map's
answer here, a precomputed plan's in ``plan`` (a compaction planned elsewhere,
e.g. by Spark, applied with this same rewrite and swap). Everything else -
tombstone horizons, transactions, keyless records, empty batches - stays the
cleaner's, whoever decided what is latest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from stratalog.common.config import LogConfig
from stratalog.common.crash_points import crash_point
from stratalog.storage.log import Log
from stratalog.common.names import CLEANED_SUFFIX
from stratalog.records import (
    BatchHeader,
    BatchInfo,
    Compression,
    Record,
    build_batch,
    decode_any,
    decode_records,
    native_walk,
    parse_header,
)
from stratalog.common.limits import INT32_MAX
from stratalog.storage.segment import LogSegment
from stratalog.storage.cleaner.chunks import MAP_FULL, python_batches
from stratalog.storage.cleaner.offset_map import KeyOffsetMap, native_map_of
from stratalog.storage.cleaner.rebuild import empty_batch, filter_natively, rebuild_batch
from stratalog.storage.cleaner.selection import LogToClean
from stratalog.storage.cleaner.throttler import Throttler
from stratalog.storage.cleaner.producers import PRODUCER_ID_EXPIRATION_MS, last_batches_of_active_producers
from stratalog.records.transactions import TransactionTracker, control_type
from stratalog.storage.transactions import scan_aborted_transactions

Progress = Callable[[int], None]


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    records_removed: int = 0
    invalid_records: int = 0
    map_records: int = 0
    map_utilization: float = 0.0
    started: float = field(default_factory=time.monotonic)
    elapsed_seconds: float = 0.0

    @property
    def mb_per_second(self) -> float:
        return self.bytes_read / 1e6 / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0


@dataclass(frozen=True)
class CleanResult:
    end_offset: int
    stats: CleanerStats
    segments_before: int
    segments_after: int


class KeepDecision(Protocol):
    """Which keyed records a later record of the same key supersedes, up to where that is known."""

    @property
    def reach(self) -> int:
        """The last offset the decision covers; records above it are kept untouched."""
        ...

    def superseded(self, record: Record) -> bool:
        """True when ``record`` (keyed, at or below ``reach``) is not its key's latest."""
        ...


class OffsetMapDecision:
    """Kafka's rule: superseded when the offset map holds a later offset for the key."""

    def __init__(self, offset_map: KeyOffsetMap) -> None:
        self.offset_map = offset_map

    @property
    def reach(self) -> int:
        return self.offset_map.latest_offset

    def superseded(self, record: Record) -> bool:
        assert record.key is not None
        return record.offset < self.offset_map.get(record.key)


class _Transactions:
    """Aborted-transaction and producer knowledge, each scanned only once a pass needs it."""

    def __init__(self, log: Log, now_ms: int = 0, *, from_offset: int = 0,
                 producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self._log = log
        self._now_ms = now_ms
        self._producer_expiration_ms = producer_expiration_ms
        # A pass fed from ``from_offset`` on meets no marker below it: a transaction that ended there
        # must not be tracked as open (Kafka's collectAbortedTransactions(start, end)).
        self._from_offset = from_offset
        self._tracker: TransactionTracker | None = None
        self._producer_last_batches: set[int] | None = None

    def is_last_batch_of_active_producer(self, header: BatchHeader) -> bool:
        if header.producer_id < 0:
            return False
        if self._producer_last_batches is None:
            self._producer_last_batches = last_batches_of_active_producers(self._log, self._now_ms,
                                                                           self._producer_expiration_ms)
        return header.last_offset in self._producer_last_batches

    def known_last_batches_of_active_producers(self) -> set[int] | None:
        """What ``is_last_batch_of_active_producer`` checks against, once a batch has needed it."""
        return self._producer_last_batches

    def tracker(self) -> TransactionTracker:
        if self._tracker is None:
            self._tracker = TransactionTracker([t for t in scan_aborted_transactions(self._log)
                                                if t.last_offset >= self._from_offset])
        return self._tracker


class Cleaner:
    def __init__(self, offset_map: KeyOffsetMap, throttler: Throttler, *, progress: Progress | None = None,
                 decision: KeepDecision | None = None,
                 producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.offset_map = offset_map
        self.producer_expiration_ms = producer_expiration_ms   # producer.id.expiration.ms
        # The native kernel's map also walks batches: keys in, and records out, without Python objects.
        self.native_map = native_map_of(offset_map)
        self.throttler = throttler
        self.progress = progress
        self.decision: KeepDecision = decision if decision is not None else OffsetMapDecision(offset_map)

    # -- 1. the offset map ------------------------------------------------------------------
    def _build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        offset_map = self.offset_map
        offset_map.clear()
        segments = [s for s in log.segments if s.base_offset < end and s.next_offset() > start]
        transactions = _Transactions(log, from_offset=start)
        for index, segment in enumerate(segments):
            next_base = segments[index + 1].base_offset if index + 1 < len(segments) else end
            _, position = segment.offset_index.lookup(start)
            if not self._map_segment(segment, position, start, end, transactions, stats):
                stats.map_utilization = offset_map.utilization
                return  # full: this pass cleans up to the last whole batch mapped
            # Offsets missing at a segment's end (compacted away earlier) belong to it.
            offset_map.update_latest_offset(min(next_base, end) - 1)
        stats.map_utilization = offset_map.utilization

    def _map_segment(self, segment: LogSegment, position: int, start: int, end: int, transactions: _Transactions,
                     stats: CleanerStats) -> bool:
        """Map the batches of ``segment`` from ``position`` below offset ``end``; False once the map is full.

        With the native map, runs of plain batches are mapped a chunk at a time in one call
        (``map_batches``, see ``chunks``); the batches it leaves go one at a time through Python.
        """
        native_map = self.native_map
        full = False
        batches: Iterable[tuple[BatchInfo, bytes]]
        if native_map is None:
            batches = segment.log.batches_with_data(position)
        else:
            def native_step(chunk: bytes, relative: int) -> tuple[int, int]:
                nonlocal full
                consumed, walked, stop = native_map.map_batches(chunk, relative, start, end)
                if consumed:
                    self._account_read(consumed, stats)
                    stats.map_records += walked
                full = stop == MAP_FULL
                return consumed, stop

            batches = python_batches(segment.log, position, native_step)
        for info, data in batches:
            if info.base_offset >= end:
                return True
            self._account_read(info.size, stats)
            if info.last_offset < start:
                continue
            if not self._map_batch(info, data, start, transactions, stats):
                return False
            self.offset_map.update_latest_offset(info.last_offset)
        return not full

    def _map_batch(self, info: BatchInfo, data: bytes, start: int, transactions: _Transactions,
                   stats: CleanerStats) -> bool:
        if info.magic >= 2:
            header = parse_header(data)
            if header.is_control:
                if header.is_transactional:
                    transactions.tracker().on_control_batch(header, control_type(data, header))
                return True
            if header.is_transactional and transactions.tracker().on_data_batch(header):
                return True  # aborted data never enters the map
            if self.native_map is not None:
                native_map = self.native_map
                walked, fitted = native_walk(data, 0, lambda records, begin, end, h: native_map.map_records(
                    records, begin, end, h.records_count, h.base_offset, start))
                stats.map_records += walked
                return fitted
            records = decode_records(data)
        else:
            records = decode_any(data, 0)[1]
        offset_map = self.offset_map
        for record in records:
            stats.map_records += 1
            if record.key is not None and record.offset >= start:
                if not offset_map.try_put(record.key, record.offset):
                    return False
        return True

    # -- 2. grouping ------------------------------------------------------------------------
    @staticmethod
    def group_segments(segments: list[LogSegment], config: LogConfig, first_uncleanable: int) -> list[list[LogSegment]]:
        """Kafka's ``groupSegmentsBySize``: consecutive segments that fit together in one."""
        groups: list[list[LogSegment]] = []
        index = 0
        while index < len(segments):
            group = [segments[index]]
            log_size = group[0].size
            index_size = group[0].offset_index.size_in_bytes
            time_size = group[0].time_index.size_in_bytes
            index += 1
            while index < len(segments):
                candidate = segments[index]
                last_estimate = (segments[index + 1].base_offset - 1 if index + 1 < len(segments)
                                 else first_uncleanable - 1)
                if (log_size + candidate.size > config.segment_bytes
                        or index_size + candidate.offset_index.size_in_bytes > config.segment_index_bytes
                        or time_size + candidate.time_index.size_in_bytes > config.segment_index_bytes
                        or (candidate.size > 0 and last_estimate - group[0].base_offset > INT32_MAX)):
                    break
                group.append(candidate)
                log_size += candidate.size
                index_size += candidate.offset_index.size_in_bytes
                time_size += candidate.time_index.size_in_bytes
                index += 1
            groups.append(group)
        return groups

    # -- 3. cleaning a group ----------------------------------------------------------------
    def clean(self, log: Log, to_clean: LogToClean, now_ms: int) -> CleanResult:
        stats = CleanerStats()
        with log.maintenance_lock:
            before = len(log.segments)
            self._build_offset_map(log, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, stats)
            end_offset = self.offset_map.latest_offset + 1
            segments = [s for s in log.segments if s.base_offset < end_offset]
            self.rewrite(log, segments, now_ms, to_clean.first_uncleanable_offset, stats)
            stats.elapsed_seconds = time.monotonic() - stats.started
            return CleanResult(end_offset, stats, before, len(log.segments))

    def rewrite(self, log: Log, segments: list[LogSegment], now_ms: int, round_upper_bound: int,
                stats: CleanerStats) -> None:
        """Rewrite ``segments`` group by group, keeping what ``self.decision`` keeps; each group is swapped in."""
        transactions = _Transactions(log, now_ms, producer_expiration_ms=self.producer_expiration_ms)
        for group in self.group_segments(segments, log.config, round_upper_bound):
            self._clean_group(log, group, now_ms, round_upper_bound, transactions, stats)

    def _clean_group(self, log: Log, group: list[LogSegment], now_ms: int, round_upper_bound: int,
                     transactions: _Transactions, stats: CleanerStats) -> None:
        config = log.config
        # As Kafka's cleaner: an I/O error writing the cleaned copy takes the directory offline.
        with log.failures.guard(log.log_dir, f"cleaning of {log.topic_partition}"):
            cleaned = LogSegment(log.dir, group[0].base_offset, index_interval_bytes=config.index_interval_bytes,
                                 max_index_size=config.segment_index_bytes, create=True, suffix=CLEANED_SUFFIX,
                                 now_ms=now_ms)
            self._fill_and_swap(log, group, cleaned, now_ms, round_upper_bound, transactions, stats)

    def _fill_and_swap(self, log: Log, group: list[LogSegment], cleaned: LogSegment, now_ms: int,
                       round_upper_bound: int, transactions: _Transactions, stats: CleanerStats) -> None:
        config = log.config
        try:
            for segment in group:
                self._filter_segment(segment, cleaned, config, now_ms, round_upper_bound, transactions, stats)
                crash_point("clean.segment_copied")
            cleaned.on_become_inactive()
            cleaned.flush()
            mtime = os.stat(group[-1].log.path).st_mtime
            os.utime(cleaned.log.path, (mtime, mtime))
            crash_point("clean.before_swap")
            log.replace_segments(cleaned, group)
        except BaseException:
            try:
                cleaned.delete_files()
            except OSError:
                pass  # a failed disk: the .cleaned files go at the next start (the loader removes them)
            raise

    def _filter_segment(self, segment: LogSegment, cleaned: LogSegment, config: LogConfig, now_ms: int,
                        round_upper_bound: int, transactions: _Transactions, stats: CleanerStats) -> None:
        """Write what ``segment`` keeps into ``cleaned``.

        With the native map (and the offset map's rule), runs of plain batches are filtered, and
        rebuilt where they change, a chunk at a time in one call (``filter_batches``, see
        ``chunks``) and written in one append; the batches it leaves go one at a time through Python.
        """
        native_map = self.native_map if isinstance(self.decision, OffsetMapDecision) else None
        batches: Iterable[tuple[BatchInfo, bytes]]
        if native_map is None:
            batches = segment.log.batches_with_data(0)
        else:
            reach = self.decision.reach

            def native_step(chunk: bytes, relative: int) -> tuple[int, int]:
                consumed, out, written, read, kept, invalid, stop = native_map.filter_batches(
                    chunk, relative, reach, now_ms, config.delete_retention_ms, round_upper_bound,
                    transactions.known_last_batches_of_active_producers())
                if consumed:
                    self._account_read(consumed, stats)
                    _count(stats, read, kept)
                    stats.invalid_records += invalid
                    self._write(cleaned, out, written, stats)
                return consumed, stop

            batches = python_batches(segment.log, 0, native_step)
        for info, data in batches:
            self._account_read(info.size, stats)
            output = self._filter_batch(info, data, config, now_ms, round_upper_bound, transactions, stats)
            if output is not None:
                out_data, last_offset, max_timestamp = output
                self._write(cleaned, out_data, [(last_offset, max_timestamp, len(out_data))], stats)

    def _write(self, cleaned: LogSegment, data: bytes, batches: list[tuple[int, int, int]],
               stats: CleanerStats) -> None:
        if data:
            cleaned.append_batches(data, batches)
            stats.bytes_written += len(data)
            self.throttler.maybe_throttle(len(data))

    def _filter_batch(self, info: BatchInfo, data: bytes, config: LogConfig, now_ms: int, round_upper_bound: int,
                      transactions: _Transactions, stats: CleanerStats) -> tuple[bytes, int, int] | None:
        """The bytes to write for one batch (original or rebuilt), or None to drop it."""
        if info.magic < 2:
            return self._filter_legacy(info, data, stats)
        header = parse_header(data)
        discard_batch = False
        marker_discardable = False
        if header.is_control:
            marker_discardable = header.is_transactional and transactions.tracker().on_control_batch(
                header, control_type(data, header))
            horizon = header.delete_horizon_ms
            discard_batch = marker_discardable and horizon is not None and horizon <= now_ms
        elif header.is_transactional:
            discard_batch = transactions.tracker().on_data_batch(header)
        # Kept even when emptied: the round's last batch (its last offset must survive) and an
        # active producer's last batch (its sequence must survive), as Kafka's RETAIN_EMPTY.
        retain_empty = header.next_offset == round_upper_bound

        if (self.native_map is not None and isinstance(self.decision, OffsetMapDecision) and not header.is_control
                and not discard_batch and header.compression == Compression.NONE):
            filtered = filter_natively(self.native_map, data, header, self.decision.reach, now_ms,
                                       config.delete_retention_ms)
            if filtered is not None:
                kept_count, invalid, rebuilt = filtered
                stats.invalid_records += invalid
                _count(stats, header.records_count, kept_count)
                return _written(header, data, kept_count, rebuilt, retain_empty, transactions)

        records = decode_records(data)
        if discard_batch:
            kept: list[Record] = []
        elif header.is_control:
            kept = records  # a kept marker keeps its record
        else:
            kept = [r for r in records if self._keep_record(r, header, now_ms, stats)]
        _count(stats, len(records), len(kept))
        if not kept:
            return _written(header, data, 0, None, retain_empty, transactions)
        has_tombstone = not header.is_control and any(r.value is None for r in kept)
        needs_horizon = (has_tombstone or (header.is_control and marker_discardable)) \
            and header.delete_horizon_ms is None
        if len(kept) == len(records) and not needs_horizon:
            return _written(header, data, len(kept), None, retain_empty, transactions)
        horizon = now_ms + config.delete_retention_ms if needs_horizon else header.delete_horizon_ms
        return _written(header, data, len(kept), rebuild_batch(header, kept, horizon), retain_empty, transactions)

    def _keep_record(self, record: Record, header: BatchHeader, now_ms: int, stats: CleanerStats) -> bool:
        decision = self.decision
        if record.offset > decision.reach:
            return True
        if record.key is None:
            stats.invalid_records += 1
            return False
        if decision.superseded(record):
            return False
        if record.value is not None:
            return True
        horizon = header.delete_horizon_ms
        return horizon is None or now_ms < horizon

    def _filter_legacy(self, info: BatchInfo, data: bytes, stats: CleanerStats) -> tuple[bytes, int, int] | None:
        """v0/v1 entries: kept as they are when whole; otherwise what remains is rewritten as v2 (KIP-724)."""
        records = decode_any(data, 0)[1]
        decision = self.decision
        # Legacy tombstones are kept while latest: Kafka's legacy horizon uses file mtimes,
        # which a copy can reset, so keeping them is the choice that never loses a delete.
        kept = [r for r in records
                if r.offset > decision.reach or (r.key is not None and not decision.superseded(r))]
        _count(stats, len(records), len(kept))
        if not kept:
            return None
        if len(kept) == len(records):
            return data, info.last_offset, info.max_timestamp
        rebuilt = build_batch(kept, base_offset=kept[0].offset, last_offset_delta=kept[-1].offset - kept[0].offset)
        return rebuilt, kept[-1].offset, max(r.timestamp for r in kept)

    def _account_read(self, size: int, stats: CleanerStats) -> None:
        stats.bytes_read += size
        self.throttler.maybe_throttle(size)
        if self.progress is not None:
            self.progress(size)


def _count(stats: CleanerStats, read: int, kept: int) -> None:
    stats.records_read += read
    stats.records_retained += kept
    stats.records_removed += read - kept


def _written(header: BatchHeader, data: bytes, kept: int, rebuilt: bytes | None, retain_empty: bool,
             transactions: _Transactions) -> tuple[bytes, int, int] | None:
    """What is written of a v2 batch that keeps ``kept`` records: the batch as it was (``rebuilt`` None),
    rebuilt, emptied but kept (the round's last batch, an active producer's last), or nothing."""
    if kept == 0:
        if retain_empty or transactions.is_last_batch_of_active_producer(header):
            return empty_batch(header), header.last_offset, header.max_timestamp
        return None
    if rebuilt is None:
        return data, header.last_offset, header.max_timestamp
    return rebuilt, header.last_offset, parse_header(rebuilt).max_timestamp
