"""Walking a file's batches by their headers, through positional reads.

One walk for a whole segment (``FileRecords``) and for a range of one about to be sent
(``FileRegion``): large reads while batches are small, only the next header after a large one
is stepped over, and Kafka's ``FileLogInputStream`` rules for the end (a batch declared past the
limit is a torn tail: the walk ends there, no error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from stratalog.common.errors import CorruptRecordError
from stratalog.records import LOG_OVERHEAD, MAGIC_OFFSET, BatchInfo, peek_batch

MIN_HEADER = MAGIC_OFFSET + 1  # offset, size, leader epoch, magic: enough to know a batch's size and format
HEADER_SCAN_CHUNK = 1 << 16    # what a header scan reads at a time: several small batches, or one large one's start
HEADER_READ_AHEAD = 61         # a v2 batch's header, the most of any format a header scan needs

Read = Callable[[int, int], bytes]   # (position, size) -> the bytes there


def scan_batches(read: Read, start: int, limit: int, chunk: int, *, whole: bool, source: str
                 ) -> Iterator[tuple[BatchInfo, tuple[bytes, int]]]:
    """Each batch from ``start`` below ``limit`` (file positions), and where it starts in a buffer
    holding it whole (``whole``) or holding at least its header (a large batch is then stepped
    over, not read). Raises ``CorruptRecordError`` with the file position of a header that
    cannot be a batch."""
    position = start
    buffer = b""
    buffer_start = position
    ahead = MIN_HEADER if whole else HEADER_READ_AHEAD
    step = chunk   # a header scan that just stepped over a large batch reads the next header alone
    while position < limit:
        relative = position - buffer_start
        if len(buffer) - relative < ahead:
            buffer = read(position, min(step, limit - position))
            buffer_start, relative = position, 0
            if len(buffer) < MIN_HEADER:
                return
        batch_size = int.from_bytes(buffer[relative + 8 : relative + 12], "big", signed=True) + LOG_OVERHEAD
        if batch_size > LOG_OVERHEAD and position + batch_size > limit:
            # Declared past the end: like Kafka's FileLogInputStream, the end of the batches
            # (a torn tail); recovery truncates it because it is not valid bytes.
            return
        if whole and batch_size > LOG_OVERHEAD and len(buffer) - relative < batch_size:
            buffer = read(position, max(chunk, batch_size))
            buffer_start, relative = position, 0
        try:
            info = peek_batch(buffer, relative, source=source, at=position, header_only=not whole)
        except CorruptRecordError as error:
            # Re-anchor the buffer-relative position to the file.
            raise CorruptRecordError(position + error.position - relative, error.reason, source=source) from None
        if info is None:
            return
        yield info, (buffer, relative)
        position += info.size
        if not whole:
            step = HEADER_READ_AHEAD if info.size > chunk // 8 else chunk
