"""A log read as decoded records, for tools and loading (``stratalog consume``, the group
coordinator's load of its offsets topic): ``Log.read`` walked a fetch at a time, every batch decoded.
Not the hot path, which hands on raw batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from stratalog.records import BatchInfo, Record, TimestampType, decode_any, parse_header, parse_legacy_entry
from stratalog.records.info import split_batches
from stratalog.storage.isolation import FetchIsolation

if TYPE_CHECKING:
    from stratalog.storage.log import Log

READ_BYTES = 1 << 20   # a fetch's bound while walking


def records_with_type(log: Log, start_offset: int, max_records: int | None,
                      isolation: FetchIsolation) -> Iterator[tuple[Record, TimestampType]]:
    """Each record from ``start_offset`` up to the bound ``isolation`` sets, with its timestamp type
    (CreateTime or LogAppendTime); at most ``max_records`` of them when given."""
    offset = start_offset
    remaining = max_records
    while remaining is None or remaining > 0:
        fetch = log.read(offset, READ_BYTES, isolation=isolation)
        if not fetch.data:
            return
        before = offset
        for info, batch in split_batches(fetch.data):
            timestamp_type, records = _decode_with_type(info, batch, str(log.dir))
            for record in records:
                if record.offset < offset:
                    continue
                yield record, timestamp_type
                offset = record.offset + 1
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            # A batch emptied by compaction still moves the position past its offsets.
            offset = max(offset, info.last_offset + 1)
        if offset == before:
            return


def _decode_with_type(info: BatchInfo, batch: bytes, source: str) -> tuple[TimestampType, list[Record]]:
    if info.magic >= 2:
        timestamp_type = parse_header(batch).timestamp_type
    else:
        timestamp_type = parse_legacy_entry(batch, verify_crc=False).timestamp_type
    return timestamp_type, decode_any(batch, 0, source=source)[1]
