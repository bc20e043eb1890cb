"""A segment's ``.log`` file: append bytes, read slices, scan batch headers.

This is Kafka's ``FileRecords``: it knows byte positions and batch boundaries,
never records. Scans read the file in large chunks with ``pread`` and look only
at batch headers (``records.peek_batch``), so walking a segment costs one
sequential read and no record decoding. The one exception is a leader's append of a batch as
sent (``append_as_sent``): the native kernel checks the batch and writes it in the same call.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from stratalog.records import BatchInfo, native
from stratalog.storage import disk_reservation
from stratalog.storage.batch_scan import HEADER_READ_AHEAD, HEADER_SCAN_CHUNK, scan_batches
from stratalog.storage.file_region import FileRegion

SCAN_CHUNK = 1 << 20
# A reservation that failed for want of space may have allocated part of its range.
_OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)
# A v2 batch's first 16 bytes: base offset, batch length, partition leader epoch (none under the CRC).
_BATCH_PREFIX = struct.Struct(">qii")


class FileRecords:
    def __init__(self, path: Path, *, create: bool = False, preallocate_bytes: int = 0,
                 read_only: bool = False) -> None:
        self.path = path
        self._flags = os.O_RDONLY if read_only else os.O_RDWR
        self._fd: int | None = os.open(path, self._flags | (os.O_CREAT if create else 0), 0o644)
        # The logical end: this class's to change, everyone's to read (a plain attribute, since every
        # append reads it and a property is a call).
        self.size: int = 0 if create and preallocate_bytes else os.fstat(self._fd).st_size
        if create and preallocate_bytes:
            os.ftruncate(self._fd, preallocate_bytes)
        # Where the blocks this process reserved past the logical end stop (``disk_reservation``).
        self._reserved_end = self.size

    # -- basic I/O --------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, self._flags)
        return self._fd

    @contextlib.contextmanager
    def mapped(self) -> Iterator[bytes | mmap.mmap]:
        """The file's bytes up to its logical size, mapped read-only for one whole-file scan."""
        if self.size == 0:
            yield b""
            return
        with mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ) as mapping:
            yield mapping

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write at the end; returns the number of bytes written."""
        return self._write(b"", memoryview(data))

    def append_batch(self, data: bytes | bytearray, base_offset: int, leader_epoch: int) -> int:
        """Write one whole v2 batch at the end with its base offset and partition leader epoch set,
        without changing or copying ``data`` (a leader's append of a producer's bytes)."""
        prefix = _BATCH_PREFIX.pack(base_offset, len(data) - 12, leader_epoch)
        return self._write(prefix, memoryview(data)[_BATCH_PREFIX.size:])

    def append_as_sent(self, data: bytes, base_offset: int, leader_epoch: int,
                       rules: tuple[int, bool, int, int, int, int], now_ms: int, roll_after_timestamp: int,
                       max_last_offset: int, producer_id: int) -> tuple[int, int, int] | None:
        """``append_batch`` of a producer's batch that the native kernel accepts as sent, checked and
        written in one call: (last offset delta, max timestamp, record count), or None and nothing
        written (no kernel, or a batch it leaves to the reference path). The other arguments are
        ``stratalog_native.append_as_sent``'s (``LogSegment.try_append_as_sent``)."""
        kernel = native.kernel
        if kernel is None:
            return None
        size, length = self.size, len(data)
        if size + length > self._reserved_end:
            self._reserve(size + length)
        fd = self._fd   # (``fd`` reopens a closed descriptor: a call every append would pay)
        try:
            accepted: tuple[int, int, int] | None = kernel.append_as_sent(
                fd if fd is not None else self.fd, size, data, base_offset, leader_epoch, rules, now_ms,
                roll_after_timestamp, max_last_offset, producer_id)
        except OSError:
            self._cut_torn_write()
            raise
        if accepted is not None:
            self.size = size + length
        return accepted

    def _write(self, head: bytes, view: memoryview) -> int:
        position = self.size
        if position + len(head) + len(view) > self._reserved_end:
            self._reserve(position + len(head) + len(view))
        try:
            if head:   # one system call for both parts, as a rule; the loop below takes any remainder
                written = os.pwritev(self.fd, (head, view), position)
                position += written
                if written < len(head):
                    view = memoryview(head[written:] + view)
                else:
                    view = view[written - len(head):]
            while view:
                written = os.pwrite(self.fd, view, position)
                view = view[written:]
                position += written
        except OSError:
            self._cut_torn_write()
            raise
        appended = position - self.size
        self.size = position
        return appended

    def _reserve(self, end: int) -> None:
        """Blocks reserved up to ``end`` and a window past it. A failed reservation is not tried
        again before the file grows past that window: on a full disk, one call a window. What a
        failed one may have allocated (ext4 keeps part of a range it could not finish) is given
        back, for the write that follows and for other files."""
        target = max(end, self.size + disk_reservation.window(self.size))
        if disk_reservation.reserve(self.fd, self.size, target - self.size) in _OUT_OF_SPACE:
            with contextlib.suppress(OSError):
                if os.fstat(self.fd).st_size == self.size:   # not inside a file preallocate=true sized
                    os.ftruncate(self.fd, self.size)
        self._reserved_end = target

    def _cut_torn_write(self) -> None:
        """Leave no partial batch behind for a later append to follow (best effort: the truncation
        can fail too, and then the directory goes offline before anything else is acknowledged, and
        recovery cuts the torn tail at the next start)."""
        try:
            os.ftruncate(self.fd, self.size)
            self._reserved_end = self.size
        except OSError:
            pass

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        if end <= position:
            return b""
        return os.pread(self.fd, end - position, position)

    def region(self, position: int, size: int) -> FileRegion:
        """``size`` bytes from ``position`` (fewer past the logical end), to be sent from the file."""
        return FileRegion.of(self.fd, position, max(0, min(position + size, self.size) - position), str(self.path))

    def flush(self) -> None:
        os.fsync(self.fd)

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns how many bytes went."""
        if size > self.size:
            raise ValueError(f"{self.path}: cannot truncate to {size}, the file holds {self.size} bytes")
        removed = self.size - size
        os.ftruncate(self.fd, size)   # reserved blocks past ``size`` go too
        self.size = self._reserved_end = size
        return removed

    def trim(self) -> None:
        """Drop preallocated space and reserved blocks past the logical end (a truncation to the
        file's own size releases the blocks that ``fallocate`` kept past it)."""
        status = os.fstat(self.fd)
        # Blocks past the end that this process did not reserve were left by one that was killed.
        if (self._reserved_end > self.size or status.st_size != self.size
                or disk_reservation.held_past_end(status)):
            os.ftruncate(self.fd, self.size)
            # A truncation stamps the file's mtime, which retention and the cleaner read for segments
            # without timestamps: it stays the time of the last write, as Kafka leaves it.
            os.utime(self.fd, ns=(status.st_atime_ns, status.st_mtime_ns))
            self._reserved_end = self.size

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, new_path: Path) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def delete_file(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def mtime_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    # -- scanning ---------------------------------------------------------------------------
    def batches(self, start: int = 0, end: int | None = None, *, chunk: int = SCAN_CHUNK) -> Iterator[BatchInfo]:
        """Batch headers from ``start`` up to ``end`` (default: the logical size).

        Stops silently at a partial batch at the end (a torn write, as Kafka's
        ``FileLogInputStream``); raises ``CorruptRecordError`` for a header that
        cannot be a batch, with its file position.
        """
        for info, _ in self._scan(start, end, chunk):
            yield info

    def batches_with_data(self, start: int = 0, end: int | None = None) -> Iterator[tuple[BatchInfo, bytes]]:
        """Like ``batches`` but with each batch's bytes, for readers that check or copy them."""
        for info, (buffer, relative) in self._scan(start, end, SCAN_CHUNK):
            yield info, buffer[relative : relative + info.size]

    def batch_headers(self, start: int = 0, end: int | None = None, *, chunk: int = HEADER_SCAN_CHUNK
                      ) -> Iterator[tuple[BatchInfo, bytes]]:
        """Each batch with only its first bytes (a v2 batch's whole 61-byte header), for scans of
        producers and transaction flags: a large batch is stepped over, not read (``read`` fetches a
        batch whole when one needs it). Stops and raises as ``batches`` does. ``chunk``: how much
        to read at once while batches are small (a short scan wants less)."""
        for info, (buffer, relative) in self._scan(start, end, chunk, whole=False):
            yield info, buffer[relative : relative + min(info.size, HEADER_READ_AHEAD)]

    def _scan(self, start: int, end: int | None, chunk: int, *, whole: bool = True
              ) -> Iterator[tuple[BatchInfo, tuple[bytes, int]]]:
        limit = self.size if end is None else min(end, self.size)
        return scan_batches(self.read, start, limit, chunk, whole=whole, source=str(self.path))

    def batch_bytes(self, info: BatchInfo) -> bytes:
        return self.read(info.position, info.size)
