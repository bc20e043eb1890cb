"""The ``.lock`` file that gives one process a data directory.

Kafka holds an exclusive ``FileChannel.tryLock`` on ``<dir>/.lock``; here it is
``flock``, which the kernel releases when the process dies (even by SIGKILL), so
a crashed engine never leaves a directory locked. The holder's pid is written
into the file so that the refusal can say who holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from stratalog.common.errors import LogDirLockedError
from stratalog.common.names import LOCK_FILE


class DirLock:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise LogDirLockedError(
                f"data directory {self.directory} is in use: {who} holds {self.path}; "
                "stop it, or point this command at its --server instead"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)  # the pid is informative only: a failed disk may refuse it
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
