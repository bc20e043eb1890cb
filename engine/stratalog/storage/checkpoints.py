"""The directory-level checkpoint files of every data directory, read and written in one place.

Each data directory has four: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks) and
``cleaner-offset-checkpoint``. Each lists the partitions of that directory only, so a
directory moved to another broker carries its own state. Kafka writes them on separate
schedules; the clean shutdown and topic deletions write them all.

A damaged checkpoint is read as empty, as Kafka does: it means "recover everything", never a
refusal to start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from stratalog.common.errors import CheckpointError, KafkaStorageError
from stratalog.common.names import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
)
from stratalog.storage.checkpoint import OffsetCheckpointFile
from stratalog.storage.dir_lock import DirLock
from stratalog.storage.log import Log
from stratalog.storage.log_dir_failure import LogDirFailureChannel

logger = logging.getLogger(__name__)


class DataDir:
    """One of the engine's directories: its lock, its checkpoint files, how it was last shut down."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = DirLock(path)
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = OffsetCheckpointFile(path / REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner_offsets = OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT)
        self.had_clean_shutdown = False
        self.broker_epoch = 0  # from the marker Kafka (or we) left; written back unchanged

    @property
    def checkpoint_files(self) -> tuple[OffsetCheckpointFile, ...]:
        return (self.recovery_points, self.log_start_offsets, self.high_watermarks, self.cleaner_offsets)

    def read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CheckpointError as error:
            logger.warning("ignoring unreadable checkpoint: %s", error)
            return {}


LogsByDir = Callable[[], Mapping[Path, Mapping[TopicPartition, Log]]]


class Checkpoints:
    """Writes each directory's checkpoint files from the logs it holds now."""

    def __init__(self, dirs: list[DataDir], logs_by_dir: LogsByDir, lock: threading.RLock,
                 failures: LogDirFailureChannel) -> None:
        self._dirs = dirs
        self._failures = failures
        self._logs_by_dir = logs_by_dir
        self._lock = lock
        self._cleaner_offsets: dict[TopicPartition, int] = {}

    def load_cleaner_offsets(self, data_dir: DataDir) -> None:
        self._cleaner_offsets.update(data_dir.read_checkpoint(data_dir.cleaner_offsets))

    def recovery_points(self) -> None:
        self._write(lambda d: d.recovery_points, lambda logs: {tp: log.recovery_point for tp, log in logs.items()})

    def log_start_offsets(self) -> None:
        """As Kafka: only partitions whose start offset is past their first segment's base."""
        self._write(lambda d: d.log_start_offsets,
                    lambda logs: {tp: log.log_start_offset for tp, log in logs.items()
                                  if log.log_start_offset > log.segments[0].base_offset})

    def high_watermarks(self) -> None:
        self._write(lambda d: d.high_watermarks, lambda logs: {tp: log.high_watermark for tp, log in logs.items()})

    def cleaner_offsets(self) -> None:
        self._write(lambda d: d.cleaner_offsets,
                    lambda logs: {tp: offset for tp, offset in self._cleaner_offsets.items() if tp in logs})

    def write_all(self) -> None:
        self.recovery_points()
        self.log_start_offsets()
        self.high_watermarks()
        self.cleaner_offsets()

    def cleaner_offset(self, tp: TopicPartition) -> int | None:
        """The cleaner's first dirty offset for ``tp`` from ``cleaner-offset-checkpoint``, if any."""
        return self._cleaner_offsets.get(tp)

    def set_cleaner_offset(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            self._cleaner_offsets[tp] = offset
            self.cleaner_offsets()

    def forget(self, tp: TopicPartition) -> None:
        self._cleaner_offsets.pop(tp, None)

    def _write(self, file_of: Callable[[DataDir], OffsetCheckpointFile],
               entries_of: Callable[[Mapping[TopicPartition, Log]], dict[TopicPartition, int]]) -> None:
        """Write one checkpoint file in every online directory.

        A directory whose write fails goes offline and the others are still written; the
        first failure is raised once all have been tried.
        """
        failed: KafkaStorageError | None = None
        with self._lock:
            grouped = self._logs_by_dir()
            for data_dir in self._dirs:
                if self._failures.is_offline(data_dir.path):
                    continue
                checkpoint = file_of(data_dir)
                try:
                    with self._failures.guard(data_dir.path, f"write of {checkpoint.path.name}"):
                        checkpoint.write(entries_of(grouped.get(data_dir.path, {})))
                except KafkaStorageError as error:
                    failed = failed or error
        if failed is not None:
            raise failed
