"""A byte range of a segment file, to be sent later without reading it into memory.

This is the slice of Kafka's ``FileRecords`` that a fetch response carries to the socket, where
``transferTo`` sends it with ``sendfile``. The region keeps a descriptor of its own, duplicated
from the segment's while the read still holds the segment: the bytes stay readable when
retention deletes the segment, the cleaner swaps it out or its descriptor closes before the
response goes. ``FileRecords`` reads and writes only at explicit positions, so sharing the open
file's offset with the duplicate changes nothing for the segment.

A region knows batch boundaries only through their headers, as ``FileRecords`` does: ``batches``
reads the headers in the range (several small batches per read, a large one costing only its
header), never the records.
"""

from __future__ import annotations

import io
import os

from stratalog.common.errors import CorruptRecordError
from stratalog.records import BatchInfo, peek_batch

_HEADER_READ_AHEAD = 61          # a v2 batch's header, the most of any format
_HEADERS_CHUNK = 1 << 16         # one read for the headers of many small batches
_SMALL_BATCH = _HEADERS_CHUNK // 8   # after a batch this small, the next ones are likely small too


class FileRegion:
    """``size`` bytes from ``position`` of a file open on a descriptor this region owns."""

    __slots__ = ("file", "position", "size", "source")

    def __init__(self, file: io.FileIO, position: int, size: int, source: str) -> None:
        self.file = file
        self.position = position
        self.size = size
        self.source = source   # the segment's path, for error messages

    @classmethod
    def of(cls, fd: int, position: int, size: int, source: str) -> FileRegion:
        """A region of the file open on ``fd``, on a duplicate of it (the caller's stays its own)."""
        return cls(io.FileIO(os.dup(fd), "rb", closefd=True), position, size, source)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion({self.source}, position={self.position}, size={self.size})"

    def narrowed(self, size: int) -> FileRegion:
        """The first ``size`` bytes, on the same descriptor: this region is not to be used after."""
        return FileRegion(self.file, self.position, min(size, self.size), self.source)

    def read(self) -> bytes:
        """The bytes themselves, for a transport that cannot send from the file."""
        data = os.pread(self.file.fileno(), self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"{self.source}: {self.size} bytes at {self.position} were to be sent, the file "
                          f"holds {len(data)} of them now")
        return data

    def close(self) -> None:
        self.file.close()

    def batches(self) -> list[BatchInfo]:
        """The whole batches from the region's start, positions relative to it; a batch running
        past the region's end is not one of them. Raises ``CorruptRecordError`` (with the file
        position) for a header that cannot be a batch."""
        fd, start, end = self.file.fileno(), self.position, self.position + self.size
        infos: list[BatchInfo] = []
        position, buffer, buffer_start = start, b"", start
        while position < end:
            relative = position - buffer_start
            if len(buffer) - relative < _HEADER_READ_AHEAD and buffer_start + len(buffer) < end:
                small = not infos or infos[-1].size <= _SMALL_BATCH
                buffer = os.pread(fd, min(_HEADERS_CHUNK if small else _HEADER_READ_AHEAD, end - position),
                                  position)
                buffer_start, relative = position, 0
            try:
                info = peek_batch(buffer, relative, source=self.source, at=position - start, header_only=True)
            except CorruptRecordError as error:
                raise CorruptRecordError(position + error.position - relative, error.reason,
                                         source=self.source) from None
            if info is None or position + info.size > end:
                break
            infos.append(info)
            position += info.size
        return infos
