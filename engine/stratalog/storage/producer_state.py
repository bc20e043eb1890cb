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

The log builds this state by a scan of its batches on first need and keeps it up to date; Kafka
also writes it to ``.snapshot`` files, which the engine does not yet.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

from stratalog.common.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from stratalog.records import MAGIC_OFFSET

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
        if entry.batches and not in_sequence(entry.batches[-1].last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"{where}: producer {producer_id} epoch {epoch} sent sequence {first_seq}, but its last batch "
                f"here ended at {entry.batches[-1].last_seq}")
        return None

    def on_batch(self, producer_id: int, epoch: int, first_seq: int, last_offset_delta: int, first_offset: int
                 ) -> None:
        """Take a batch written at ``first_offset`` (ignored without a producer id or a sequence)."""
        if producer_id < 0 or first_seq < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return   # a fenced epoch's batch (it can reach a follower's log before the newer one did)
        entry.batches.append(BatchMetadata(first_seq, last_sequence(first_seq, last_offset_delta), first_offset,
                                           first_offset + last_offset_delta))


_PRODUCER_FIELDS = struct.Struct(">qhi")   # producer id, producer epoch, base sequence: at byte 43 of a v2 batch
_BASE_OFFSET = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")   # at byte 23


def feed_batch(states: ProducerStates, data: bytes | bytearray) -> None:
    """``on_batch`` from a whole batch's bytes as the log holds them (v0/v1 batches carry no producer)."""
    if len(data) < 61 or data[MAGIC_OFFSET] < 2:
        return
    producer_id, epoch, first_seq = _PRODUCER_FIELDS.unpack_from(data, 43)
    if producer_id < 0 or first_seq < 0:
        return
    states.on_batch(producer_id, epoch, first_seq, _LAST_OFFSET_DELTA.unpack_from(data, 23)[0],
                    _BASE_OFFSET.unpack_from(data, 0)[0])
