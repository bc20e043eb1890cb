"""All logs of an engine across its data directories (Kafka's ``LogManager``, without the scheduler).

It owns the directories: their ``.lock``, ``meta.properties``, the clean-shutdown
marker and the directory-level checkpoint files; it loads every partition
directory at open, places new partitions in the directory holding the fewest,
persists topic configs beside their partitions, and deletes topics by renaming
them to ``-delete`` directories that are removed afterwards. Periodic work
(retention, cleaning, checkpoint writes) is triggered from outside through its
methods, so that ``stratalog serve`` and the Kubernetes agent can schedule it.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stratalog.common.files import atomic_write
from stratalog.storage.checkpoint import (
    OffsetCheckpointFile,
    consume_clean_shutdown,
    ensure_meta_properties,
    write_clean_shutdown,
)
from stratalog.common.properties import format_properties, parse_properties
from stratalog.common.config import EngineConfig, LogConfig
from stratalog.storage.dir_lock import DirLock
from stratalog.common.errors import (
    CheckpointError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from stratalog.storage.loader import LoadReport, load_log
from stratalog.storage.log import Clock, Log, wall_clock_ms
from stratalog.common.names import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TOPIC_CONFIG_FILE,
    TopicPartition,
    delete_dir_name,
    is_delete_dir,
    parse_partition_dir,
    validate_topic_name,
)

logger = logging.getLogger(__name__)

MAX_PARTITIONS = 100_000
RESERVED_TOPICS = frozenset({"__cluster_metadata"})


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: dict[int, Path]
    config: LogConfig
    overrides: dict[str, str]


class _DataDir:
    """One of the engine's directories and its checkpoint files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = DirLock(path)
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = OffsetCheckpointFile(path / REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner_offsets = OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT)
        self.had_clean_shutdown = False
        self.broker_epoch = 0  # from the marker Kafka (or we) left; written back unchanged

    def read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CheckpointError as error:
            # As Kafka: a damaged checkpoint means "recover everything", never a refusal to start.
            logger.warning("ignoring unreadable checkpoint: %s", error)
            return {}


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
        self._dirs = [_DataDir(p) for p in paths]
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dirs: dict[TopicPartition, _DataDir] = {}
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self._pending_dir_deletes: list[Path] = []
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self.load_reports: dict[TopicPartition, LoadReport] = {}
        self.lock = threading.RLock()
        self._opened = False

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> LogManager:
        acquired: list[_DataDir] = []
        try:
            for data_dir in self._dirs:
                self._prepare_dir(data_dir.path)
                try:
                    data_dir.lock.acquire()
                except PermissionError as error:
                    raise LogDirError(f"data directory {data_dir.path} is not writable: {error.strerror}") from None
                acquired.append(data_dir)
                self._check_writable(data_dir.path)
            cluster_id = None
            for data_dir in self._dirs:
                props = ensure_meta_properties(data_dir.path, cluster_id=cluster_id)
                cluster_id = cluster_id or props.get("cluster.id")
                data_dir.had_clean_shutdown, data_dir.broker_epoch = consume_clean_shutdown(data_dir.path)
                for checkpoint in (data_dir.recovery_points, data_dir.log_start_offsets,
                                   data_dir.high_watermarks, data_dir.cleaner_offsets):
                    if not checkpoint.path.exists():
                        checkpoint.write({})
            for data_dir in self._dirs:
                self._load_dir(data_dir)
        except BaseException:
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
            raise LogDirError(f"data directory {path} is not writable: {error.strerror}") from None

    def _load_dir(self, data_dir: _DataDir) -> None:
        recovery_points = data_dir.read_checkpoint(data_dir.recovery_points)
        start_offsets = data_dir.read_checkpoint(data_dir.log_start_offsets)
        self._cleaner_offsets.update(data_dir.read_checkpoint(data_dir.cleaner_offsets))
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
            config = self._log_config(overrides, where=str(child / TOPIC_CONFIG_FILE))
            log, report = load_log(
                child, tp, config,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                had_clean_shutdown=data_dir.had_clean_shutdown,
                clock=self.clock,
            )
            self._logs[tp] = log
            self._log_dirs[tp] = data_dir
            self._topic_overrides.setdefault(tp.topic, overrides)
            self.load_reports[tp] = report

    def _log_config(self, overrides: Mapping[str, object], *, where: str) -> LogConfig:
        try:
            return LogConfig.from_overrides(overrides, base=self.default_log_config)
        except InvalidConfigError as error:
            raise InvalidConfigError(f"{where}: {error}") from None

    @staticmethod
    def _read_topic_config(partition_dir: Path) -> dict[str, str]:
        path = partition_dir / TOPIC_CONFIG_FILE
        return parse_properties(path) if path.exists() else {}

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write checkpoints, then the clean-shutdown marker."""
        if not self._opened:
            return
        with self.lock:
            for log in self._logs.values():
                log.flush()
            self.write_checkpoints()
            for log in self._logs.values():
                log.close()
            for data_dir in self._dirs:
                write_clean_shutdown(data_dir.path, data_dir.broker_epoch)
                data_dir.lock.release()
            self._opened = False

    # -- topics -----------------------------------------------------------------------------
    @property
    def data_dirs(self) -> list[Path]:
        return [d.path for d in self._dirs]

    def had_clean_shutdown(self) -> dict[Path, bool]:
        """Per directory: whether Kafka's clean-shutdown marker was there at open (recovery skipped)."""
        return {d.path: d.had_clean_shutdown for d in self._dirs}

    def logs(self) -> dict[TopicPartition, Log]:
        with self.lock:
            return dict(self._logs)

    def topics(self) -> list[str]:
        with self.lock:
            return sorted({tp.topic for tp in self._logs})

    def get_log(self, topic: str, partition: int) -> Log:
        log = self._logs.get(TopicPartition(topic, partition))
        if log is None:
            raise UnknownTopicOrPartitionError(f"topic-partition {topic}-{partition} does not exist")
        return log

    def describe_topic(self, topic: str) -> TopicDescription:
        with self.lock:
            partitions = {tp.partition: log.dir for tp, log in self._logs.items() if tp.topic == topic}
            if not partitions:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            overrides = dict(self._topic_overrides.get(topic, {}))
            config = self._logs[TopicPartition(topic, min(partitions))].config
            return TopicDescription(topic, dict(sorted(partitions.items())), config, overrides)

    def create_topic(self, topic: str, partitions: int = 1, overrides: Mapping[str, object] | None = None) -> None:
        validate_topic_name(topic)
        if topic in RESERVED_TOPICS:
            raise InvalidTopicError(f"topic {topic!r} is reserved for Kafka's KRaft metadata log")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"topic {topic!r}: partitions must be between 1 and {MAX_PARTITIONS}, "
                                         f"got {partitions}")
        config = self._log_config(dict(overrides or {}), where=f"topic {topic!r}")
        normalized = config.overrides_vs(self.default_log_config)
        with self.lock:
            existing = self.topics()
            if topic in existing:
                raise TopicExistsError(f"topic {topic!r} already exists")
            collision = next((t for t in existing if t.replace(".", "_") == topic.replace(".", "_")), None)
            if collision is not None:
                raise InvalidTopicError(
                    f"topic {topic!r} collides with existing topic {collision!r}: '.' and '_' are the same "
                    "in Kafka's metric names"
                )
            self._create_partitions(topic, range(partitions), config, normalized)
            self._topic_overrides[topic] = normalized

    def add_partitions(self, topic: str, total: int) -> None:
        with self.lock:
            current = self.describe_topic(topic)
            count = len(current.partitions)
            if total <= count:
                raise InvalidPartitionsError(
                    f"topic {topic!r} has {count} partitions; the count can only grow (asked for {total})"
                )
            if total > MAX_PARTITIONS:
                raise InvalidPartitionsError(f"topic {topic!r}: at most {MAX_PARTITIONS} partitions")
            self._create_partitions(topic, range(count, total), current.config, current.overrides)

    def normalize_overrides(self, topic: str, overrides: Mapping[str, object]) -> dict[str, str]:
        """``overrides`` as this engine stores them (validated; keys equal to the defaults dropped)."""
        return self._log_config(dict(overrides), where=f"topic {topic!r}").overrides_vs(self.default_log_config)

    def ensure_partitions(self, topic: str, partitions: Iterable[int],
                          overrides: Mapping[str, object] | None = None) -> list[int]:
        """Hold these partitions of ``topic`` (any subset of its numbers), creating the missing ones.

        For an engine that stores some of a topic's partitions, as a Kubernetes LogDir does
        with the partitions assigned to it. A new topic takes ``overrides``; partitions added
        to an existing topic take the topic's current config. Returns the partitions created.
        """
        validate_topic_name(topic)
        if topic in RESERVED_TOPICS:
            raise InvalidTopicError(f"topic {topic!r} is reserved for Kafka's KRaft metadata log")
        wanted = sorted(set(partitions))
        if any(not 0 <= p < MAX_PARTITIONS for p in wanted):
            raise InvalidPartitionsError(f"topic {topic!r}: partition numbers must be in [0, {MAX_PARTITIONS})")
        with self.lock:
            existing = self.topics()
            if topic in existing:
                current = self.describe_topic(topic)
                missing = [p for p in wanted if p not in current.partitions]
                self._create_partitions(topic, missing, current.config, current.overrides)
                return missing
            collision = next((t for t in existing if t.replace(".", "_") == topic.replace(".", "_")), None)
            if collision is not None:
                raise InvalidTopicError(
                    f"topic {topic!r} collides with existing topic {collision!r}: '.' and '_' are the same "
                    "in Kafka's metric names"
                )
            if not wanted:
                return []
            config = self._log_config(dict(overrides or {}), where=f"topic {topic!r}")
            normalized = config.overrides_vs(self.default_log_config)
            self._create_partitions(topic, wanted, config, normalized)
            self._topic_overrides[topic] = normalized
            return wanted

    def delete_partitions(self, topic: str, partitions: Iterable[int]) -> list[Path]:
        """Delete some partitions of ``topic`` (the rest stay), as :meth:`delete_topic` does for all."""
        with self.lock:
            current = self.describe_topic(topic)
            doomed = sorted(set(partitions) & set(current.partitions))
            if set(doomed) == set(current.partitions):
                return self.delete_topic(topic)
            renamed = [self._delete_partition(TopicPartition(topic, p)) for p in doomed]
            self.write_checkpoints()
            return renamed

    def _delete_partition(self, tp: TopicPartition) -> Path:
        log = self._logs.pop(tp)
        self._log_dirs.pop(tp)
        log.flush()
        log.close()
        target = log.dir.parent / delete_dir_name(tp)
        log.rename_dir(target)
        self._pending_dir_deletes.append(target)
        self._cleaner_offsets.pop(tp, None)
        return target

    def _create_partitions(self, topic: str, partitions: Iterable[int], config: LogConfig,
                           overrides: Mapping[str, str]) -> None:
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            data_dir = self._least_loaded_dir()
            directory = data_dir.path / tp.dir_name
            directory.mkdir()
            atomic_write(directory / TOPIC_CONFIG_FILE, format_properties(overrides))
            log, report = load_log(directory, tp, config, clock=self.clock)
            self._logs[tp] = log
            self._log_dirs[tp] = data_dir
            self.load_reports[tp] = report

    def _least_loaded_dir(self) -> _DataDir:
        counts = {id(d): 0 for d in self._dirs}
        for data_dir in self._log_dirs.values():
            counts[id(data_dir)] += 1
        return min(self._dirs, key=lambda d: counts[id(d)])

    def alter_topic_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """Replace the topic's overrides (keys not given fall back to the engine defaults)."""
        with self.lock:
            current = self.describe_topic(topic)
            config = self._log_config(dict(overrides), where=f"topic {topic!r}")
            normalized = config.overrides_vs(self.default_log_config)
            for partition, directory in current.partitions.items():
                atomic_write(directory / TOPIC_CONFIG_FILE, format_properties(normalized))
                self._logs[TopicPartition(topic, partition)].update_config(config)
            self._topic_overrides[topic] = normalized
            return config

    def delete_topic(self, topic: str) -> list[Path]:
        """Rename each partition directory to ``<name>.<uuid>-delete``; returns the new paths."""
        with self.lock:
            current = self.describe_topic(topic)
            renamed = [self._delete_partition(TopicPartition(topic, p)) for p in current.partitions]
            self._topic_overrides.pop(topic, None)
            self.write_checkpoints()
            return renamed

    def delete_pending_dirs(self) -> int:
        """Remove ``-delete`` directories (Kafka does this asynchronously after the rename)."""
        with self.lock:
            pending, self._pending_dir_deletes = self._pending_dir_deletes, []
        for path in pending:
            shutil.rmtree(path, ignore_errors=True)
        return len(pending)

    # -- checkpoints and flushing -----------------------------------------------------------
    def _by_dir(self) -> dict[int, dict[TopicPartition, Log]]:
        grouped: dict[int, dict[TopicPartition, Log]] = {id(d): {} for d in self._dirs}
        for tp, log in self._logs.items():
            grouped[id(self._log_dirs[tp])][tp] = log
        return grouped

    def checkpoint_recovery_points(self) -> None:
        with self.lock:
            grouped = self._by_dir()
            for data_dir in self._dirs:
                data_dir.recovery_points.write({tp: log.recovery_point for tp, log in grouped[id(data_dir)].items()})

    def checkpoint_log_start_offsets(self) -> None:
        """As Kafka: only partitions whose start offset is past their first segment's base."""
        with self.lock:
            grouped = self._by_dir()
            for data_dir in self._dirs:
                data_dir.log_start_offsets.write({
                    tp: log.log_start_offset for tp, log in grouped[id(data_dir)].items()
                    if log.log_start_offset > log.segments[0].base_offset
                })

    def checkpoint_high_watermarks(self) -> None:
        with self.lock:
            grouped = self._by_dir()
            for data_dir in self._dirs:
                data_dir.high_watermarks.write({tp: log.high_watermark for tp, log in grouped[id(data_dir)].items()})

    def write_checkpoints(self) -> None:
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()

    def cleaner_offset(self, tp: TopicPartition) -> int | None:
        """The cleaner's first dirty offset for ``tp`` from ``cleaner-offset-checkpoint``, if any."""
        return self._cleaner_offsets.get(tp)

    def write_cleaner_offset(self, tp: TopicPartition, offset: int) -> None:
        with self.lock:
            self._cleaner_offsets[tp] = offset
            self.checkpoint_cleaner_offsets()

    def checkpoint_cleaner_offsets(self) -> None:
        with self.lock:
            grouped = self._by_dir()
            for data_dir in self._dirs:
                data_dir.cleaner_offsets.write({tp: offset for tp, offset in self._cleaner_offsets.items()
                                                if tp in grouped[id(data_dir)]})

    def flush_dirty_logs(self, now_ms: int | None = None) -> list[TopicPartition]:
        """Flush logs whose ``flush.ms`` has elapsed since their last flush."""
        now = self.clock() if now_ms is None else now_ms
        flushed = []
        for tp, log in self.logs().items():
            if log.unflushed_messages() > 0 and now - log.last_flush_ms >= log.config.flush_ms:
                log.flush()
                flushed.append(tp)
        return flushed

    def delete_expired_segment_files(self, now_ms: int | None = None) -> int:
        return sum(log.delete_expired_files(now_ms) for log in self.logs().values())


def open_log_manager(data_dirs: Sequence[Path | str], properties: Mapping[str, object] | None = None, *,
                     create_missing: bool = True) -> LogManager:
    """Build and open a manager; the usual entry point of tools and the server."""
    config = EngineConfig.from_properties(dict(properties or {}))
    return LogManager(data_dirs, config, create_missing=create_missing).open()
