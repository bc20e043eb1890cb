"""A partition's log: offsets, append, read, roll, flush, truncate (Kafka's ``UnifiedLog``).

As Kafka's ``UnifiedLog``, it owns the parts and says what offsets mean: the log start offset,
the high watermark, leader epochs, the append's checks. The segments on disk, the log end offset
(LEO) and the recovery point are its ``LocalLog`` (``local_log``); producers, transactions and
their snapshots its ``LogProducers`` (``log_producers``); validation of incoming batches lives in
``validation``, a follower's append in ``follower_append``, ListOffsets' search in
``timestamp_search``, opening after a crash in ``loader``, deleting old segments in ``retention``.
All of it changes under the one lock of this log.

The standalone engine is the only replica of each partition, so it is leader
of epoch 0 and its high watermark follows the LEO (Kafka does the same for a
leader whose ISR is itself).
"""

from __future__ import annotations

import copy
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from stratalog.common.config import LogConfig
from stratalog.common.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StratalogError,
    UnknownTopicOrPartitionError,
)
from stratalog.storage.leader_epoch import LeaderEpochCache
from stratalog.storage.local_log import LocalLog
from stratalog.storage.log_producers import LogProducers
from stratalog.storage.log_dir_failure import LogDirFailureChannel
from stratalog.storage.producer_state import BatchMetadata, ProducerStates, last_sequence
from stratalog.common.names import TopicPartition
from stratalog.records import MAGIC_OFFSET, Record, TimestampType
from stratalog.records.info import split_batches
from stratalog.records.batch_header import ATTRIBUTES_OFFSET
from stratalog.records.transactions import TransactionState
from stratalog.storage.isolation import FetchIsolation
from stratalog.storage.follower_append import append_as_follower
from stratalog.storage.log_results import AppendInfo, FetchInfo, PreparedAppend
from stratalog.storage.record_reads import records_with_type
from stratalog.storage.segment import NEVER, LogSegment, RollParams
from stratalog.storage.timestamp_search import OffsetAndTimestamp, offset_for_timestamp
from stratalog.storage.validation import AsSentRules, ValidatedBatch, as_sent_rules, validate_leader_batch

Clock = Callable[[], int]

DEFAULT_LEADER_EPOCH = 0
INLINE_APPEND_MAX_BYTES = 1 << 20   # the largest batch an event loop validates and appends itself
COMPRESSION_BITS = 0x07             # of the low byte of a v2 batch's attributes
# A v2 batch's last offset delta, then (past both timestamps) producer id, epoch and base sequence.
_PRODUCER_FIELDS = struct.Struct(">i16xqhi")
_PRODUCER_FIELDS_END = 23 + _PRODUCER_FIELDS.size


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochCache,
        clock: Clock = wall_clock_ms,
        failure_channel: LogDirFailureChannel | None = None,
        producer_snapshots: Iterable[int] = (),
    ) -> None:
        self.failures = failure_channel if failure_channel is not None else LogDirFailureChannel()
        self.topic_partition = topic_partition
        # Said by every append while the directory is healthy: formatted once.
        self._appending = f"append to {topic_partition}"
        self.clock = clock
        self.leader_epoch = DEFAULT_LEADER_EPOCH
        self.epoch_cache = leader_epoch_cache
        self.lock = threading.RLock()
        # The segments, the log end and the recovery point: changed only under ``lock``.
        self.local = LocalLog(directory, topic_partition, config, segments, recovery_point=recovery_point,
                              clock=clock, failures=self.failures, lock=self.lock)
        # Held by retention and the cleaner (never both at once on one log); appends and
        # reads only take ``lock``, so they go on while a pass works.
        self.maintenance_lock = threading.RLock()
        self.log_start_offset = log_start_offset
        self.high_watermark = self.log_end_offset
        # A log that is its partition's only replica: the high watermark follows the log end.
        # Replication (stratalog.broker.partition) turns this off and moves it by the ISR's LEOs.
        self.hw_follows_leo = True
        # The config's AsSentRules, made again when the config changes (``_append_as_sent``).
        self._as_sent_rules: tuple[LogConfig | None, AsSentRules | None] = (None, None)
        # Producers and open and aborted transactions, scanned from the batches on first need.
        self.producer_state = LogProducers(self.local, producer_snapshots)

    def __repr__(self) -> str:
        return f"Log({self.topic_partition}, segments={self.local.segment_count}, LEO={self.log_end_offset})"

    # -- the segments (LocalLog's) ------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self.local.config   # one reference for both halves: a roll sizes segments by it

    @property
    def dir(self) -> Path:
        return self.local.dir

    @property
    def log_dir(self) -> Path:
        return self.local.log_dir

    @property
    def recovery_point(self) -> int:
        return self.local.recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self.local.last_flush_ms

    @property
    def closed(self) -> bool:
        return self.local.closed

    @property
    def segments(self) -> list[LogSegment]:
        return self.local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local.active_segment

    def floor_segment(self, offset: int) -> LogSegment | None:
        return self.local.floor_segment(offset)

    def segments_from(self, offset: int) -> Iterator[LogSegment]:
        return self.local.segments_from(offset)

    @property
    def log_end_offset(self) -> int:
        return self.local.active_segment.next_offset()

    @property
    def size(self) -> int:
        return self.local.size

    # -- append -----------------------------------------------------------------------------
    def append(self, batch: bytes | bytearray, *, now_ms: int | None = None) -> AppendInfo:
        """Append one producer batch as leader (``append_batches`` of one)."""
        info = self._append_as_sent(batch, now_ms, False)
        if info is not None:
            return info
        return self.append_prepared(self.prepare_append((batch,), now_ms=now_ms))[0]

    def append_batches(self, batches: Sequence[bytes | bytearray], *, now_ms: int | None = None
                       ) -> list[AppendInfo]:
        """Append producer batches as leader: contiguous offsets, all of them or none.

        The producer's bytes are written as they came, the base offset and leader epoch set on the
        way (``FileRecords.append_batch``); a copy is made only where the batch must change: a
        rewritten max timestamp, LogAppendTime, or another codec asked by ``compression.type``.
        """
        if len(batches) == 1:
            return [self.append(batches[0], now_ms=now_ms)]
        return self.append_prepared(self.prepare_append(batches, now_ms=now_ms))

    def try_append(self, batches: Sequence[bytes | bytearray], *, now_ms: int | None = None
                   ) -> list[AppendInfo] | None:
        """``append_batches`` for a caller that must not block (an event loop), or None and nothing
        appended: for batches not ``may_append_inline``, and where ``try_append_prepared`` declines.
        The caller then calls ``append_batches`` on a thread."""
        if not self.may_append_inline(batches):
            return None
        info = self._append_as_sent(batches[0], now_ms, True)
        if info is not None:
            return [info]
        return self.try_append_prepared(self.prepare_append(batches, now_ms=now_ms))

    def _append_as_sent(self, batch: bytes | bytearray, now_ms: int | None, inline: bool) -> AppendInfo | None:
        """One producer batch checked and written by one native call (``LogSegment.try_append_as_sent``):
        the common case of an append, without the Python work of ``prepare_append`` and
        ``append_prepared``. None, and nothing written, where the reference path must decide: no
        native kernel, a batch that is not plain or that the topic changes, an idempotent producer's
        batch that repeats or breaks its sequence (or whose producers are not scanned yet), a roll, a
        new leader epoch to checkpoint; on an event loop (``inline``) also a held lock and a flush
        that would fall due."""
        if type(batch) is not bytes or len(batch) < _PRODUCER_FIELDS_END:   # a bytearray could change mid-write
            return None
        now = self.clock() if now_ms is None else now_ms
        lock = self.lock
        if not lock.acquire(not inline):   # (positional: a keyword costs a tenth of a microsecond)
            return None
        try:
            # Every append passes here: the LocalLog's fields are read once, not through Log's properties.
            local = self.local
            # The config in force under the lock (alter-configs changes it under the lock).
            config = local.config
            cached = self._as_sent_rules
            if cached[0] is not config:
                cached = self._as_sent_rules = (config, as_sent_rules(config))
            rules = cached[1]
            # A closed or offline log: the reference path checks the batch first and says which fault.
            if rules is None or local.closed or self.failures.is_offline(local.log_dir):
                return None
            segment = local.active_segment
            first_offset = segment.next_offset()
            if self.epoch_cache.would_change(self.leader_epoch, first_offset):
                return None
            # An idempotent producer's sequence is checked here, before the write; a batch that
            # repeats an earlier one, or is refused, is the reference path's to answer and name.
            last_offset_delta, producer_id, producer_epoch, base_sequence = _PRODUCER_FIELDS.unpack_from(batch, 23)
            if producer_id >= 0:
                producers = self.producer_state.producers
                if producers is None or base_sequence < 0:
                    return None
                try:
                    if producers.check(producer_id, producer_epoch, base_sequence,
                                       last_sequence(base_sequence, last_offset_delta), self._appending) is not None:
                        return None
                except StratalogError:
                    return None
            # flush.messages falls due at last offset recovery point + flush.messages - 1.
            max_last_offset = local.recovery_point + config.flush_messages - 2 if inline else NEVER
            # The write and what follows it (a flush that falls due) as ``failures.guard`` runs a
            # write, without entering a context: an OSError takes the directory offline.
            try:
                accepted = segment.try_append_as_sent(batch, first_offset, self.leader_epoch, rules, now,
                                                      max_last_offset, producer_id)
                if accepted is None:
                    return None
                last_offset_delta, max_timestamp, record_count = accepted
                return self._written(first_offset, len(batch), last_offset_delta, max_timestamp, -1, record_count,
                                     producer_id, producer_epoch, base_sequence)
            except OSError as error:
                raise self.failures.storage_error(local.log_dir, self._appending, error) from error
        finally:
            lock.release()

    def prepare_append(self, batches: Sequence[bytes | bytearray], *, now_ms: int | None = None
                       ) -> PreparedAppend:
        """Validate batches for ``append_prepared`` without changing anything.

        Splitting the two lets a request that spans several partitions refuse all of them
        when one batch is bad, while each batch is still validated only once. Validation
        is the CPU-heavy part (CRCs, record walks, perhaps recompression), so it runs
        outside the log's lock.
        """
        if not batches:
            raise InvalidRecordError(f"append to {self.topic_partition}: no record batch to append")
        now = self.clock() if now_ms is None else now_ms
        config = self.config
        return PreparedAppend(self, config, now, tuple(batches), tuple(self._validate(batches, config, now)))

    def append_prepared(self, prepared: PreparedAppend) -> list[AppendInfo]:
        """Append what ``prepare_append`` validated, all or none, under the log's lock.

        Should the config have changed since (an alter-configs in between), the batches
        are validated again under the lock against the config that is now in force.
        """
        if prepared.log is not self:
            raise ValueError(f"{self.topic_partition}: batches prepared for {prepared.log.topic_partition}")
        if self.producer_state.producers is None and any(v.producer_id >= 0 for v in prepared.validated):
            self.transactions()   # the scan that finds the producers' state, before the lock
        with self.lock:
            self._check_open()
            validated = prepared.validated
            if prepared.config is not self.config:
                validated = tuple(self._validate(prepared.batches, self.config, prepared.now_ms))
            if len(validated) > 1:
                self._check_sequences_first(validated)
            with self.failures.guard(self.log_dir, self._appending):
                infos = []
                for v in validated:
                    info = self._append_validated(v, prepared.now_ms)
                    assert info is not None   # only an inline append declines
                    infos.append(info)
                return infos

    def _check_sequences_first(self, validated: Sequence[ValidatedBatch]) -> None:
        """Several batches in one append: an idempotent producer's out-of-order or fenced batch
        among them refuses them all before the first is written (all or none)."""
        if not any(v.producer_id >= 0 and v.base_sequence >= 0 for v in validated):
            return
        if self.producer_state.producers is None:
            self.producer_state.scan(self._log_start_offset, under_lock=True)
        assert self.producer_state.producers is not None
        trial = copy.deepcopy(self.producer_state.producers)
        offset = self.log_end_offset
        for v in validated:
            if v.producer_id >= 0 and v.base_sequence >= 0:
                self._idempotence_check(v, trial)
                trial.on_batch(v.producer_id, v.producer_epoch, v.base_sequence, v.last_offset_delta, offset)
            offset += v.last_offset_delta + 1

    def may_append_inline(self, batches: Sequence[bytes | bytearray]) -> bool:
        """Whether an append of ``batches`` is cheap enough to try on an event loop: one uncompressed
        v2 batch of at most ``INLINE_APPEND_MAX_BYTES`` that the topic keeps as sent, so that its
        validation is a CRC and a walk of its records, with no codec to run (a compressed batch may
        expand without bound)."""
        if len(batches) != 1:
            return False
        batch = batches[0]
        return (ATTRIBUTES_OFFSET + 2 <= len(batch) <= INLINE_APPEND_MAX_BYTES and batch[MAGIC_OFFSET] == 2
                and batch[ATTRIBUTES_OFFSET + 1] & COMPRESSION_BITS == 0
                and self.config.compression_type in ("producer", "uncompressed"))

    def try_append_prepared(self, prepared: PreparedAppend) -> list[AppendInfo] | None:
        """``append_prepared`` for a caller that must not block (an event loop), or None and
        nothing appended: when the log's lock is held, when the config changed since the batches
        were validated, or when ``_append_validated`` finds the append would do more than write to
        the page cache and the index maps. The caller then calls ``append_prepared`` on a thread."""
        if prepared.log is not self or len(prepared.validated) != 1:
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            self._check_open()
            if prepared.config is not self.config:
                return None
            with self.failures.guard(self.log_dir, self._appending):
                info = self._append_validated(prepared.validated[0], prepared.now_ms, inline=True)
            return None if info is None else [info]
        finally:
            self.lock.release()

    def _validate(self, batches: Sequence[bytes | bytearray], config: LogConfig, now: int
                  ) -> list[ValidatedBatch]:
        out = []
        for number, batch in enumerate(batches, start=1):
            try:
                validated = validate_leader_batch(batch, config, self.topic_partition, now)
                if len(validated.data) > config.segment_bytes:
                    raise RecordBatchTooLargeError(
                        f"{self.topic_partition}: batch of {len(validated.data)} bytes is larger than "
                        f"segment.bytes ({config.segment_bytes}) and can never fit in a segment"
                    )
            except StratalogError as error:
                if len(batches) > 1:  # say which batch, keeping the error's type and code
                    error.args = (f"batch {number} of {len(batches)}: {error}",)
                raise
            out.append(validated)
        return out

    def _append_validated(self, validated: ValidatedBatch, now: int, *, inline: bool = False) -> AppendInfo | None:
        """Write one validated batch at the log end, under the log's lock.

        ``inline``: the caller is an event loop. Every step that may block -- the producers' state
        scan, a roll (files created, indexes trimmed, a flush), a flush due to ``flush.messages``,
        a new epoch's checkpoint -- is found before anything changes, and the answer is then None.
        Only writes to the page cache and the index maps remain.
        """
        data = validated.data
        if validated.producer_id >= 0 and validated.base_sequence >= 0:
            if inline and self.producer_state.producers is None:
                return None   # the producers' state needs its scan first
            repeated = self._idempotence_check(validated)
            if repeated is not None:   # a producer's retry: the offsets it got the first time, nothing written
                return AppendInfo(repeated.first_offset, repeated.last_offset, validated.max_timestamp,
                                  validated.log_append_time, validated.record_count, 0, self.log_start_offset)
        first_offset = self.log_end_offset
        last_offset = first_offset + validated.last_offset_delta
        segment = self.active_segment
        roll_due = segment.should_roll(RollParams(self.config.segment_ms, self.config.segment_bytes,
                                                  validated.max_timestamp, last_offset, len(data), now))
        if inline and (roll_due or self._flush_due(last_offset)
                       or self.epoch_cache.would_change(self.leader_epoch, first_offset)):
            return None
        if roll_due:
            segment = self.roll()
        segment.append_leader_batch(first_offset, self.leader_epoch, last_offset, validated.max_timestamp, data)
        self.epoch_cache.assign(self.leader_epoch, first_offset)
        return self._written(first_offset, len(data), validated.last_offset_delta, validated.max_timestamp,
                             validated.log_append_time, validated.record_count, validated.producer_id,
                             validated.producer_epoch, validated.base_sequence)

    def _written(self, first_offset: int, size: int, last_offset_delta: int, max_timestamp: int, log_append_time: int,
                 record_count: int, producer_id: int, producer_epoch: int, base_sequence: int) -> AppendInfo:
        """What follows the write of a producer's batch of ``size`` bytes at ``first_offset``, on either
        append path: the producer's batch recorded, the high watermark of a single copy moved, a flush
        that fell due. The batch's facts come as plain values: the one-call path has no ``ValidatedBatch``
        to take them from, and making one would cost every plain append more than this call."""
        last_offset = first_offset + last_offset_delta
        producers = self.producer_state.producers
        if producers is not None:   # a producer's batch is neither transactional nor a marker
            producers.on_batch(producer_id, producer_epoch, base_sequence, last_offset_delta, first_offset,
                               max_timestamp)
        if self.hw_follows_leo:
            self.high_watermark = last_offset + 1
        if self._flush_due(last_offset):   # after a roll, whose flush moved the recovery point
            self.flush()
        # tuple.__new__ rather than AppendInfo(...), whose __new__ is a Python function: a call less.
        return tuple.__new__(AppendInfo, (first_offset, last_offset, max_timestamp, log_append_time, record_count,
                                          size, self.log_start_offset))

    def _flush_due(self, last_offset: int) -> bool:
        local = self.local
        return last_offset + 1 - local.recovery_point >= local.config.flush_messages

    def _idempotence_check(self, validated: ValidatedBatch, producers: ProducerStates | None = None
                           ) -> BatchMetadata | None:
        """The earlier batch an idempotent producer's batch repeats, or None; raises when it is out
        of order or fenced. Against the log's producers (or ``producers``, a trial copy). Under the
        log's lock."""
        if producers is None:
            if self.producer_state.producers is None:   # rare: a truncation since append_prepared's scan
                self.producer_state.scan(self._log_start_offset, under_lock=True)
            assert self.producer_state.producers is not None
            producers = self.producer_state.producers
        last_seq = last_sequence(validated.base_sequence, validated.last_offset_delta)
        return producers.check(validated.producer_id, validated.producer_epoch, validated.base_sequence,
                               last_seq, self._appending)

    def append_raw(self, data: bytes) -> None:
        """Append batches that already carry their offsets, unchecked: for tests that build logs, damaged
        ones included (a follower's copy is ``append_as_follower``, which checks each batch first)."""
        with self.lock, self.failures.guard(self.log_dir, self._appending):
            self._check_open()
            for info, batch in split_batches(data):
                if info.base_offset < self.log_end_offset:
                    raise OffsetOutOfRangeError(
                        f"{self.topic_partition}: batch at offset {info.base_offset} is below the log end "
                        f"offset {self.log_end_offset}"
                    )
                segment = self.maybe_roll(info.size, info.max_timestamp, info.last_offset, self.clock(),
                                           first_offset=info.base_offset)
                segment.append(info.last_offset, info.max_timestamp, info.last_offset, batch)
                self.producer_state.on_batch_written(batch)
            if self.hw_follows_leo:
                self.high_watermark = self.log_end_offset

    def append_as_follower(self, data: bytes) -> int:
        """Append a leader's whole batches as they are (``follower_append``); returns the new log end offset."""
        return append_as_follower(self, data)

    def set_high_watermark(self, offset: int) -> int:
        """Move the high watermark to ``offset`` clamped to [log start, log end]; returns where it is."""
        with self.lock:
            self.high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
            return self.high_watermark

    def maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now: int,
                   first_offset: int | None = None) -> LogSegment:
        """The segment a write of batches with these facts goes to: the active one, or a new one
        starting at the log end (or at ``first_offset``, past it) where ``should_roll`` says so."""
        segment = self.active_segment
        params = RollParams(self.config.segment_ms, self.config.segment_bytes, max_timestamp, last_offset, size, now)
        if segment.should_roll(params):
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment to appends and start a new one at the LEO."""
        with self.lock, self.failures.guard(self.log_dir, f"roll of {self.topic_partition}"):
            self._check_open()
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            segment = self.local.roll(new_offset)
            if segment is None:
                return self.active_segment  # an empty active segment already starts there
            self.producer_state.take_snapshot(new_offset)
            return segment

    # -- read -------------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int, *, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True, zero_copy: bool = False) -> FetchInfo:
        """Batches from the one containing ``start_offset``, up to ``max_bytes`` (batch granular).
        ``zero_copy``: they are a region of the segment file, which the caller closes once sent.

        A segment picked up by this read may be swapped out by the cleaner or deleted by
        retention while it reads; its files can then vanish under it. The read then starts
        again on the current segments, once; a log closed meanwhile is an unknown partition.
        """
        try:
            info = self._read(start_offset, max_bytes, isolation, min_one_message, zero_copy, blocking=True)
        except (OSError, ValueError):
            if self.closed:
                raise UnknownTopicOrPartitionError(f"{self.topic_partition}: the log was closed during the read") \
                    from None
            info = self._read(start_offset, max_bytes, isolation, min_one_message, zero_copy, blocking=True)
        assert info is not None
        return info

    def try_read(self, start_offset: int, max_bytes: int, *,
                 isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, min_one_message: bool = True,
                 zero_copy: bool = False) -> FetchInfo | None:
        """``read`` for a caller that must not block (an event loop), or None when it might: the log's
        lock is held, the read starts before the active segment (older data may have left the page
        cache), or a read_committed read finds the transactions not yet scanned. The tail a consumer
        keeps up with is in the page cache: a hop to a thread and back would cost it more than the
        read. A segment that vanishes under the read (retention, the cleaner) is also left to
        ``read``, which reads again."""
        try:
            return self._read(start_offset, max_bytes, isolation, min_one_message, zero_copy, blocking=False)
        except (OSError, ValueError):
            return None

    def _read(self, start_offset: int, max_bytes: int, isolation: FetchIsolation, min_one_message: bool,
              zero_copy: bool, *, blocking: bool) -> FetchInfo | None:
        committed = isolation is FetchIsolation.TXN_COMMITTED
        while True:
            if committed:
                # a first scan runs unlocked
                transactions = self.transactions() if blocking else self.producer_state.transactions
                if transactions is None:
                    return None
            else:
                transactions = None
            if not self.lock.acquire(blocking=blocking):
                return None
            try:
                self._check_open()
                if transactions is not self.producer_state.transactions and committed:
                    continue   # truncated since: scan again
                leo, hw, start = self.log_end_offset, self.high_watermark, self.log_start_offset
                lso = self._last_stable_offset(transactions) if transactions is not None else -1
                max_offset = leo if isolation is FetchIsolation.LOG_END else hw if not committed else lso
                aborted = tuple(transactions.aborted_between(start_offset, lso)) if transactions is not None else None
                active = self.active_segment
                active_size = active.size
                break
            finally:
                self.lock.release()
        if not blocking and start_offset < active.base_offset and start_offset >= start:
            return None
        if start_offset < start or start_offset > leo:
            raise OffsetOutOfRangeError(
                f"{self.topic_partition}: offset {start_offset} is out of range; the log holds [{start}, {leo})"
            )
        if start_offset >= max_offset or max_bytes <= 0:
            return FetchInfo(start_offset, b"", hw, start, leo, last_stable_offset=lso, aborted_transactions=aborted)
        piece = self.local.read(start_offset, max_bytes, max_offset, active, active_size,
                                min_one_message=min_one_message, zero_copy=zero_copy)
        if piece is not None:
            return FetchInfo(start_offset, piece.data, hw, start, leo, piece.first_entry_incomplete, lso, aborted,
                             piece.region, piece.start_batch)
        return FetchInfo(start_offset, b"", hw, start, leo, last_stable_offset=lso, aborted_transactions=aborted)

    def read_records(self, start_offset: int, max_records: int | None = None, *,
                     isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Iterator[Record]:
        """Decoded records from ``start_offset`` to the high watermark, or as ``isolation`` says
        (for tools and loading, not the hot path: ``record_reads``)."""
        for record, _ in records_with_type(self, start_offset, max_records, isolation):
            yield record

    def read_records_with_type(self, start_offset: int, max_records: int | None = None, *,
                               isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
                               ) -> Iterator[tuple[Record, TimestampType]]:
        """Like ``read_records``, with each record's timestamp type (CreateTime or LogAppendTime)."""
        return records_with_type(self, start_offset, max_records, isolation)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets: the first offset whose timestamp is ≥ ``timestamp``, or a special time's answer
        (``timestamp_search``), from the segments as they are now."""
        with self.lock:
            start, leo, segments = self.log_start_offset, self.log_end_offset, self.segments
        return offset_for_timestamp(self.topic_partition, segments, start, leo, timestamp)

    # -- transactions: the last stable offset ------------------------------------------------
    def transactions(self) -> TransactionState:
        """The log's open and aborted transactions, scanned on first need (``LogProducers``)."""
        return self.producer_state.state(self._log_start_offset)

    def _log_start_offset(self) -> int:
        return self.log_start_offset

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers ``producer.id.expiration.ms`` has passed (none before the producers' scan)."""
        with self.lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    def _last_stable_offset(self, transactions: TransactionState) -> int:
        first_unstable = transactions.first_unstable_offset(self.high_watermark)
        if first_unstable is None:
            return self.high_watermark
        return max(self.log_start_offset, min(first_unstable, self.high_watermark))

    def last_stable_offset(self) -> int:
        """Kafka's LSO: below it nothing belongs to a transaction that may still abort (an open one, or
        one whose marker is not yet below the high watermark); never above the high watermark."""
        while True:
            transactions = self.transactions()
            with self.lock:
                if transactions is self.producer_state.transactions:
                    return self._last_stable_offset(transactions)

    # -- flush ------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset``), then move the recovery point."""
        with self.lock, self.failures.guard(self.log_dir, f"flush of {self.topic_partition}"):
            self.local.flush(self.log_end_offset if offset is None else offset)

    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    # -- truncation and start offset -------------------------------------------------------
    def truncate_to(self, target: int) -> bool:
        """Remove everything at and above ``target``. Returns False if there was nothing to remove."""
        with self.lock, self.failures.guard(self.log_dir, f"truncation of {self.topic_partition}"):
            self._check_open()
            if target < 0:
                raise OffsetOutOfRangeError(f"{self.topic_partition}: cannot truncate to negative offset {target}")
            if target >= self.log_end_offset:
                self.epoch_cache.truncate_from_end(target)
                return False
            if target < self.local.first_base_offset:
                self.truncate_fully_and_start_at(target)
                return True
            self.producer_state.forget()
            # The batch holding the target goes whole, so the log may now end below the target:
            # every watermark is clamped to the real end, not to the target (Kafka clamps the
            # start offset to the target, which can leave it past the end).
            self.local.truncate_to(target)   # the segments it removed all start above the new end
            end = self.log_end_offset
            self.epoch_cache.truncate_from_end(end)
            self.producer_state.delete_snapshots(lambda offset: offset > end, durably=True)
            self.log_start_offset = min(self.log_start_offset, end)
            self.high_watermark = min(self.high_watermark, end)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self.lock, self.failures.guard(self.log_dir, f"truncation of {self.topic_partition}"):
            self._check_open()
            self.producer_state.forget()
            self.local.start_at(offset)
            self.epoch_cache.clear()
            self.producer_state.delete_snapshots(lambda _: True, durably=True)
            self.log_start_offset = offset
            self.high_watermark = offset

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: move the log start offset forward (never past the high watermark)."""
        with self.lock:
            self._check_open()
            if new_start > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.topic_partition}: cannot move the log start offset to {new_start}, past the high "
                    f"watermark {self.high_watermark}"
                )
            if new_start <= self.log_start_offset:
                return False
            self.log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
            self.producer_state.forget_below(new_start)
            return True

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap a ``.cleaned`` segment in for the segments it replaces, crash-safely (``LocalLog.replace_segments``,
        Kafka's ``replaceSegments``); the replaced segments' producer snapshots go with them, as in Kafka,
        durably: the swap's own directory fsync comes before their deletion."""
        with self.lock, self.failures.guard(self.log_dir, f"segment swap of {self.topic_partition}"):
            self._check_open()
            self.producer_state.delete_snapshots(self.local.replace_segments(new, old).__contains__, durably=True)

    def advance_log_start_offset(self, offset: int) -> None:
        """After segments went: the start moves up to ``offset``, never past the high watermark."""
        with self.lock:
            new_start = min(offset, self.high_watermark)
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start
                self.epoch_cache.truncate_from_start(new_start)
                self.producer_state.forget_below(new_start)

    def remove_segments(self, segments: list[LogSegment]) -> None:
        """Take segments out of the log and rename their files ``.deleted`` (removed after a delay)."""
        with self.lock, self.failures.guard(self.log_dir, f"segment deletion in {self.topic_partition}"):
            # A snapshot goes with the segment starting at its offset (Kafka's deleteProducerSnapshots).
            self.producer_state.delete_snapshots(self.local.remove_segments(segments).__contains__)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Physically remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        now = self.clock() if now_ms is None else now_ms
        with self.lock:
            due = self.local.expired_deletions(now)
        if due:
            with self.failures.guard(self.log_dir, f"file deletion in {self.topic_partition}"):
                for segment in due:
                    segment.delete_files()
        return len(due)

    # -- lifecycle --------------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        with self.lock:
            self.local.config = config

    def _check_open(self) -> None:
        self.local.check_open()

    @property
    def offline(self) -> bool:
        return self.local.offline

    def flush_for_shutdown(self) -> None:
        """fsync the ``.log`` files past the recovery point, even in an offline directory.

        At shutdown the acknowledged records still in the page cache are worth one more try: an
        fsync writes nothing new, so it does not break the rule that an offline directory is not
        written to. Indexes are left alone; recovery rebuilds them. OSError is the caller's.
        """
        with self.lock:
            self.local.flush_for_shutdown()

    def close(self) -> None:
        """Close every segment; in an offline directory only release the descriptors (no trims).

        Every descriptor is released even when a trim fails; the first error is raised after.
        """
        with self.lock:
            if self.closed:
                return
            offline = self.offline
            failed: Exception | None = None
            if not offline:
                try:
                    self.producer_state.take_snapshot(self.log_end_offset)   # Kafka's snapshot at shutdown
                except Exception as error:  # noqa: BLE001 - raised once every segment is closed
                    failed = error
            self.local.close(offline=offline, failed=failed)

    def rename_dir(self, new_dir: Path) -> None:
        """Move the partition directory (deletion); the log must be closed first."""
        with self.lock, self.failures.guard(self.log_dir, f"deletion of {self.topic_partition}"):
            self.local.rename_dir(new_dir)
            self.epoch_cache.rebind(new_dir)
