"""Idempotent producers: each producer's epoch and its last five batches in one partition.

The idempotence half of Kafka's ``ProducerStateManager``/``ProducerAppendInfo``, pure (no I/O):
a leader append asks ``check`` whether a producer's batch is new, a retry of one of its last five
(answered with the offsets it got then, and not written again), or out of order; every batch
written, by a leader or a follower, is fed to ``on_batch``. Kafka's rules:

* a batch of an older epoch than the producer's is fenced (INVALID_PRODUCER_EPOCH);
* in the producer's epoch, the first sequence must follow the last (wrapping at 2^31 - 1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER, unless it repeats one of the last five batches (a duplicate);
* a newer epoch starts at sequence 0, unless the producer is unknown here: then any sequence
  is taken (KIP-360; its state may have gone with retention or a restart).

The log builds this state by a scan of its batches on first need and keeps it up to date, and
writes it to Kafka's ``.snapshot`` files (``snapshot_entries``; ``stratalog.storage.producer_snapshot``)
so that Kafka, opening the directory, knows the same producers. Transaction markers count too: they
carry the producer's epoch and its coordinator's, which the snapshots keep.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Container
from dataclasses import dataclass, field

from stratalog.common.errors import CorruptRecordError, InvalidProducerEpochError, OutOfOrderSequenceError
from stratalog.records import MAGIC_OFFSET
from stratalog.records.batch_header import ATTRIBUTES_OFFSET, CONTROL_BIT
from stratalog.records.transactions import read_marker
from stratalog.storage.producer_snapshot import ProducerSnapshotEntry

BATCHES_KEPT = 5   # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection)
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1        # the max timestamp of its last batch or marker
    coordinator_epoch: int = -1     # of its last transaction marker


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """The batch's last sequence: sequences wrap past 2^31 - 1 to 0."""
    return (first_seq + last_offset_delta) % (INT32_MAX + 1)


def in_sequence(last_seq: int, next_first_seq: int) -> bool:
    return next_first_seq == last_seq + 1 or (last_seq == INT32_MAX and next_first_seq == 0)


class ProducerStates:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, where: str
              ) -> BatchMetadata | None:
        """The earlier batch this one repeats (not to be written again), None for a new one in
        order; raises for a fenced epoch or a sequence out of order."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"{where}: producer {producer_id} wrote epoch {entry.epoch} already; this batch of epoch {epoch} "
                "comes from a fenced producer")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"{where}: producer {producer_id}'s new epoch {epoch} must start at sequence 0, not {first_seq}")
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if not entry.batches:
            # Known only by a transaction marker of this epoch: its first batch starts at 0 (Kafka's
            # checkSequence with no last sequence).
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"{where}: producer {producer_id} epoch {epoch} has written no batch here yet, so it must "
                    f"start at sequence 0, not {first_seq}")
            return None
        if not in_sequence(entry.batches[-1].last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"{where}: producer {producer_id} epoch {epoch} sent sequence {first_seq}, but its last batch "
                f"here ended at {entry.batches[-1].last_seq}")
        return None

    def on_batch(self, producer_id: int, epoch: int, first_seq: int, last_offset_delta: int, first_offset: int,
                 max_timestamp: int = -1) -> None:
        """Take a batch written at ``first_offset`` (ignored without a producer id or a sequence)."""
        if producer_id < 0 or first_seq < 0:
            return
        entry = self._entry(producer_id, epoch)
        if entry is None:
            return
        entry.batches.append(BatchMetadata(first_seq, last_sequence(first_seq, last_offset_delta), first_offset,
                                           first_offset + last_offset_delta))
        entry.last_timestamp = max_timestamp

    def on_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, max_timestamp: int) -> None:
        """Take a transaction's COMMIT or ABORT marker (Kafka's ``appendEndTxnMarker``)."""
        entry = self._entry(producer_id, epoch)
        if entry is not None:
            entry.coordinator_epoch = coordinator_epoch
            entry.last_timestamp = max_timestamp

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry | None:
        """The producer's entry for a write of ``epoch``: a new one for a newer epoch, None for a fenced one
        (a fenced epoch's write can reach a follower's log before the newer one did)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch > entry.epoch:
            # A new epoch forgets the batches, not the coordinator that fences stale markers (Kafka's
            # maybeUpdateProducerEpoch).
            entry = self.producers[producer_id] = ProducerEntry(epoch, coordinator_epoch=entry.coordinator_epoch)
        elif epoch < entry.epoch:
            return None
        return entry

    def remove_expired(self, now_ms: int, expiration_ms: int, open_transactions: Container[int]) -> list[int]:
        """Forget producers idle for ``expiration_ms`` (by their last batch's or marker's timestamp) with no
        transaction open, as Kafka's ``removeExpiredProducers``; returns their ids."""
        expired = [pid for pid, entry in self.producers.items()
                   if pid not in open_transactions and now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return expired

    def snapshot_entries(self, open_transactions: dict[int, int]) -> list[ProducerSnapshotEntry]:
        """Every producer as a ``.snapshot`` holds it: its last batch, and the first offset of its open
        transaction (``open_transactions``: producer id to that offset)."""
        out = []
        for producer_id, entry in self.producers.items():
            last = entry.batches[-1] if entry.batches else None
            out.append(ProducerSnapshotEntry(
                producer_id, entry.epoch,
                last.last_seq if last else -1, last.last_offset if last else -1,
                last.last_offset - last.first_offset if last else 0,
                entry.last_timestamp, entry.coordinator_epoch, open_transactions.get(producer_id, -1)))
        return out


_PRODUCER_FIELDS = struct.Struct(">qhi")   # producer id, producer epoch, base sequence: at byte 43 of a v2 batch
_BASE_OFFSET = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")   # at byte 23
_MAX_TIMESTAMP = struct.Struct(">q")       # at byte 35


def feed_batch(states: ProducerStates, data: bytes | bytearray) -> None:
    """``on_batch`` (or ``on_marker``) from a whole batch's bytes as the log holds them (v0/v1 batches
    carry no producer)."""
    if len(data) < 61 or data[MAGIC_OFFSET] < 2:
        return
    producer_id, epoch, first_seq = _PRODUCER_FIELDS.unpack_from(data, 43)
    if producer_id < 0:
        return
    if data[ATTRIBUTES_OFFSET + 1] & CONTROL_BIT:
        _feed_marker(states, producer_id, epoch, data)
        return
    if first_seq < 0:
        return
    states.on_batch(producer_id, epoch, first_seq, _LAST_OFFSET_DELTA.unpack_from(data, 23)[0],
                    _BASE_OFFSET.unpack_from(data, 0)[0], _MAX_TIMESTAMP.unpack_from(data, 35)[0])


def _feed_marker(states: ProducerStates, producer_id: int, epoch: int, data: bytes | bytearray) -> None:
    try:
        marker = read_marker(data)
    except CorruptRecordError:
        return   # the batch is in the log already; a marker Kafka could not read changes no producer
    if marker is None or marker[1] is None:
        return   # no records, or not a transaction's end
    states.on_marker(producer_id, epoch, marker[1], _MAX_TIMESTAMP.unpack_from(data, 35)[0])
