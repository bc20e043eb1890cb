"""Replicas of one partition in one process: real logs, the in-process controller, fetches by call.

Kafka's PartitionTest style: the transport is not the subject, so a fetch round is a direct call
from the follower's ``Partition`` to the leader's and back.
"""

from __future__ import annotations

from pathlib import Path

from conftest import Clock
from stratalog.broker.controller import InProcessController
from stratalog.broker.partition import Partition
from stratalog.common.config import LogConfig
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log

TP = TopicPartition("t", 0)
LAG_MS = 30_000


class Cluster:
    """Replicas 0, 1, 2 (as many as asked) of one partition, each its own log directory."""

    def __init__(self, root: Path, clock: Clock, replicas: int = 2, **config: object) -> None:
        self.root = root
        self.clock = clock
        self.config = LogConfig.from_overrides({k.replace("_", "."): v for k, v in config.items()})
        self.controller = InProcessController()
        self.partitions = {r: self._open(r) for r in range(replicas)}
        self.controller.subscribe(lambda tp, state: [p.apply_state(state) for p in self.partitions.values()])
        self.controller.create(TP, tuple(range(replicas)))

    def _open(self, replica: int, high_watermark: int | None = None) -> Partition:
        directory = self.root / f"broker-{replica}" / "t-0"
        directory.mkdir(parents=True, exist_ok=True)
        log, _ = load_log(directory, TP, self.config, clock=self.clock)
        return Partition(log, replica, self.controller, clock=self.clock, replica_lag_time_max_ms=LAG_MS,
                         high_watermark=high_watermark)

    def restart(self, replica: int) -> Partition:
        """The replica's process dies and comes back: its log reopened, its HW from the checkpoint."""
        old = self.partitions[replica]
        hw = old.log.high_watermark
        old.log.close()
        partition = self.partitions[replica] = self._open(replica, high_watermark=hw)
        partition.apply_state(self.controller.state(TP))
        return partition

    def log(self, replica: int) -> Log:
        return self.partitions[replica].log

    def produce(self, leader: int, *values: bytes, acks: int = -1) -> int:
        infos = self.partitions[leader].append_as_leader(
            [build_batch([Record(0, self.clock.now, b"k", v)]) for v in values], required_acks=acks)
        return infos[-1].last_offset

    def fetch(self, follower: int, leader: int) -> None:
        """One fetch round of ``follower``: request, the leader's answer, the follower applies it."""
        f = self.partitions[follower]
        fetch = f.next_fetch(1 << 20)
        f.apply_fetch(fetch, self.partitions[leader].fetch_for_follower(fetch))

    def values(self, replica: int) -> list[bytes | None]:
        log = self.log(replica)
        return [r.value for r in log.read_records(log.log_start_offset)] if log.high_watermark else []


def offsets(log: Log) -> tuple[int, int]:
    return log.log_end_offset, log.high_watermark
