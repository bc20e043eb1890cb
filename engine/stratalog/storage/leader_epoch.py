"""The leader-epoch cache of a partition and its ``leader-epoch-checkpoint``.

Kafka's ``LeaderEpochFileCache``: epoch → first offset written in that epoch.
A standalone engine is always leader of epoch 0, but the cache is kept exactly
as Kafka keeps it so that Kafka can open our directories, and so that the later
replication work (follower truncation by epoch) has its foundation.
"""

from __future__ import annotations

from pathlib import Path

from stratalog.storage.checkpoint import LeaderEpochCheckpointFile
from stratalog.common.names import LEADER_EPOCH_CHECKPOINT


class LeaderEpochCache:
    def __init__(self, partition_dir: Path) -> None:
        self._file = LeaderEpochCheckpointFile(partition_dir / LEADER_EPOCH_CHECKPOINT)
        self._entries: list[tuple[int, int]] = self._file.read()

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest(self) -> tuple[int, int] | None:
        """The last (epoch, start offset), or None."""
        return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset`` (the latest at or before it); -1 if none is known."""
        epoch = -1
        for entry_epoch, start in self._entries:
            if start > offset:
                break
            epoch = entry_epoch
        return epoch

    def would_change(self, epoch: int, start_offset: int) -> bool:
        """Whether ``assign(epoch, start_offset)`` would change the cache (and write its file)."""
        if epoch < 0:
            return False
        entries = self._entries   # every leader append asks: the list read once, no property call
        return not entries or entries[-1][0] != epoch or start_offset < entries[-1][1]

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a no-op if it is already known)."""
        if not self.would_change(epoch, start_offset):
            return
        self._replace([*[(e, o) for e, o in self._entries if e < epoch and o < start_offset], (epoch, start_offset)])

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below ``start_offset``; the last dropped one restarts at it."""
        below = [(e, o) for e, o in self._entries if o <= start_offset]
        if not below:
            return
        kept = [(e, o) for e, o in self._entries if o > start_offset]
        kept.insert(0, (below[-1][0], start_offset))
        if kept != self._entries:
            self._replace(kept)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int] | None:
        """(largest epoch ≤ ``epoch``, its end offset), as Kafka's ``endOffsetFor``; None if undefined."""
        if not self._entries:
            return None
        if epoch == self._entries[-1][0]:
            return epoch, log_end_offset
        if epoch < self._entries[0][0]:
            return epoch, self._entries[0][1]
        for index, (e, _) in enumerate(self._entries):
            if e > epoch:
                previous_epoch = self._entries[index - 1][0]
                return previous_epoch, self._entries[index][1]
        return None

    def clear(self) -> None:
        if self._entries:
            self._replace([])

    def _replace(self, entries: list[tuple[int, int]]) -> None:
        """The cache becomes ``entries``, in memory and in its checkpoint file."""
        self._entries = entries
        self._file.write(entries)

    def rebind(self, partition_dir: Path) -> None:
        """The partition directory moved (deletion rename): write there from now on."""
        self._file = LeaderEpochCheckpointFile(partition_dir / LEADER_EPOCH_CHECKPOINT)
