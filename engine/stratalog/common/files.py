"""The two file primitives every crash-safe write is built on, as Kafka's ``Utils`` has them.

A rename is durable only once its directory is fsynced, and a file that readers must see whole is
written beside its target and renamed over it. Checkpoints, properties files, plan files and the
segment suffix renames all go through these two functions.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """tmp, fsync, rename, fsync dir: a reader sees the old file or the new one, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A full or failing disk must not leave a stray .tmp behind (the old file is intact).
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)
