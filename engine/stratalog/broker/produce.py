"""Appending a produce request's batches: acks, all-or-nothing across partitions, the result.

Kafka's ``ReplicaManager.appendRecords`` for a broker that is the only replica of each
partition. ``acks=1`` answers once the batches are in the page cache; ``acks=all`` (``-1``)
answers after fsync, the strongest promise a single copy can make (replication will make it
"the in-sync replicas have it"). ``acks=0`` needs a transport that can leave a request
unanswered, so it is the transport's to offer.

A request is refused whole: every batch of every partition is validated before the first
is written (``Log.prepare_append``), so a refused request leaves every log as it was.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stratalog.common.errors import InvalidRequiredAcksError
from stratalog.storage.log import Log
from stratalog.storage.log_results import AppendInfo, PreparedAppend


class Acks(enum.Enum):
    LEADER = "1"   # in the leader's log (page cache)
    ALL = "all"    # in every in-sync replica's log; fsynced where this engine holds the only copy

    @classmethod
    def parse(cls, text: str | None, where: str) -> Acks:
        if text is None or text == "1":
            return cls.LEADER
        if text in ("all", "-1"):
            return cls.ALL
        raise InvalidRequiredAcksError(f"{where}: {text!r} is not 1, all or -1")


@dataclass(slots=True)   # not frozen: made for every produce, and a frozen one sets each field through object.__setattr__
class ProduceResult:
    """What a producer learns about one partition's append (Kafka's PartitionProduceResponse)."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    batches: int
    size: int
    log_start_offset: int

    @staticmethod
    def of(infos: Sequence[AppendInfo], log_start_offset: int) -> ProduceResult:
        if len(infos) == 1:   # most produces: one batch, no sums over generators
            info = infos[0]
            return ProduceResult(info.first_offset, info.last_offset, info.log_append_time, info.record_count, 1,
                                 info.size, log_start_offset)
        return ProduceResult(infos[0].first_offset, infos[-1].last_offset, infos[-1].log_append_time,
                             sum(i.record_count for i in infos), len(infos), sum(i.size for i in infos),
                             log_start_offset)


def append_to_log(log: Log, batches: Sequence[bytes | bytearray], acks: Acks, now_ms: int) -> ProduceResult:
    """One partition's batches, contiguous, all or none (blocking: run it off the event loop)."""
    infos = log.append_batches(batches, now_ms=now_ms)
    if acks is Acks.ALL:
        log.flush()
    return ProduceResult.of(infos, log.log_start_offset)


def try_append_to_log(log: Log, batches: Sequence[bytes | bytearray], acks: Acks, now_ms: int
                      ) -> ProduceResult | None:
    """``append_to_log`` for an event loop: None and nothing appended when it would block (acks=all
    fsyncs; ``Log.try_append`` says when an acks=1 append would)."""
    if acks is not Acks.LEADER:
        return None
    infos = log.try_append(batches, now_ms=now_ms)
    return None if infos is None else ProduceResult.of(infos, log.log_start_offset)


def append_to_logs(batches: Mapping[Log, Sequence[bytes | bytearray]], acks: Acks, now_ms: int
                   ) -> dict[Log, ProduceResult]:
    """Several partitions' batches: every one validated before any is written."""
    prepared: list[PreparedAppend] = [log.prepare_append(b, now_ms=now_ms) for log, b in batches.items()]
    results = {}
    for p in prepared:
        infos = p.log.append_prepared(p)
        if acks is Acks.ALL:
            p.log.flush()
        results[p.log] = ProduceResult.of(infos, p.log.log_start_offset)
    return results
