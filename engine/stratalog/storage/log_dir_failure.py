"""Which log directories are offline, and why (Kafka's ``LogDirFailureChannel``).

An I/O error while writing a log directory (``ENOSPC``, ``EIO``, ``EROFS``, ...) can leave its
files in a state the engine no longer knows: part of a batch written, an index entry missing, a
rename half done. Kafka's answer, kept here, is to stop trusting the whole directory at once: it
goes offline, every partition in it answers ``KAFKA_STORAGE_ERROR`` to produce and fetch, nothing
more is written there, and the other directories keep serving. Only a restart brings it back,
because only recovery at load can vouch for its files again.

Every write path of the storage layer runs inside ``guard``, which turns an ``OSError`` into an
offline directory and a ``KafkaStorageError`` (the append's one-call path does the same with an
``except`` clause and ``storage_error``, without entering a context); every entry point calls
``check`` first.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from stratalog.common.errors import KafkaStorageError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OfflineDir:
    path: Path
    during: str         # what the engine was doing: "append to orders-0", "checkpoint write", ...
    errno_name: str     # "ENOSPC"
    reason: str         # "No space left on device"
    at_ms: int

    @property
    def error(self) -> str:
        return f"{self.errno_name}: {self.reason}"

    def describe(self) -> str:
        return (f"log directory {self.path} is offline since {self.during} failed ({self.error}); "
                "it comes back only after a restart of the engine")


def describe_os_error(error: OSError) -> tuple[str, str]:
    """``("ENOSPC", "No space left on device")`` for an ``OSError``."""
    code = error.errno
    name = errno.errorcode.get(code, f"errno {code}") if code is not None else type(error).__name__
    return name, error.strerror or str(error)


class LogDirFailureChannel:
    """The offline directories of one engine; thread-safe, shared by every log of the engine."""

    def __init__(self) -> None:
        self._offline: dict[Path, OfflineDir] = {}
        self._lock = threading.Lock()

    def mark_offline(self, path: Path, during: str, error: OSError) -> OfflineDir:
        """Take ``path`` offline (the first failure is the one kept and reported)."""
        name, reason = describe_os_error(error)
        with self._lock:
            known = self._offline.get(path)
            if known is not None:
                return known
            offline = self._offline[path] = OfflineDir(path, during, name, reason, time.time_ns() // 1_000_000)
        logger.error("%s", offline.describe())
        return offline

    def offline(self) -> dict[Path, OfflineDir]:
        with self._lock:
            return dict(self._offline)

    def is_offline(self, path: Path) -> bool:
        # Hashing a Path is a Python call: skip it while every directory is healthy (every append asks).
        return bool(self._offline) and path in self._offline

    def check(self, path: Path, what: str) -> None:
        """Refuse ``what`` (e.g. "append to orders-0") with ``KAFKA_STORAGE_ERROR`` if ``path`` is offline."""
        offline = self._offline.get(path)
        if offline is not None:
            raise KafkaStorageError(f"{what}: {offline.describe()}")

    def storage_error(self, path: Path, during: str, error: OSError) -> KafkaStorageError:
        """``error``, met during ``during``, takes ``path`` offline; the error to raise for it."""
        offline = self.mark_offline(path, during, error)
        return KafkaStorageError(f"{during}: {offline.describe()}")

    def guard(self, path: Path, during: str) -> WriteGuard:
        """Run a write to ``path``; an ``OSError`` takes the directory offline and becomes a storage error."""
        self.check(path, during)
        return WriteGuard(self, path, during)


class WriteGuard:
    """``LogDirFailureChannel.guard``'s context: a class, not a generator, as every append enters one."""

    __slots__ = ("channel", "path", "during")

    def __init__(self, channel: LogDirFailureChannel, path: Path, during: str) -> None:
        self.channel, self.path, self.during = channel, path, during

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
                 ) -> None:
        if isinstance(error, OSError):
            raise self.channel.storage_error(self.path, self.during, error) from error
