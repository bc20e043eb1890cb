"""``read_committed`` for direct reads: which data batches belong to aborted transactions.

Kafka serves read_committed consumers the aborted-transaction list from its
``.txnindex`` files; the engine writes none (it has no transaction
coordinator: transactional data only comes from logs Kafka wrote). So, as the
engine's cleaner does, the aborted transactions are found by one scan of the
partition - only if a read meets a transactional batch at all - and the
cleaner's ``TransactionTracker`` then answers batch by batch, in offset order.
"""

from __future__ import annotations

from collections.abc import Callable

from stratalog.records.transactions import AbortedTransaction, TransactionTracker, control_type
from stratalog.records import BatchHeader


class AbortedFilter:
    """Fed every batch of a read in offset order; says which data batches to drop.

    The scan runs at the first transactional batch. Transactions whose marker
    lies before that batch are left out: their markers were not fed to the
    tracker, and a later transaction of the same producer must not inherit
    their "aborted".
    """

    def __init__(self, scan: Callable[[], list[AbortedTransaction]]) -> None:
        self._scan = scan
        self._tracker: TransactionTracker | None = None

    def _ensure(self, offset: int) -> TransactionTracker:
        if self._tracker is None:
            self._tracker = TransactionTracker([t for t in self._scan() if t.last_offset >= offset])
        return self._tracker

    def is_aborted(self, header: BatchHeader) -> bool:
        if self._tracker is None and not header.is_transactional:
            return False
        return self._ensure(header.base_offset).on_data_batch(header)

    def on_control(self, header: BatchHeader, data: bytes) -> None:
        if self._tracker is None and not header.is_transactional:
            return
        self._ensure(header.base_offset).on_control_batch(header, control_type(data, header))
