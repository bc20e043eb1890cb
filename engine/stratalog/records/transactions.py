"""Aborted transactions from the batches alone, and which transactional batches may go.

Kafka learns of aborted transactions from its ``.txnindex`` files. The engine
writes no transaction index (it has no transaction coordinator; transactional
data only arrives in logs written by Kafka or copied byte for byte), so the
aborted transactions are found by one header scan of a partition's batches
(``scan_aborted``), done only when a reader meets a transactional batch at all.
The cleaner and the Spark reader (``read_committed``) then follow Kafka's rules
with a ``TransactionTracker`` (Kafka's ``CleanedTransactionMetadata``):

* a data batch of an aborted transaction is dropped;
* an ABORT marker is discardable once no data of its transaction was seen in
  this pass; a COMMIT marker likewise; a discardable marker first gets a delete
  horizon and is removed once ``delete.retention.ms`` has passed it;
* other control records (KRaft's) are never discarded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stratalog.records import MAGIC_OFFSET, BatchHeader, ControlRecordType, decode_records, parse_control_key, parse_header


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
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTransaction] = []
    for data in raw_batches:
        if data[MAGIC_OFFSET] < 2:   # v0/v1 batches have no transactions
            continue
        header = parse_header(data)
        if not header.is_transactional:
            continue
        if not header.is_control:
            ongoing.setdefault(header.producer_id, header.base_offset)
            continue
        first = ongoing.pop(header.producer_id, None)
        if control_type(data, header) == ControlRecordType.ABORT and first is not None:
            aborted.append(AbortedTransaction(header.producer_id, first, header.last_offset))
    aborted.sort(key=lambda t: t.first_offset)
    return aborted


def control_type(data: bytes, header: BatchHeader) -> ControlRecordType | None:
    records = decode_records(data)
    if not records or records[0].key is None:
        return None
    return parse_control_key(records[0].key)


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
