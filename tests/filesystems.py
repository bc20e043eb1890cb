"""Real small file systems for the failing-disk tests: mounted by the test, unmounted after.

* ``Tmpfs``: a tmpfs of a few MiB (or a few inodes), to fill up for real ``ENOSPC``.
* ``Ext4``: an ext4 image on a loop device mounted ``errors=remount-ro``; ``fail()`` makes ext4
  itself record an error (``/sys/fs/ext4/<dev>/trigger_fs_error``), so the kernel remounts it
  read-only under the open files, as it does when a disk goes bad.

Both need root (mount, losetup), which this project's machines and CI have: without it the tests
fail, saying so, rather than skip.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}\n"
                             "the failing-disk tests mount real file systems and need root")


class Tmpfs:
    def __init__(self, path: Path, *, size: str = "2m", inodes: int | None = None) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
        _run("mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path))
        self._fillers = 0

    def fill(self) -> Path:
        """Write a ballast file until the file system is full; returns it (delete it to make room)."""
        self._fillers += 1
        ballast = self.path / f"ballast-{self._fillers}"
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
        chunk = b"\0" * 4096
        try:
            while True:
                os.write(fd, chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        return ballast

    def use_up_inodes(self) -> None:
        """Create empty files until no inode is left."""
        n = 0
        try:
            while True:
                (self.path / f"inode-{n}").touch()
                n += 1
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise

    def grow(self, size: str) -> None:
        _run("mount", "-o", f"remount,size={size}", str(self.path))

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


class Ext4:
    def __init__(self, path: Path, image: Path, *, size_mb: int = 32) -> None:
        self.path = path
        self.image = image
        path.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as f:
            f.truncate(size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", str(image))
        self.mount()

    def mount(self) -> None:
        _run("mount", "-o", "loop,errors=remount-ro", str(self.image), str(self.path))
        source = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(self.path)], capture_output=True,
                                text=True, check=True).stdout.strip()
        self.device = Path(source).name

    def fail(self) -> None:
        """ext4 records an error and, as mounted, remounts itself read-only under the open files."""
        Path(f"/sys/fs/ext4/{self.device}/trigger_fs_error").write_text("stratalog failing-disk test\n")

    def read_only(self) -> bool:
        probe = self.path / ".probe"
        try:
            probe.touch()
        except OSError as error:
            return error.errno == errno.EROFS
        probe.unlink()
        return False

    def repair_and_remount(self) -> None:
        """Unmount, let e2fsck clear the recorded error, mount read-write again."""
        _run("umount", str(self.path))
        # e2fsck exits 1 when it fixed something (the error flag it is asked to clear).
        result = subprocess.run(["e2fsck", "-fy", str(self.image)], capture_output=True, text=True)
        assert result.returncode in (0, 1), result.stdout + result.stderr
        self.mount()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Tmpfs]:
    """A 2 MiB tmpfs at ``tmp_path/small``."""
    fs = Tmpfs(tmp_path / "small", size="2m")
    yield fs
    fs.unmount()


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Ext4]:
    """A 32 MiB ext4 (loop device, errors=remount-ro) at ``tmp_path/ext4``."""
    fs = Ext4(tmp_path / "ext4", tmp_path / "ext4.img")
    yield fs
    fs.unmount()
