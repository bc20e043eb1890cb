"""The aborted transactions of a partition's log: one header scan of its segments.

The scan itself works on batches alone (``stratalog.records.transactions``); this is where a
log's segment files feed it.
"""

from __future__ import annotations

from stratalog.records.transactions import AbortedTransaction, scan_aborted
from stratalog.storage.log import Log


def scan_aborted_transactions(log: Log) -> list[AbortedTransaction]:
    return scan_aborted(data for segment in log.segments for _, data in segment.log.batches_with_data(0))
