"""Which emptied batches must stay: the last batch of every producer Kafka would still track.

Kafka's cleaner keeps the header of an active producer's last batch even when
compaction removes all of its records (``RETAIN_EMPTY``), so that the
producer's epoch and sequence survive a reload and its next idempotent write is
not refused as out of sequence. Kafka reads that from its producer state; the
engine's (``Log``'s) is built only on first need, so the same facts come from one scan of the batch headers,
done only when a pass would empty a batch that carries a producer id. A
producer counts as active until ``producer.id.expiration.ms`` (the engine's setting;
Kafka's default, one day) after its last batch's timestamp.
"""

from __future__ import annotations

from stratalog.records.batch_header import ATTRIBUTES_OFFSET, CONTROL_BIT
from stratalog.storage.log import Log

PRODUCER_ID_EXPIRATION_MS = 86_400_000
_PRODUCER_ID = slice(43, 51)


def last_batches_of_active_producers(log: Log, now_ms: int,
                                     expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> set[int]:
    """Last offsets of the batches to retain even when emptied (from the batches' headers alone)."""
    last_data: dict[int, int] = {}
    last_marker: dict[int, int] = {}
    last_timestamp: dict[int, int] = {}
    for segment in log.segments:
        for info, data in segment.log.batch_headers(0):
            if info.magic < 2:
                continue
            producer_id = int.from_bytes(data[_PRODUCER_ID], "big", signed=True)
            if producer_id < 0:
                continue
            is_control = bool(data[ATTRIBUTES_OFFSET + 1] & CONTROL_BIT)
            (last_marker if is_control else last_data)[producer_id] = info.last_offset
            last_timestamp[producer_id] = max(last_timestamp.get(producer_id, -1), info.max_timestamp)
    keep = set()
    for producer_id, timestamp in last_timestamp.items():
        if now_ms - timestamp >= expiration_ms:
            continue
        offset = last_data.get(producer_id, last_marker.get(producer_id))
        if offset is not None:
            keep.add(offset)
    return keep
