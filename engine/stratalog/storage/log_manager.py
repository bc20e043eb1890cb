"""All logs of an engine across its data directories (Kafka's ``LogManager``, without the scheduler).

It owns the directories: their ``.lock``, ``meta.properties``, the clean-shutdown
marker and the directory-level checkpoint files (``checkpoints``); it loads every
partition directory at open, places new partitions in the directory holding the
fewest, persists topic configs beside their partitions, and deletes partitions by
renaming them to ``-delete`` directories that are removed afterwards. The rules of
topics (names, counts, collisions) are the broker's (``stratalog.broker.topics``);
periodic work (retention, cleaning, checkpoint writes) is triggered from outside,
so that ``stratalog serve`` and the Kubernetes agent can schedule it.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.files import atomic_write
from stratalog.storage.checkpoint import consume_clean_shutdown, ensure_meta_properties, write_clean_shutdown
from stratalog.storage.checkpoints import Checkpoints, DataDir
from stratalog.common.properties import format_properties, parse_properties
from stratalog.common.config import EngineConfig, LogConfig
from stratalog.common.errors import (
    InvalidConfigError,
    KafkaStorageError,
    LogDirError,
    UnknownTopicOrPartitionError,
)
from stratalog.storage.loader import LoadReport, load_log
from stratalog.storage.log import Clock, Log, wall_clock_ms
from stratalog.storage.log_dir_failure import LogDirFailureChannel, OfflineDir, describe_os_error
from stratalog.common.names import (
    RESERVED_TOPICS,
    TOPIC_CONFIG_FILE,
    TopicPartition,
    delete_dir_name,
    is_delete_dir,
    parse_partition_dir,
)

logger = logging.getLogger(__name__)


@dataclass
class ShutdownReport:
    """What a clean shutdown could not do.

    ``unsafe``: directories where acknowledged records may not be on disk (an fsync failed), with
    the error. ``warnings``: what failed without putting a record at risk (a checkpoint or the
    clean-shutdown marker not written: the next start recovers instead of trusting them).
    """

    unsafe: dict[Path, str]
    warnings: list[str]

    @property
    def safe(self) -> bool:
        return not self.unsafe

    def log(self, to: logging.Logger) -> int:
        """One line per problem; the exit status a process should end with (1 if a record is at risk)."""
        for warning in self.warnings:
            to.warning("%s", warning)
        for path, error in self.unsafe.items():
            to.error("data directory %s: acknowledged records may be lost: %s", path, error)
        if self.safe and not self.warnings:
            to.info("stopped cleanly: logs flushed, checkpoints and clean-shutdown marker written")
        elif self.safe:
            to.info("stopped: every acknowledged record is on disk")
        return 0 if self.safe else 1


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: dict[int, Path]
    config: LogConfig
    overrides: dict[str, str]


class LogManager:
    def __init__(
        self,
        data_dirs: Sequence[Path | str],
        config: EngineConfig | None = None,
        *,
        clock: Clock = wall_clock_ms,
        create_missing: bool = True,
    ) -> None:
        if not data_dirs:
            raise LogDirError("at least one data directory is required")
        paths = [Path(d).resolve() for d in data_dirs]
        if len(set(paths)) != len(paths):
            raise LogDirError(f"a data directory is listed twice: {[str(p) for p in paths]}")
        self.config = config or EngineConfig.from_properties({})
        self.default_log_config = self.config.log_config_defaults()
        self.clock = clock
        self.create_missing = create_missing
        self._dirs = [DataDir(p) for p in paths]
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dirs: dict[TopicPartition, DataDir] = {}
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self._pending_dir_deletes: list[Path] = []
        self.load_reports: dict[TopicPartition, LoadReport] = {}
        self.checkpointed_high_watermarks: dict[TopicPartition, int] = {}
        self.lock = threading.RLock()
        self.failures = LogDirFailureChannel()
        self.checkpoints = Checkpoints(self._dirs, self._logs_by_dir, self.lock, self.failures)
        self._opened = False

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> LogManager:
        acquired: list[DataDir] = []
        try:
            for data_dir in self._dirs:
                self._prepare_dir(data_dir.path)
                with _refusing_start(data_dir.path, "take its lock"):
                    data_dir.lock.acquire()
                acquired.append(data_dir)
                self._check_writable(data_dir.path)
            cluster_id = None
            for data_dir in self._dirs:
                with _refusing_start(data_dir.path, "write its metadata files"):
                    props = ensure_meta_properties(data_dir.path, cluster_id=cluster_id)
                    cluster_id = cluster_id or props.get("cluster.id")
                    data_dir.had_clean_shutdown, data_dir.broker_epoch = consume_clean_shutdown(data_dir.path)
                    for checkpoint in data_dir.checkpoint_files:
                        if not checkpoint.path.exists():
                            checkpoint.write({})
            for data_dir in self._dirs:
                with _refusing_start(data_dir.path, "load its partitions"):
                    self._load_dir(data_dir)
        except BaseException:
            for log in self._logs.values():
                try:
                    log.close()
                except Exception as error:  # noqa: BLE001 - the error that stopped the start is the one raised
                    logger.warning("%s: closing %s after the failed start failed too (%s: %s)", log.log_dir,
                                   log.topic_partition, type(error).__name__, error)
            self._logs.clear()
            self._log_dirs.clear()
            for data_dir in acquired:
                data_dir.lock.release()
            raise
        self._opened = True
        return self

    def __enter__(self) -> LogManager:
        return self if self._opened else self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepare_dir(self, path: Path) -> None:
        if path.exists() and not path.is_dir():
            raise LogDirError(f"data directory {path} exists and is not a directory")
        if not path.exists() and not self.create_missing:
            raise LogDirError(f"data directory {path} does not exist")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise LogDirError(f"cannot create data directory {path}: {error.strerror}") from None

    @staticmethod
    def _check_writable(path: Path) -> None:
        probe = path / ".stratalog-write-probe"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise LogDirError(f"data directory {path} is not writable: {error.strerror}; {_ownership(path)}") from None

    def _load_dir(self, data_dir: DataDir) -> None:
        recovery_points = data_dir.read_checkpoint(data_dir.recovery_points)
        start_offsets = data_dir.read_checkpoint(data_dir.log_start_offsets)
        # A replicated partition restarts from its checkpointed HW (a single copy needs none).
        self.checkpointed_high_watermarks.update(data_dir.read_checkpoint(data_dir.high_watermarks))
        self.checkpoints.load_cleaner_offsets(data_dir)
        for child in sorted(data_dir.path.iterdir()):
            if not child.is_dir():
                continue
            if is_delete_dir(child.name):
                self._pending_dir_deletes.append(child)
                continue
            tp = parse_partition_dir(child.name)
            if tp is None or tp.topic in RESERVED_TOPICS:
                continue  # Kafka's KRaft metadata log belongs to the Raft layer, never to log management
            if tp in self._logs:
                raise LogDirError(
                    f"partition {tp} is in two data directories: {self._logs[tp].dir} and {child}"
                )
            overrides = self._read_topic_config(child)
            config = self.log_config(overrides, where=str(child / TOPIC_CONFIG_FILE))
            log, report = load_log(
                child, tp, config,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                had_clean_shutdown=data_dir.had_clean_shutdown,
                clock=self.clock,
                failure_channel=self.failures,
            )
            self._logs[tp] = log
            self._log_dirs[tp] = data_dir
            self._topic_overrides.setdefault(tp.topic, overrides)
            self.load_reports[tp] = report

    def log_config(self, overrides: Mapping[str, object], *, where: str) -> LogConfig:
        """The config of a topic with these overrides over the engine's defaults, or a named error."""
        try:
            return LogConfig.from_overrides(overrides, base=self.default_log_config)
        except InvalidConfigError as error:
            raise InvalidConfigError(f"{where}: {error}") from None

    @staticmethod
    def _read_topic_config(partition_dir: Path) -> dict[str, str]:
        path = partition_dir / TOPIC_CONFIG_FILE
        return parse_properties(path) if path.exists() else {}

    def close(self) -> ShutdownReport:
        """Clean shutdown: flush and close every log, write checkpoints, then the clean-shutdown marker.

        Never raises for an I/O error: each directory is shut down as far as its disk allows,
        and the report says what was not done. A directory that failed gets no clean-shutdown
        marker, so its next start recovers its logs instead of trusting them.
        """
        report = ShutdownReport({}, [])
        if not self._opened:
            return report
        with self.lock:
            for log in self._logs.values():
                try:
                    if log.offline:
                        log.flush_for_shutdown()
                    else:
                        log.flush()
                except (OSError, KafkaStorageError) as error:
                    cause = error.__cause__ if isinstance(error.__cause__, OSError) else error
                    what = "{}: {}".format(*describe_os_error(cause)) if isinstance(cause, OSError) else str(error)
                    report.unsafe.setdefault(log.log_dir, f"fsync of {log.topic_partition} failed: {what}")
            try:
                self.checkpoints.write_all()
            except KafkaStorageError:
                pass  # every directory was tried; the failed ones are offline, reported below
            # A log that failed to close (a trim, a snapshot, an index entry not written) may have left
            # its files short of what they should hold: as Kafka, no clean-shutdown marker for its
            # directory, so that the next start recovers the directory's logs.
            # Any error: one log's close must not keep the others, their markers and locks waiting.
            unclosed: dict[Path, list[str]] = {}
            for log in self._logs.values():
                try:
                    log.close()
                except Exception as error:
                    what = "{}: {}".format(*describe_os_error(error)) if isinstance(error, OSError) else repr(error)
                    unclosed.setdefault(log.log_dir, []).append(f"{log.topic_partition} ({what})")
            for data_dir in self._dirs:
                offline = self.failures.offline().get(data_dir.path)
                if offline is None and data_dir.path in unclosed:
                    report.warnings.append(f"{data_dir.path}: close of {', '.join(unclosed[data_dir.path])} failed; "
                                           "no clean-shutdown marker written, its next start recovers its logs")
                elif offline is None:
                    try:
                        with self.failures.guard(data_dir.path, "write of the clean-shutdown marker"):
                            write_clean_shutdown(data_dir.path, data_dir.broker_epoch)
                    except KafkaStorageError:
                        offline = self.failures.offline().get(data_dir.path)
                if offline is not None:
                    report.warnings.append(f"{data_dir.path}: {offline.during} failed ({offline.error}); "
                                           "its next start recovers its logs")
                data_dir.lock.release()
            self._opened = False
        return report

    # -- logs -------------------------------------------------------------------------------
    @property
    def data_dirs(self) -> list[Path]:
        return [d.path for d in self._dirs]

    def offline_dirs(self) -> dict[Path, OfflineDir]:
        """The directories taken offline by an I/O error since the engine started."""
        return self.failures.offline()

    def had_clean_shutdown(self) -> dict[Path, bool]:
        """Per directory: whether Kafka's clean-shutdown marker was there at open (recovery skipped)."""
        return {d.path: d.had_clean_shutdown for d in self._dirs}

    def logs(self) -> dict[TopicPartition, Log]:
        with self.lock:
            return dict(self._logs)

    def logs_view(self) -> Mapping[TopicPartition, Log]:
        """The logs as they are now, without the lock or a copy (for a membership test on an event loop)."""
        return self._logs

    def topics(self) -> list[str]:
        with self.lock:
            return sorted({tp.topic for tp in self._logs})

    def get_log(self, topic: str, partition: int) -> Log:
        return self.log_of(TopicPartition(topic, partition))

    def log_of(self, tp: TopicPartition) -> Log:
        """``get_log`` of a partition named already (every produce and fetch asks: no name made again)."""
        log = self._logs.get(tp)
        if log is None:
            raise UnknownTopicOrPartitionError(f"topic-partition {tp.topic}-{tp.partition} does not exist")
        return log

    def describe_topic(self, topic: str) -> TopicDescription:
        with self.lock:
            partitions = {tp.partition: log.dir for tp, log in self._logs.items() if tp.topic == topic}
            if not partitions:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            overrides = dict(self._topic_overrides.get(topic, {}))
            config = self._logs[TopicPartition(topic, min(partitions))].config
            return TopicDescription(topic, dict(sorted(partitions.items())), config, overrides)

    def create_logs(self, topic: str, partitions: Iterable[int], config: LogConfig) -> None:
        """Create these partitions of ``topic``: a directory each, in the least loaded data directory,
        holding the topic's config file. A new topic's overrides are remembered from ``config``."""
        with self.lock:
            overrides = self._topic_overrides.get(topic)
            if overrides is None:
                overrides = config.overrides_vs(self.default_log_config)
            for partition in partitions:
                tp = TopicPartition(topic, partition)
                data_dir = self._least_loaded_dir()
                directory = data_dir.path / tp.dir_name
                with self.failures.guard(data_dir.path, f"creation of {tp}"):
                    directory.mkdir()
                    atomic_write(directory / TOPIC_CONFIG_FILE, format_properties(overrides))
                    log, report = load_log(directory, tp, config, clock=self.clock,
                                           failure_channel=self.failures)
                self._logs[tp] = log
                self._log_dirs[tp] = data_dir
                self.load_reports[tp] = report
                self._topic_overrides.setdefault(topic, overrides)

    def _least_loaded_dir(self) -> DataDir:
        online = [d for d in self._dirs if not self.failures.is_offline(d.path)]
        if not online:
            raise KafkaStorageError("no online log directory to place a partition in: "
                                    + "; ".join(o.describe() for o in self.failures.offline().values()))
        counts = {id(d): 0 for d in online}
        for data_dir in self._log_dirs.values():
            if id(data_dir) in counts:
                counts[id(data_dir)] += 1
        return min(online, key=lambda d: counts[id(d)])

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Persist ``config`` beside every partition of ``topic`` and apply it to the open logs."""
        with self.lock:
            current = self.describe_topic(topic)
            normalized = config.overrides_vs(self.default_log_config)
            for partition, directory in current.partitions.items():
                with self.failures.guard(directory.parent, f"config write of {topic}-{partition}"):
                    atomic_write(directory / TOPIC_CONFIG_FILE, format_properties(normalized))
                self._logs[TopicPartition(topic, partition)].update_config(config)
            self._topic_overrides[topic] = normalized

    def delete_logs(self, topic: str, partitions: Iterable[int]) -> list[Path]:
        """Rename these partitions' directories to ``<name>.<uuid>-delete`` (removed later by
        ``delete_pending_dirs``), then checkpoint without them; returns the new paths."""
        with self.lock:
            renamed = [self._delete_partition(TopicPartition(topic, p)) for p in partitions]
            if not any(tp.topic == topic for tp in self._logs):
                self._topic_overrides.pop(topic, None)
            self.checkpoints.write_all()
            return renamed

    def _delete_partition(self, tp: TopicPartition) -> Path:
        log = self._logs.pop(tp)
        self._log_dirs.pop(tp)
        log.flush()
        log.close()
        target = log.dir.parent / delete_dir_name(tp)
        log.rename_dir(target)
        self._pending_dir_deletes.append(target)
        self.checkpoints.forget(tp)
        return target

    def delete_pending_dirs(self) -> int:
        """Remove ``-delete`` directories (Kafka does this asynchronously after the rename)."""
        with self.lock:
            pending, self._pending_dir_deletes = self._pending_dir_deletes, []
        for path in pending:
            shutil.rmtree(path, ignore_errors=True)
        return len(pending)

    # -- checkpoints and flushing -----------------------------------------------------------
    def _logs_by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        grouped: dict[Path, dict[TopicPartition, Log]] = {d.path: {} for d in self._dirs}
        for tp, log in self._logs.items():
            grouped[self._log_dirs[tp].path][tp] = log
        return grouped

    def write_checkpoints(self) -> None:
        self.checkpoints.write_all()

    def flush_dirty_logs(self, now_ms: int | None = None) -> list[TopicPartition]:
        """Flush logs whose ``flush.ms`` has elapsed since their last flush."""
        now = self.clock() if now_ms is None else now_ms
        flushed = []
        for tp, log in self.logs().items():
            if log.offline:
                continue
            if log.unflushed_messages() > 0 and now - log.last_flush_ms >= log.config.flush_ms:
                log.flush()
                flushed.append(tp)
        return flushed

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget, in every log, the producers ``producer.id.expiration.ms`` has passed; how many went."""
        now = self.clock() if now_ms is None else now_ms
        expiration = self.config.producer_id_expiration_ms
        return sum(log.remove_expired_producers(now, expiration) for log in self.logs().values())

    def delete_expired_segment_files(self, now_ms: int | None = None) -> int:
        return sum(log.delete_expired_files(now_ms) for log in self.logs().values() if not log.offline)


def open_log_manager(data_dirs: Sequence[Path | str], properties: Mapping[str, object] | None = None, *,
                     create_missing: bool = True) -> LogManager:
    """Build and open a manager; the usual entry point of tools and the server."""
    config = EngineConfig.from_properties(dict(properties or {}))
    return LogManager(data_dirs, config, create_missing=create_missing).open()


@contextmanager
def _refusing_start(path: Path, what: str) -> Iterator[None]:
    """An I/O error while opening a directory refuses the start with one line saying what to do."""
    try:
        yield
    except OSError as error:
        name, reason = describe_os_error(error)
        where = f" ({error.filename})" if error.filename else ""
        if error.errno in (errno.EACCES, errno.EPERM):
            remedy = f"{_ownership(path)}; make it writable by this user"
        elif error.errno == errno.ENOSPC:
            remedy = "free space on it"
        else:
            remedy = "make it readable and writable again"
        raise LogDirError(f"data directory {path}: cannot {what}: {name}: {reason}{where}; {remedy}, "
                          "then start the engine again") from None


def _ownership(path: Path) -> str:
    """Who owns ``path`` and who the engine runs as: what a permission error needs to be fixed."""
    me = f"the engine runs as uid {os.getuid()} gid {os.getgid()} (groups {sorted(os.getgroups())})"
    try:
        st = path.stat()
    except OSError:
        return me
    return f"it is owned by uid {st.st_uid} gid {st.st_gid} with mode {stat.filemode(st.st_mode)}, and {me}"
