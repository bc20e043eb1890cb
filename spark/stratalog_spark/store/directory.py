"""``LogStore`` over data directories: reads straight from the segment files, read-only and lock-free.

Reads never take the directory's ``.lock`` - the engine serving the directory
holds it - and never write a byte: ``segments`` explains how they stay correct
while the engine appends, rolls, cleans and deletes. The log start offset is
the larger of the first segment's base and the engine's last
``log-start-offset-checkpoint`` (DeleteRecords moves it without deleting
segments); the end is the active segment's next offset, which is the high
watermark of a standalone engine.

Appends are the exception: they go through the engine's own append path
(``LogManager`` → ``Log.append``: validation, offsets, rolls, indexes), which
needs the lock. A writer waits for it, so tasks writing to one directory take
turns; while a live engine holds it the wait fails after the lock timeout with
a message pointing at ``url`` (write through the engine's API instead).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from stratalog.storage.checkpoint import OffsetCheckpointFile
from stratalog.common.errors import CheckpointError, CorruptRecordError, LogDirLockedError, UnknownTopicOrPartitionError
from stratalog.storage.log_manager import LogManager, open_log_manager
from stratalog.common.names import LOG_START_OFFSET_CHECKPOINT, TopicPartition, is_delete_dir, parse_partition_dir
from stratalog.records import decode_any
from stratalog.records.transactions import TransactionState

from . import Appender, Chunk, DataLossHandler, PartitionOffsets
from .segments import TAIL_ATTEMPTS, TAIL_SLEEP_S, OpenSegment, list_segments, open_segment

DEFAULT_LOCK_TIMEOUT_S = 600.0


class DirStore:
    def __init__(self, paths: Sequence[str], *, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
        if not paths:
            raise ValueError("stratalog: option 'path' names no data directory")
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            if not path.is_dir():
                raise FileNotFoundError(f"stratalog: data directory {path} does not exist")
        self.lock_timeout_s = lock_timeout_s

    # -- layout --------------------------------------------------------------------------
    def _partition_dirs(self) -> dict[TopicPartition, Path]:
        found = {}
        for data_dir in self.paths:
            for name in os.listdir(data_dir):
                if is_delete_dir(name):
                    continue
                tp = parse_partition_dir(name)
                if tp is not None and (data_dir / name).is_dir():
                    found[tp] = data_dir / name
        return found

    def partition_dir(self, topic: str, partition: int) -> Path:
        directory = self._partition_dirs().get(TopicPartition(topic, partition))
        if directory is None:
            raise UnknownTopicOrPartitionError(
                f"{topic}-{partition} is not in the data directories {[str(p) for p in self.paths]}")
        return directory

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self._partition_dirs()})

    def partitions(self, topic: str) -> list[int]:
        found = sorted(tp.partition for tp in self._partition_dirs() if tp.topic == topic)
        if not found:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist in the data directories {[str(p) for p in self.paths]}")
        return found

    # -- offsets -------------------------------------------------------------------------
    def offsets(self, topic: str, partition: int, *, read_committed: bool = False) -> PartitionOffsets:
        directory = self.partition_dir(topic, partition)
        end = self._end(directory)
        segments = list_segments(directory)
        first_base = segments[0].base_offset if segments else end
        start = min(max(first_base, self._checkpointed_start(directory, TopicPartition(topic, partition))), end)
        if read_committed:
            end = max(start, self._last_stable(topic, partition, first_base, end))
        return PartitionOffsets(start, end)

    def _last_stable(self, topic: str, partition: int, start: int, end: int) -> int:
        """The engine's last stable offset, found as it finds it: a scan of the transactional batches
        (every batch is read; the engine keeps the state, a reader of its files has none)."""
        state = TransactionState()
        for batch in self.read_batches(topic, partition, start, end, lambda *_: None):
            state.on_batch(batch)
        first_unstable = state.first_unstable_offset(end)
        return end if first_unstable is None else max(start, min(first_unstable, end))

    @staticmethod
    def _checkpointed_start(directory: Path, tp: TopicPartition) -> int:
        try:
            return OffsetCheckpointFile(directory.parent / LOG_START_OFFSET_CHECKPOINT).read().get(tp, 0)
        except (OSError, CheckpointError):
            return 0  # none yet, or unreadable: the segments alone say where the log starts

    @staticmethod
    def _end(directory: Path) -> int:
        segments = list_segments(directory)
        if not segments:
            return 0
        opened = open_segment(directory, segments[-1].base_offset)
        assert opened is not None
        segment, following = opened
        with segment:
            if following is not None:  # rolled since the listing: the later segment decides
                return DirStore._end(directory)
            return segment.next_offset()

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        directory = self.partition_dir(topic, partition)
        log_start = self.offsets(topic, partition).log_start
        position = log_start
        while True:
            opened = open_segment(directory, position)
            if opened is None:
                position = list_segments(directory)[0].base_offset
                continue
            segment, following = opened
            with segment:
                if segment.active or segment.max_timestamp() >= timestamp:
                    found = _first_at_or_after(segment, position, timestamp)
                    if found is not None:
                        return found
            if following is None:
                return None
            position = following.base_offset

    # -- planning and reading --------------------------------------------------------------
    def chunks(self, topic: str, partition: int, start: int, end: int) -> list[Chunk]:
        segments = list_segments(self.partition_dir(topic, partition), sizes=True)
        chunks = []
        for index, segment in enumerate(segments):
            upper = segments[index + 1].base_offset if index + 1 < len(segments) else end
            low, high = max(start, segment.base_offset), min(end, upper)
            if low >= high:
                continue
            span = max(upper - segment.base_offset, 1)
            chunks.append(Chunk(low, high, segment.size * (high - low) // span))
        if not chunks and start < end:
            chunks.append(Chunk(start, end, 0))
        return chunks

    def read_batches(self, topic: str, partition: int, start: int, end: int,
                     on_data_loss: DataLossHandler) -> Iterator[bytes]:
        directory = self.partition_dir(topic, partition)
        position = start
        stalled = 0
        while position < end:
            opened = open_segment(directory, position)
            if opened is None:  # below every segment: retention removed it while we were planning or reading
                available = list_segments(directory)[0].base_offset
                on_data_loss(topic, partition, position, available)
                position = available
                continue
            segment, following = opened
            before = position
            with segment:
                for info, data in segment.checked_batches(position):
                    if info.last_offset < position:
                        continue
                    if info.magic >= 2 and info.base_offset >= end:
                        return  # (a v0/v1 wrapper's base is its last inner offset: decoding filters it)
                    yield data
                    position = info.last_offset + 1
                    if position >= end:
                        return
            if following is not None:
                position = max(position, following.base_offset)  # offsets compacted away at a segment's end
            elif position == before:
                stalled += 1
                if stalled > TAIL_ATTEMPTS:
                    raise CorruptRecordError(0, f"offsets {position}..{end - 1} of {topic}-{partition} are not in "
                                             "its log any more (was it truncated?)", source=str(directory))
                time.sleep(TAIL_SLEEP_S)

    # -- appends ---------------------------------------------------------------------------
    @contextmanager
    def appender(self) -> Iterator[Appender]:
        manager = self._locked_manager()
        try:
            def append(topic: str, partition: int, batch: bytes) -> tuple[int, int]:
                info = manager.get_log(topic, partition).append(batch)
                return info.first_offset, info.last_offset

            yield append
        finally:
            manager.close()

    def _locked_manager(self) -> LogManager:
        deadline = time.monotonic() + self.lock_timeout_s
        pause = 0.01
        while True:
            try:
                return open_log_manager([str(p) for p in self.paths], create_missing=False)
            except LogDirLockedError as error:
                if time.monotonic() >= deadline:
                    raise LogDirLockedError(
                        f"{error} (waited {self.lock_timeout_s:.0f} s). Writing to a directory needs its lock; "
                        "while `stratalog serve` runs on it, write through the server with option url=...") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)


def _first_at_or_after(segment: OpenSegment, start: int, timestamp: int) -> int | None:
    for info, data in segment.batches(start):
        if info.max_timestamp < timestamp:
            continue
        _, records = decode_any(data, 0, source=str(segment.path))
        for record in records:
            if record.timestamp >= timestamp and record.offset >= start:
                return record.offset
    return None
