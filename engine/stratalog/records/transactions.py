"""Transactions from the batches alone: which are open, which aborted, which batches may go.

Kafka learns of aborted transactions from its ``.txnindex`` files and of open ones from its
producer state. The engine writes no ``.txnindex`` and reads no producer snapshot (it has no
transaction coordinator, so its producers may not write transactional batches; such data only
arrives in logs written by Kafka or copied byte for byte from one), so both are found by a
header scan of a partition's batches: a log
keeps a ``TransactionState`` for read_committed readers and its last stable offset, and
``scan_aborted`` serves one pass over some batches. The cleaner and the Spark reader
(``read_committed``) then follow Kafka's rules with a ``TransactionTracker`` (Kafka's
``CleanedTransactionMetadata``):

* a data batch of an aborted transaction is dropped;
* an ABORT marker is discardable once no data of its transaction was seen in
  this pass; a COMMIT marker likewise; a discardable marker first gets a delete
  horizon and is removed once ``delete.retention.ms`` has passed it;
* other control records (KRaft's) are never discarded.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from stratalog.records import (MAGIC_OFFSET, BatchHeader, ControlRecordType, decode_records, parse_control_key,
                               parse_end_txn_marker, parse_header)
from stratalog.records.batch_header import ATTRIBUTES_OFFSET, COMPRESSION_MASK, TRANSACTIONAL_BIT, V2_HEADER_SIZE
from stratalog.records.varint import VARLONG_MAX_BYTES, decode_varint


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


def scan_aborted(raw_batches: Iterable[bytes]) -> list[AbortedTransaction]:
    """Aborted transactions from a partition's batches in offset order, by a header scan.

    Shared by the cleaner (over a log's segments, ``stratalog.storage.transactions``) and the
    Spark reader (over fetched bytes).
    """
    state = TransactionState()
    for data in raw_batches:
        state.on_batch(data)
    return state.aborted_between(0, None)


class TransactionState:
    """The transactions of one partition's log as its batches tell them, in offset order.

    The transactional half of Kafka's ``ProducerStateManager`` plus its ``.txnindex``: each
    producer's open transaction (from its first data batch), transactions whose marker the
    high watermark has not passed yet (Kafka's unreplicated transactions: still unstable),
    and the aborted ones, for read_committed readers to skip. Fed raw batches; no I/O.
    """

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}                # producer id -> first offset of its open transaction
        self._ended: list[tuple[int, int]] = []          # (first offset, marker offset), marker not yet below the HW
        self._aborted: list[AbortedTransaction] = []     # by marker offset, so also by first offset per producer

    def on_batch(self, data: bytes | bytearray) -> None:
        """Take one whole batch appended at the log's end (only v2 transactional ones matter)."""
        if data[MAGIC_OFFSET] < 2 or not data[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT:
            return
        header = parse_header(data)
        if not header.is_control:
            self.ongoing.setdefault(header.producer_id, header.base_offset)
            return
        marker = control_type(data, header)
        if marker not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            return
        # A marker with no data before it (the data cleaned away) still ends a transaction, as Kafka's
        # ``appendEndTxnMarker``: it starts and ends at the marker.
        first = self.ongoing.pop(header.producer_id, header.base_offset)
        self._ended.append((first, header.last_offset))
        if marker == ControlRecordType.ABORT:
            self._aborted.append(AbortedTransaction(header.producer_id, first, header.last_offset))

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed reader must not pass: an open transaction's start, or that
        of one whose marker is not yet committed (at or past ``high_watermark``); None if there is none."""
        self._ended = [t for t in self._ended if t[1] >= high_watermark]
        firsts = [*self.ongoing.values(), *(first for first, _ in self._ended)]
        return min(firsts) if firsts else None

    def aborted_between(self, start: int, end: int | None) -> list[AbortedTransaction]:
        """Aborted transactions a read of [start, end) meets (Kafka's ``collectAbortedTxns``), by first offset."""
        # By marker offset: those ended below ``start`` are skipped by bisection (a reader at the tail
        # looks only at the transactions aborted since).
        first = bisect.bisect_left(self._aborted, start, key=lambda t: t.last_offset)
        found = [t for t in self._aborted[first:] if end is None or t.first_offset < end]
        return sorted(found, key=lambda t: t.first_offset)

    def forget_below(self, log_start_offset: int) -> None:
        """Retention moved the log start: aborted transactions wholly below it are no reader's concern."""
        self._aborted = [t for t in self._aborted if t.last_offset >= log_start_offset]


def control_type(data: bytes | bytearray, header: BatchHeader) -> ControlRecordType | None:
    records = decode_records(data)
    if not records or records[0].key is None:
        return None
    return parse_control_key(records[0].key)


def read_marker(data: bytes | bytearray, *, source: str | None = None) -> tuple[ControlRecordType, int | None] | None:
    """The marker of a whole v2 control batch, as Kafka's ``EndTransactionMarker.deserialize`` reads it:
    its type and, for COMMIT or ABORT, its coordinator epoch; None for a batch without records.
    Raises ``CorruptRecordError`` at the byte where its records, its key or such a marker's value do
    not parse."""
    records = decode_records(data, source=source)
    if not records:
        return None
    key_at, value_at = _first_key_and_value_places(data)
    marker = parse_control_key(records[0].key, position=key_at, source=source)
    if marker not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return marker, None
    return marker, parse_end_txn_marker(records[0].value, position=value_at, source=source)


def check_marker(data: bytes | bytearray, header: BatchHeader, *, source: str) -> None:
    """``read_marker`` of a transactional control batch about to be written without the leader's checks
    (a follower's copy), as Kafka's follower reads it before its append (``ProducerAppendInfo``).

    That is what ``TransactionState.on_batch`` reads (the records, the key's type), and then what
    Kafka reads besides: a key that is there, and the value. A marker of an unknown type is let
    through, as ``on_batch`` ignores it. Stricter than Kafka for a transactional control batch
    without a producer id, whose marker Kafka does not read but ``on_batch`` does."""
    if header.is_control and header.is_transactional:
        read_marker(data, source=source)


def _first_key_and_value_places(data: bytes | bytearray) -> tuple[int, int]:
    """Where the first record's key and value begin in an uncompressed batch whose records have been
    read whole (so each varint here is sound); in a compressed one, where its records begin."""
    if data[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK:
        return V2_HEADER_SIZE, V2_HEADER_SIZE
    _, at = decode_varint(data, V2_HEADER_SIZE)   # the record's length
    _, at = decode_varint(data, at + 1, limit=VARLONG_MAX_BYTES)   # past its attributes: the timestamp delta
    _, at = decode_varint(data, at)                # the offset delta
    key_length, key_at = decode_varint(data, at)
    _, value_at = decode_varint(data, key_at + max(key_length, 0))
    return key_at, value_at


@dataclass
class _AbortedState:
    transaction: AbortedTransaction
    data_seen: bool = False


class TransactionTracker:
    """Per-pass state: fed every batch in offset order, answers drop/keep for transactional batches."""

    def __init__(self, aborted: list[AbortedTransaction]) -> None:
        self._aborted = aborted
        self._next = 0
        self._ongoing_aborted: dict[int, _AbortedState] = {}
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            transaction = self._aborted[self._next]
            self._ongoing_aborted[transaction.producer_id] = _AbortedState(transaction)
            self._next += 1

    def on_data_batch(self, header: BatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (drop it)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state.data_seen = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, marker: ControlRecordType | None) -> bool:
        """True when the marker is discardable (no data of its transaction is left in this pass)."""
        self._consume_up_to(header.last_offset)
        if marker == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(header.producer_id, None)
            return state is None or not state.data_seen
        if marker == ControlRecordType.COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False
