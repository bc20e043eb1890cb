"""A byte range of a segment file, to be sent later without reading it into memory.

This is the slice of Kafka's ``FileRecords`` that a fetch response carries to the socket, where
``transferTo`` sends it with ``sendfile``. The region keeps a descriptor of its own, duplicated
from the segment's while the read still holds the segment: the bytes stay readable when
retention deletes the segment, the cleaner swaps it out or its descriptor closes before the
response goes. ``FileRecords`` reads and writes only at explicit positions, so sharing the open
file's offset with the duplicate changes nothing for the segment.

A region knows batch boundaries only through their headers, walked as ``FileRecords`` walks
them (``batch_scan``): the headers in the range, never the records.
"""

from __future__ import annotations

import io
import os

from stratalog.records import BatchInfo
from stratalog.storage.batch_scan import HEADER_SCAN_CHUNK, scan_batches


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

    def close(self) -> None:
        self.file.close()

    def batches(self) -> list[BatchInfo]:
        """The whole batches from the region's start, positions relative to it; a batch running
        past the region's end is not one of them. Raises ``CorruptRecordError`` (with the file
        position) for a header that cannot be a batch."""
        fd = self.file.fileno()
        infos = [info for info, _ in scan_batches(lambda position, size: os.pread(fd, size, position),
                                                  self.position, self.position + self.size, HEADER_SCAN_CHUNK,
                                                  whole=False, source=self.source)]
        for info in infos:
            info.position -= self.position
        return infos
