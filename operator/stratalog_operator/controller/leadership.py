"""Elections through the API server: each Topic's partition records, written by compare-and-swap.

Where the records live: in the Topic's own status (``status.partitions``), one object per topic.
An object per partition would multiply watch traffic and objects (200 Topics × 3 partitions is
600 more) for no gain: a Topic's partitions change together rarely, and a conflict costs one
re-read. Every write carries the ``resourceVersion`` it was computed from, so the API server
refuses it (409) if anything changed the Topic since; the controller then re-reads and decides
again. The agents' own status writes (figures, by server-side apply) touch other fields and
never conflict with these, but they do move ``resourceVersion``, so a conflict here is retried a
few times before the next tick takes over.

Liveness comes from the agents' Leases (``leases.alive_logdirs``); the decision itself is
``election.plan_leadership``. A partition that has no record yet gets one from its assignment:
the preferred replica leads epoch 0 and every assigned replica is in sync (an empty log).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set
from datetime import datetime
from typing import Any

from ..election import Election, PartitionRecord, plan_leadership, records_of, render_records
from ..reassignment import plan_reassignments, targets
from ..kube import ApiError, Kube

__all__ = ["initial_records", "elect_topic", "post_election_event", "CAS_ATTEMPTS"]

logger = logging.getLogger(__name__)

CAS_ATTEMPTS = 5
Json = dict[str, Any]


def initial_records(assignment: Sequence[Mapping[str, Any]], existing: Mapping[int, PartitionRecord]
                    ) -> dict[int, PartitionRecord]:
    """Records for assigned partitions that have none yet (existing ones move by ``reassignment``)."""
    out = {}
    for entry in assignment:
        partition, logdirs = entry.get("partition"), entry.get("logDirs")
        if isinstance(partition, int) and isinstance(logdirs, list) and logdirs and partition not in existing:
            replicas = tuple(str(d) for d in logdirs)
            out[partition] = PartitionRecord(partition, replicas, replicas[0], 0, replicas, 0)
    return out


def _unclean(topic: Mapping[str, Any]) -> bool:
    config = (topic.get("spec") or {}).get("config") or {}
    return str(config.get("unclean.leader.election.enable", "false")).lower() == "true"


def elect_topic(kube: Kube, topic: Mapping[str, Any], alive: Set[str], *,
                leaving: Set[str] = frozenset(), restarted: Set[str] = frozenset()) -> list[Election]:
    """Decide and write one Topic's leaderships; the elections made (empty when nothing changed)."""
    body: Mapping[str, Any] | None = topic
    meta = topic["metadata"]
    fresh = False
    for _ in range(CAS_ATTEMPTS + 1):
        if body is None:
            return []
        records = records_of(body)
        assignment = (body.get("status") or {}).get("assignment") or []
        created = initial_records(assignment, records)
        records.update(created)
        # Moves first (they may drop a leader), then elections over the records as moved.
        changes = plan_reassignments(records.values(), targets(assignment))
        for change in changes:
            records[change.after.partition] = change.after
        elections = plan_leadership(records.values(), alive, leaving=leaving, restarted=restarted,
                                    unclean=_unclean(body))
        for change in elections:
            records[change.after.partition] = change.after
        changes += elections
        if not changes and not created:
            return []
        if not fresh:
            # Decided on the watch's copy, which the agents' status reports keep outdating: decide
            # again on the current object, so the compare-and-swap below rarely loses (no 409 storm).
            body, fresh = kube.get("Topic", meta["namespace"], meta["name"]), True
            continue
        patch = {"metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
                 "status": {"partitions": render_records(records),
                            "underReplicatedPartitions": sum(len(r.isr) < len(r.replicas) for r in records.values()),
                            "offlinePartitions": sum(r.leader is None for r in records.values())}}
        try:
            kube.patch("Topic", meta["namespace"], meta["name"], patch, subresource="status")
        except ApiError as error:
            if error.status == 404:
                return []
            if error.status != 409:
                raise
            body = kube.get("Topic", meta["namespace"], meta["name"])  # changed since: decide again
            continue
        for change in changes:
            logger.info("Topic %s/%s partition %d: %s, leader %s → %s (epoch %d), ISR %s", meta["namespace"],
                        meta["name"], change.after.partition, change.reason, change.before.leader,
                        change.after.leader, change.after.leader_epoch, list(change.after.isr))
        return changes
    logger.warning("Topic %s/%s: partition records still conflicting after %d attempts; next tick",
                   meta["namespace"], meta["name"], CAS_ATTEMPTS)
    return []


def post_election_event(kube: Kube, topic: Mapping[str, Any], election: Election, now: datetime) -> None:
    """An Event on the Topic for one election (best effort: a failure is logged, never raised)."""
    meta = topic["metadata"]
    after, before = election.after, election.before
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": topic.get("apiVersion"), "kind": topic.get("kind", "Topic"),
                           "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid")},
        "type": "Warning" if election.reason in ("Offline", "Unclean") else "Normal",
        "reason": election.reason,
        "message": (f"partition {after.partition}: replicas [{', '.join(before.replicas)}] → "
                    f"[{', '.join(after.replicas)}]"
                    + (f" (adding [{', '.join(after.adding)}], removing [{', '.join(after.removing)}])"
                       if after.adding or after.removing else "")
                    + f", leader {after.leader or 'none'} (leader epoch {after.leader_epoch})"
                    if election.reason.startswith("Reassign") else
                    f"partition {after.partition}: leader {before.leader or 'none'} → {after.leader or 'none'} "
                    f"(leader epoch {after.leader_epoch}), ISR [{', '.join(after.isr)}]"),
        "source": {"component": "stratalog-operator"}, "reportingComponent": "stratalog-operator",
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }
    try:
        kube.create("Event", meta["namespace"], body)
    except Exception as error:  # noqa: BLE001 - an event is best effort
        logger.warning("cannot post the %s event of %s/%s: %s", election.reason, meta["namespace"], meta["name"],
                       error)
