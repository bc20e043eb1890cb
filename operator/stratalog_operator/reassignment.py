"""Moving a partition between LogDirs without losing a record (KIP-455), as a pure plan.

The assignment says where a partition should live; its record says where it lives now. When they
differ, the controller never swaps one set of replicas for the other in one step, which would
leave the new replicas empty and the data only on replicas about to be deleted. Instead:

1. *Start*: the record's replicas become the target followed by the replicas leaving
   (``addingReplicas``, ``removingReplicas`` say which). The new replicas' agents now see
   themselves in the record, create the partition and follow the leader; the leader takes them
   into the ISR once they have caught up, as any follower.
2. *Finish*, once every target replica is in the ISR: the record's replicas become the target,
   the leaving replicas leave the ISR, and if the leader is leaving, the first in-sync target
   replica leads at the next leader epoch. Only now may a leaving LogDir's agent delete its copy
   (it refuses while a record still lists it).

A move whose new replicas never catch up (their agents are down) waits, as Kafka's does; the
partition keeps every replica it had meanwhile. A change of order only (a new preferred leader)
is written at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .election import Election, PartitionRecord

__all__ = ["plan_reassignment", "plan_reassignments", "targets"]


def targets(assignment: Sequence[Mapping[str, Any]]) -> dict[int, tuple[str, ...]]:
    """The assignment's LogDirs per partition, as the Topic's status lists them."""
    out = {}
    for entry in assignment:
        partition, logdirs = entry.get("partition"), entry.get("logDirs")
        if isinstance(partition, int) and isinstance(logdirs, list) and logdirs:
            out[partition] = tuple(str(d) for d in logdirs)
    return out


def plan_reassignment(record: PartitionRecord, target: tuple[str, ...]) -> Election | None:
    moving = bool(record.adding or record.removing)
    if record.replicas == target and not moving:
        return None
    wanted, have = set(target), set(record.replicas)
    if not wanted <= have:
        original = [r for r in record.replicas if r not in record.adding]
        after = replace(record, replicas=target + tuple(r for r in record.replicas if r not in wanted),
                        adding=tuple(r for r in target if r not in original),
                        removing=tuple(r for r in record.replicas if r not in wanted),
                        partition_epoch=record.partition_epoch + 1)
        return Election(record, after, "ReassignmentStarted")
    if not wanted <= set(record.isr):
        return None   # the new replicas are still catching up
    isr = tuple(r for r in target if r in record.isr)
    leader, leader_epoch = record.leader, record.leader_epoch
    if leader is not None and leader not in wanted:
        leader, leader_epoch = isr[0], leader_epoch + 1
    after = replace(record, replicas=target, isr=isr, leader=leader, leader_epoch=leader_epoch, adding=(), removing=(),
                    partition_epoch=record.partition_epoch + 1)
    return Election(record, after, "Reassigned")


def plan_reassignments(records: Iterable[PartitionRecord], wanted: Mapping[int, tuple[str, ...]]) -> list[Election]:
    changes = []
    for record in records:
        target = wanted.get(record.partition)
        change = plan_reassignment(record, target) if target else None
        if change is not None:
            changes.append(change)
    return changes
