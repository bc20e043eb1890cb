"""A log's producers and transactions, and their snapshots (Kafka's ``ProducerStateManager`` for one log).

The producers' idempotence state (``producer_state.ProducerStates``) and the log's open and
aborted transactions (``records.transactions.TransactionState``) are built together by one scan of
the log's batch headers on first need, then kept up to date by every append; a truncation forgets
them and the next need scans again. Kafka reads them from producer snapshots and ``.txnindex``
files; the engine writes the snapshots for Kafka (at a roll and at close, when the state is known)
but no ``.txnindex`` yet, so its own scan covers the whole log.

The scan reads every batch, so it runs outside the log's lock and appends go on; what they added
meanwhile is fed under the lock, and a truncation meanwhile makes it start over. Every method but
``state`` and ``scan`` expects the caller to hold the log's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from stratalog.common.errors import UnknownTopicOrPartitionError
from stratalog.common.files import fsync_dir
from stratalog.records import LOG_OVERHEAD, MAGIC_OFFSET, producer_batches_natively
from stratalog.records.batch_header import ATTRIBUTES_OFFSET, CONTROL_BIT, V2_HEADER_SIZE
from stratalog.records.transactions import TransactionState
from stratalog.storage.file_records import SCAN_CHUNK, FileRecords
from stratalog.storage.local_log import LocalLog
from stratalog.storage.producer_snapshot import delete_producer_snapshots, write_producer_snapshot
from stratalog.storage.producer_state import ProducerStates, feed_batch
from stratalog.storage.segment import LogSegment

_PRODUCERS_PYTHON, _PRODUCERS_END = 1, 2   # why the native producer-batch walk stopped (see _feed)


class LogProducers:
    def __init__(self, local: LocalLog, snapshots: Iterable[int] = ()) -> None:
        self.local = local
        self.transactions: TransactionState | None = None
        self.producers: ProducerStates | None = None   # built with ``transactions``, by the same scan
        self._scanning = threading.Lock()   # one scan at a time
        self._truncations = 0   # a scan that a truncation overtook starts again
        # The offsets of this partition's producer ``.snapshot`` files, sorted (written for Kafka).
        self.snapshots: list[int] = sorted(snapshots)

    # -- the state, scanned on first need -----------------------------------------------------
    def state(self, log_start_offset: Callable[[], int]) -> TransactionState:
        """The transactions (and with them the producers), scanned first if unknown. ``log_start_offset``
        is read under the lock when the scan ends: what lies below it is forgotten."""
        if (state := self.transactions) is not None:
            return state
        with self._scanning:
            failures = 0
            while (state := self.transactions) is None:
                try:
                    self.scan(log_start_offset)
                except (OSError, ValueError):
                    # A segment the scan picked up went meanwhile (retention, the cleaner's swap): scan
                    # the current ones again; a log closed meanwhile is an unknown partition.
                    if self.local.closed:
                        raise UnknownTopicOrPartitionError(
                            f"{self.local.topic_partition}: the log was closed during its transaction scan") from None
                    failures += 1
                    if failures == 3:
                        raise
            return state

    def scan(self, log_start_offset: Callable[[], int], *, under_lock: bool = False) -> None:
        """Build the state from the log's batches. ``under_lock``: the caller holds the lock (an append
        found the state gone), so everything is scanned at once."""
        state, producers = TransactionState(), ProducerStates()
        local = self.local
        if under_lock:
            _feed(state, producers, local.segments, 0, None)
            state.forget_below(log_start_offset())
            self.transactions, self.producers = state, producers
            return
        with local.lock:
            local.check_open()
            truncations, end, segments = self._truncations, local.log_end_offset, local.segments
        _feed(state, producers, segments, 0, end)
        with local.lock:
            local.check_open()
            if truncations == self._truncations:
                _feed(state, producers, list(local.segments_from(end)), end, None)
                state.forget_below(log_start_offset())
                self.transactions, self.producers = state, producers

    def forget(self) -> None:
        """A truncation: the state no longer describes the log (a scan in flight starts over)."""
        self.transactions = None
        self.producers = None
        self._truncations += 1

    # -- kept up to date ----------------------------------------------------------------------
    def on_batch_written(self, batch: bytes | bytearray) -> None:
        """A batch appended without the leader's checks (a follower's copy, a raw append)."""
        if self.transactions is not None:
            self.transactions.on_batch(batch)
        if self.producers is not None:
            feed_batch(self.producers, batch)

    def forget_below(self, offset: int) -> None:
        """The log start offset moved to ``offset``."""
        if self.transactions is not None:
            self.transactions.forget_below(offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers ``producer.id.expiration.ms`` has passed (none before the scan)."""
        if self.producers is None or self.transactions is None:
            return 0
        return len(self.producers.remove_expired(now_ms, expiration_ms, self.transactions.ongoing))

    # -- snapshots ----------------------------------------------------------------------------
    def take_snapshot(self, offset: int) -> None:
        """Kafka's ``takeSnapshot`` at ``offset`` (the log end): only when the state is known (its scan
        is not worth stalling a roll or a shutdown for; Kafka, finding no snapshot here, starts from
        an older one or from the log) and newer than the last snapshot."""
        if self.producers is None or self.transactions is None:
            return
        if self.snapshots and offset <= self.snapshots[-1]:
            return
        write_producer_snapshot(self.local.dir, offset, self.producers.snapshot_entries(self.transactions.ongoing))
        self.snapshots.append(offset)

    def delete_snapshots(self, doomed: Callable[[int], bool], *, durably: bool = False) -> None:
        """``durably``: a truncation's or a cleaner's segment swap, fsynced, so that no snapshot of
        segments that are gone comes back after a power loss to describe a log that differs there."""
        gone = [offset for offset in self.snapshots if doomed(offset)]
        if gone:
            self.snapshots = [offset for offset in self.snapshots if not doomed(offset)]
            delete_producer_snapshots(self.local.dir, gone)
            if durably:
                fsync_dir(self.local.dir)


def _feed(state: TransactionState, producers: ProducerStates, segments: list[LogSegment], start: int,
          end: int | None) -> None:
    """Feed the states the batches of ``segments`` from ``start`` to ``end`` (None: to their end).
    Headers are all they need, but of a control batch (a transaction marker) its record too. Only
    batches a producer wrote change them: with the native kernel the others are stepped over a
    chunk of the file at a time, unless batches are so large that reading headers alone is less."""
    for segment in segments:
        records = segment.log
        position, limit = 0, records.size
        while position < limit:
            chunk = records.read(position, min(SCAN_CHUNK, limit - position))
            found = producer_batches_natively(chunk, 0, limit - position, start, end)
            if found is None:
                break
            positions, consumed, batches, stop = found
            for relative in positions:
                _feed_batch(state, producers, records, position + relative, chunk[relative : relative + V2_HEADER_SIZE])
            position += consumed
            if stop == _PRODUCERS_END:
                return
            if stop == _PRODUCERS_PYTHON or (batches and consumed // batches > SCAN_CHUNK // 16):
                break
        if not _feed_from_headers(state, producers, records, position, start, end):
            return


def _feed_from_headers(state: TransactionState, producers: ProducerStates, records: FileRecords, position: int,
                       start: int, end: int | None) -> bool:
    """The scan's walk from ``position`` over headers read alone; False once it reached ``end``."""
    for info, head in records.batch_headers(position):
        if end is not None and info.base_offset >= end:
            return False
        if info.last_offset >= start:
            _feed_batch(state, producers, records, info.position, head)
    return True


def _feed_batch(state: TransactionState, producers: ProducerStates, records: FileRecords, position: int,
                head: bytes) -> None:
    data = head
    if head[MAGIC_OFFSET] >= 2 and head[ATTRIBUTES_OFFSET + 1] & CONTROL_BIT:
        data = records.read(position, int.from_bytes(head[8:12], "big", signed=True) + LOG_OVERHEAD)
    state.on_batch(data)
    feed_batch(producers, data)
