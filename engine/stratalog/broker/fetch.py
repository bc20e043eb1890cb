"""Reading a partition for a fetch: whole batches up to the high watermark, retried past races.

Kafka's fetch returns whole batches, the first of which may start below the requested
offset. A read can race retention or the cleaner replacing the segment it picked (its
files go ``file.delete.delay.ms`` later); the next read sees the current segments, so a
failed read is tried again a few times before it is reported.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from stratalog.common.errors import CorruptRecordError, StoredBatchError, StratalogError, UnknownTopicOrPartitionError
from stratalog.common.names import TopicPartition
from stratalog.records import BatchInfo, iter_batch_infos
from stratalog.records.transactions import AbortedTransaction
from stratalog.storage.file_region import FileRegion as FileRegion   # the transports send it
from stratalog.storage.isolation import FetchIsolation as FetchIsolation   # the transports name it too
from stratalog.storage.log import Log
from stratalog.storage.log_results import FetchInfo

READ_ATTEMPTS = 3


@dataclass(slots=True)   # not frozen: built for every fetch, and a frozen one sets each field through object.__setattr__
class FetchedBatches:
    topic_partition: TopicPartition
    source: str  # where the bytes came from, for error messages
    info: FetchInfo
    data: bytes  # whole batches only
    batches: list[BatchInfo]
    read_seconds: float = 0.0  # time spent reading, waits excluded
    region: FileRegion | None = None  # a zero-copy read's whole batches, left in the file (``data`` is then empty)

    @property
    def size(self) -> int:
        return self.region.size if self.region is not None else len(self.data)

    def release(self) -> None:
        """Close the region's descriptor: for a read not sent after all (the transport closes one it sent)."""
        if self.region is not None:
            self.region.close()

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.info.requested_offset

    @property
    def high_watermark(self) -> int:
        return self.info.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.info.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.info.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """-1 unless the read was read_committed."""
        return self.info.last_stable_offset

    @property
    def aborted_transactions(self) -> tuple[AbortedTransaction, ...] | None:
        """The aborted transactions a read_committed reader meets in these batches; None otherwise."""
        return self.info.aborted_transactions


def read_whole_batches(log: Log, offset: int, max_bytes: int,
                       isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, *,
                       min_one_message: bool = True, zero_copy: bool = False) -> FetchedBatches:
    """Batches from ``offset`` up to the high watermark, or the last stable offset for read_committed
    (blocking: run it off the event loop). ``zero_copy``: they stay in the segment file, a region
    that the transport sends from there (Kafka's ``FileRecords.slice``)."""
    started = time.perf_counter()
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            info = log.read(offset, max_bytes, isolation=isolation, min_one_message=min_one_message,
                            zero_copy=zero_copy)
            break
        except StratalogError:
            raise
        except (OSError, ValueError):
            if log.closed:  # deleted while we read: the topic is gone, not the server broken
                raise UnknownTopicOrPartitionError(f"{log.topic_partition} was deleted during the fetch") from None
            if attempt == READ_ATTEMPTS:
                raise
    return _whole_batches(log, info, started)


def try_read_whole_batches(log: Log, offset: int, max_bytes: int,
                           isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, *,
                           min_one_message: bool = True, zero_copy: bool = False) -> FetchedBatches | None:
    """``read_whole_batches`` on the event loop, or None when the read might block (``Log.try_read``)."""
    started = time.perf_counter()
    info = log.try_read(offset, max_bytes, isolation=isolation, min_one_message=min_one_message, zero_copy=zero_copy)
    return None if info is None else _whole_batches(log, info, started)


def _whole_batches(log: Log, info: FetchInfo, started: float) -> FetchedBatches:
    data, region = info.data, info.region
    try:
        batches = _batches_read(info, str(log.dir))
    except CorruptRecordError as error:
        if region is not None:
            region.close()
        raise StoredBatchError(f"{log.topic_partition}: stored batch does not decode: {error}") from None
    end = batches[-1].position + batches[-1].size if batches else 0
    if info.aborted_transactions:
        # Only those the served batches meet (Kafka's upper bound is the end of the data read): none
        # when nothing is served.
        info = dataclasses.replace(info, aborted_transactions=tuple(
            t for t in info.aborted_transactions if batches and t.first_offset <= batches[-1].last_offset))
    # A read cut by maxBytes may end inside a batch; serve whole batches only.
    if region is not None:
        if not end:
            region.close()
        return FetchedBatches(log.topic_partition, str(log.dir), info.without_region(), b"", batches,
                              time.perf_counter() - started, region.narrowed(end) if end else None)
    return FetchedBatches(log.topic_partition, str(log.dir), info, data[:end] if end != len(data) else data,
                          batches, time.perf_counter() - started)


def _batches_read(info: FetchInfo, source: str) -> list[BatchInfo]:
    """The whole batches of a read, positions relative to its start. A read no longer than the batch
    it starts with (a consumer keeping up, a fetch size near the batch size) is that batch or
    nothing: its header, read to find it, says so without reading it again."""
    start, size = info.start_batch, info.size
    if start is not None and size <= start.size:
        return [BatchInfo(0, start.size, start.magic, start.base_offset, start.last_offset, start.max_timestamp,
                          start.records_count)] if size == start.size else []
    if info.region is not None:
        return info.region.batches()
    return list(iter_batch_infos(info.data, source=source))
