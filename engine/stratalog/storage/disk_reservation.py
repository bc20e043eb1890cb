"""Disk blocks reserved ahead of a growing segment file, past its logical end.

Why: an append extends its segment into blocks the file system has not allocated yet, and ext4's
delayed allocation then reserves space and records an extent for the new blocks on every write
(about a seventh of an append's system time, measured with ``bench.compare``'s append workload).
Reserving a window ahead with ``fallocate(FALLOC_FL_KEEP_SIZE)`` allocates those blocks in one
call, as RocksDB preallocates its files. The file's size does not change, so nothing that reads
the file (recovery, Kafka's tools, fetches) sees the reservation. ``FileRecords`` drops it when the
segment is trimmed (roll, close) or truncated; a crash leaves at most one window past the active
segment's end, released at that segment's next trim (a roll or a close) or its deletion.

The window grows with the file, so a partition that holds little reserves little: at most the
bytes the segment already has, never more than ``MAX_WINDOW``. A reservation is an optimisation
only: where ``fallocate`` is missing or fails (another OS or file system, a full disk), nothing is
reserved and the write itself decides.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

BLOCK = 4096
MIN_WINDOW = 64 << 10
MAX_WINDOW = 8 << 20
_FALLOC_FL_KEEP_SIZE = 1


def window(size: int) -> int:
    """How far past a file of ``size`` bytes to reserve: its size, within [MIN_WINDOW, MAX_WINDOW]."""
    return MIN_WINDOW if size < MIN_WINDOW else MAX_WINDOW if size > MAX_WINDOW else size


def _load_fallocate() -> tuple[Callable[[int, int, int, int], int], Callable[[], int]] | None:
    """Linux's fallocate and the errno it sets, or None where there are none."""
    try:
        import ctypes   # (a Python built without it still runs, reserving nothing)
        libc = ctypes.CDLL(None, use_errno=True)   # the running process's symbols, the C library's among them
        # fallocate64 takes 64-bit offsets on every ABI (fallocate's off_t is 32 bits on some).
        function = getattr(libc, "fallocate64", None) or libc.fallocate
    except (ImportError, OSError, AttributeError):   # no ctypes, no symbols, or no Linux fallocate
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function, ctypes.get_errno


_FALLOCATE = _load_fallocate()


def reserve(fd: int, offset: int, length: int) -> int:
    """Allocate ``length`` bytes of blocks from ``offset`` without changing the file's size: 0, or
    the errno of why it was not done (``ENOSPC``: perhaps in part, as ext4 keeps what it allocated)."""
    if _FALLOCATE is None:
        return errno.ENOSYS
    if length <= 0:
        return 0
    fallocate, get_errno = _FALLOCATE
    return 0 if fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0 else get_errno()


def held_past_end(status: os.stat_result) -> bool:
    """Whether a file holds blocks past its end: more than one block beyond what its size needs
    (the slack lets a file system count a block of its own)."""
    return status.st_blocks * 512 > -(-status.st_size // BLOCK) * BLOCK + BLOCK
