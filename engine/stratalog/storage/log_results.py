"""What a partition's log answers: an append's facts, a read's batches and marks, a prepared append.

Plain values, apart from ``Log`` so that the broker layer can name them without the log's code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from stratalog.common.config import LogConfig
from stratalog.records import BatchInfo
from stratalog.records.transactions import AbortedTransaction
from stratalog.storage.file_region import FileRegion
from stratalog.storage.validation import ValidatedBatch

if TYPE_CHECKING:
    from stratalog.storage.log import Log


class AppendInfo(NamedTuple):
    """What an append did (a tuple, made for every append: a frozen dataclass costs a microsecond more)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    size: int
    log_start_offset: int


@dataclass(slots=True)   # not frozen: a frozen dataclass sets each of its ten fields through object.__setattr__
class FetchInfo:
    """Raw batches from ``position`` of one segment; may start below the requested offset."""

    requested_offset: int
    data: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    first_entry_incomplete: bool = False
    # read_committed reads only (Kafka: -1 and null otherwise): where the read stopped, and the
    # aborted transactions its range meets, which the reader skips.
    last_stable_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] | None = None
    region: FileRegion | None = None   # a zero-copy read's batches, left in the file (``data`` is then empty)
    start_batch: BatchInfo | None = None   # the header of the batch the read starts with (``SegmentSlice``)

    @property
    def size(self) -> int:
        return self.region.size if self.region is not None else len(self.data)

    def without_region(self) -> FetchInfo:
        """This read's facts, its region handed on (``dataclasses.replace`` costs a fetch more)."""
        return FetchInfo(self.requested_offset, self.data, self.high_watermark, self.log_start_offset,
                         self.log_end_offset, self.first_entry_incomplete, self.last_stable_offset,
                         self.aborted_transactions, None, self.start_batch)


class PreparedAppend(NamedTuple):
    """Batches validated against one config of one log, ready for ``Log.append_prepared``."""

    log: Log
    config: LogConfig
    now_ms: int
    batches: tuple[bytes | bytearray, ...]  # as sent, should they need validating again
    validated: tuple[ValidatedBatch, ...]
