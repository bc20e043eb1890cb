"""The cleaner's walk over a segment a chunk at a time, shared by its map and filter passes.

With the native kernel, a pass hands each chunk read from the file (``SCAN_CHUNK``) to one native
call that takes the run of plain batches at its start (v2, uncompressed, neither transactional
nor control, CRC matching) and says why it stopped. The batch it stopped at, if the Python path
must take it, is cut from the same chunk, so a segment that mixes plain and other batches is
still read once. A batch larger than a chunk, or one whose header the walk cannot trust, comes
from the file's own batch walk, which reads it whole or names what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from stratalog.common.errors import CorruptRecordError
from stratalog.records import LOG_OVERHEAD, BatchInfo, peek_batch
from stratalog.storage.file_records import SCAN_CHUNK, FileRecords

# Why a native chunk call stopped (``OffsetMap.map_batches``, ``OffsetMap.filter_batches``).
CHUNK_DONE = 0   # the next batch is not whole in the chunk, or the chunk is done: read on
TO_PYTHON = 1    # the next batch is for the Python path
MAP_FULL = 2     # the offset map filled up: the pass ends here
AT_END = 3       # the next batch starts at or after the pass's end offset

# (chunk, position in it) -> (bytes consumed, why it stopped)
NativeStep = Callable[[bytes, int], tuple[int, int]]


def python_batches(records: FileRecords, position: int, native_step: NativeStep
                   ) -> Iterator[tuple[BatchInfo, bytes]]:
    """The batches from ``position`` that ``native_step`` leaves to the Python path, in file order;
    the walk ends at the end of the file or when the step says ``MAP_FULL`` or ``AT_END``."""
    limit = records.size
    source = str(records.path)
    while position < limit:
        chunk = records.read(position, min(SCAN_CHUNK, limit - position))
        relative = 0
        while True:
            consumed, stop = native_step(chunk, relative)
            relative += consumed
            position += consumed
            if stop in (MAP_FULL, AT_END):
                return
            found = _whole_batch(chunk, relative, position, source) if stop == TO_PYTHON else None
            if found is None:
                break
            yield found
            relative += found[0].size
            position += found[0].size
        if relative == 0:   # too large for a chunk, torn, or damaged: the file's walk reads or names it
            one = next(iter(records.batches_with_data(position)), None)
            if one is None:
                return   # a torn tail: the end of the batches, as for every reader
            yield one
            position += one[0].size


def _whole_batch(chunk: bytes, relative: int, position: int, source: str) -> tuple[BatchInfo, bytes] | None:
    """The batch at ``chunk[relative:]`` (file ``position``) when it is all there and its header
    parses; else None, for the file's walk."""
    if len(chunk) - relative < LOG_OVERHEAD:
        return None
    size = int.from_bytes(chunk[relative + 8 : relative + 12], "big", signed=True) + LOG_OVERHEAD
    if size <= LOG_OVERHEAD or relative + size > len(chunk):
        return None
    data = chunk[relative : relative + size]
    try:
        info = peek_batch(data, 0, source=source, at=position)
    except CorruptRecordError:
        return None
    return None if info is None or info.size != size else (info, data)
