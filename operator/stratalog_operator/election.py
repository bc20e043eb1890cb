"""Who leads each partition, decided from the agents' Leases, without I/O (Kafka's controller elections).

The controller reads every Topic's partition records and every LogDir agent's Lease, calls
``plan_leadership``, and writes back only the records that change, each by compare-and-swap on
the Topic's ``resourceVersion``. Keeping the decision a pure function makes every rule below a
plain unit test:

* A leader whose agent is gone (its Lease lapsed) or shutting down (controlled shutdown) hands
  over to the first replica, in assignment order, that is in the ISR and alive and staying. The
  old leader leaves the ISR; the leader epoch moves, which fences it (KIP-101, KIP-320).
* With no such replica the partition goes offline (no leader, ISR kept as the record of who
  has everything), unless ``unclean.leader.election.enable`` lets the first alive replica lead
  with an ISR of itself, at the price of what only the ISR had.
* An offline partition gets a leader again as soon as an ISR member is alive.
* A follower whose agent is gone or shutting down leaves the ISR (the leader stays), so
  ``acks=all`` does not wait for it; it rejoins through the leader's ISR expansion once it has
  caught up.
* An agent that has just restarted (``restarted``) is treated as shutting down until its records
  show it leads nothing and sits in no ISR: it may have lost its unflushed tail, and must not lead
  again at a leader epoch it held before (followers would truncate to its shorter log).
* Preferred leaders: leadership returns to the first replica of the assignment once it is alive
  and in the ISR (``auto.leader.rebalance.enable``).

Every change moves the partition epoch; a leader change also moves the leader epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["PartitionRecord", "Election", "plan_leadership", "records_of", "render_records"]


@dataclass(frozen=True)
class PartitionRecord:
    """One partition's replication state as the Topic's status keeps it (KRaft's PartitionRecord)."""

    partition: int
    replicas: tuple[str, ...]      # LogDir names, preferred leader first
    leader: str | None             # None: offline
    leader_epoch: int
    isr: tuple[str, ...]
    partition_epoch: int
    adding: tuple[str, ...] = ()     # while it moves (KIP-455): replicas catching up to join
    removing: tuple[str, ...] = ()   # while it moves: replicas leaving once the new ones are in sync


# The record's JSON form in the Topic's status.partitions (parsed and written by the controller and the
# leader's agent alike).
def records_of(topic: Mapping[str, Any]) -> dict[int, PartitionRecord]:
    out = {}
    for entry in (topic.get("status") or {}).get("partitions") or []:
        try:
            out[int(entry["partition"])] = PartitionRecord(
                int(entry["partition"]), tuple(entry["replicas"]), entry.get("leader"), int(entry["leaderEpoch"]),
                tuple(entry["isr"]), int(entry["partitionEpoch"]), tuple(entry.get("addingReplicas") or ()),
                tuple(entry.get("removingReplicas") or ()))
        except (KeyError, TypeError, ValueError):
            continue  # a malformed entry is rewritten from the assignment
    return out


def render_records(records: Mapping[int, PartitionRecord]) -> list[dict[str, Any]]:
    out = []
    for _, r in sorted(records.items()):
        entry: dict[str, Any] = {"partition": r.partition, "replicas": list(r.replicas), "leader": r.leader,
                       "leaderEpoch": r.leader_epoch, "isr": list(r.isr), "partitionEpoch": r.partition_epoch}
        if r.adding or r.removing:
            entry.update(addingReplicas=list(r.adding), removingReplicas=list(r.removing))
        out.append(entry)
    return out


@dataclass(frozen=True)
class Election:
    """A change the controller should write, and why (for the Topic's events)."""

    before: PartitionRecord
    after: PartitionRecord
    reason: str   # LeaderLost, ControlledShutdown, LeaderRestarted, Unclean, Offline, Online, IsrShrink,
    #               PreferredLeader, ReassignmentStarted, Reassigned (reassignment.py)


def _ordered(replicas: tuple[str, ...], members: Iterable[str]) -> tuple[str, ...]:
    chosen = set(members)
    return tuple(r for r in replicas if r in chosen)


def _bump(record: PartitionRecord, *, leader: str | None, isr: Iterable[str], new_leader_epoch: bool) -> PartitionRecord:
    return replace(record, leader=leader, isr=_ordered(record.replicas, isr),
                   leader_epoch=record.leader_epoch + (1 if new_leader_epoch else 0),
                   partition_epoch=record.partition_epoch + 1)


def _plan_one(record: PartitionRecord, alive: Set[str], leaving: Set[str], restarted: Set[str], unclean: bool,
              rebalance: bool) -> Election | None:
    leaving = set(leaving) | set(restarted)   # a restarted agent hands over as a leaving one does
    usable = {r for r in record.replicas if r in alive and r not in leaving}
    leader = record.leader
    if leader is not None and leader in usable:
        lost = [r for r in record.isr if r != leader and (r not in alive or r in leaving)]
        if lost:
            after = _bump(record, leader=leader, isr=[r for r in record.isr if r not in lost], new_leader_epoch=False)
            return Election(record, after, "IsrShrink")
        preferred = record.replicas[0]
        if rebalance and leader != preferred and preferred in usable and preferred in record.isr:
            return Election(record, _bump(record, leader=preferred, isr=record.isr, new_leader_epoch=True),
                            "PreferredLeader")
        return None
    # The leader is gone, leaving, or there is none: the next ISR member that can lead.
    candidates = [r for r in record.replicas if r in record.isr and r in usable]
    if candidates:
        isr = [r for r in record.isr if r in alive]   # a leaving leader is out of the ISR too
        isr = [r for r in isr if r not in leaving or r == candidates[0]]
        reason = ("Online" if leader is None else "LeaderRestarted" if leader in restarted
                  else "ControlledShutdown" if leader in leaving else "LeaderLost")
        return Election(record, _bump(record, leader=candidates[0], isr=isr, new_leader_epoch=True), reason)
    if unclean:
        outsiders = [r for r in record.replicas if r in usable]
        if outsiders:
            return Election(record, _bump(record, leader=outsiders[0], isr=[outsiders[0]], new_leader_epoch=True),
                            "Unclean")
    if leader is None:
        return None  # already offline, nothing new
    return Election(record, _bump(record, leader=None, isr=record.isr, new_leader_epoch=True), "Offline")


def plan_leadership(records: Iterable[PartitionRecord], alive: Set[str], *, leaving: Set[str] = frozenset(),
                    restarted: Set[str] = frozenset(), unclean: bool = False,
                    rebalance: bool = True) -> list[Election]:
    """The changes to make now, given which agents hold a live Lease (``alive``), which are
    shutting down (``leaving``: alive, but handing their leaderships over first) and which have
    just restarted (``restarted``: handled as leaving, under a reason of their own)."""
    changes = []
    for record in records:
        election = _plan_one(record, alive, leaving, restarted, unclean, rebalance)
        if election is not None:
            changes.append(election)
    return changes
