"""Reconcile one Topic: its effective name, conflicts, and the replica assignment in its status.

Pure in its decisions (:func:`plan_topic` needs only the Topic, its namespace's Topics and
LogDirs), with one write at the end: a server-side apply of the controller's part of the
status, skipped when the status already says it. The agents read ``status.assignment``
to know what to hold; they report their figures under ``status.logDirs`` with their own
field managers, which this write never touches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stratalog.common.errors import StratalogError
from stratalog.common.names import validate_topic_name

from ..assignment import AssignmentPlan, parse_assignment, plan_assignment, render_assignment
from ..conditions import Condition, merge_conditions, now_rfc3339
from ..kube import Kube
from ..names import AGENT_FINALIZER_PREFIX, agent_finalizer, is_paused, is_unmanaged
from ..outcome import Outcome
from ..properties import topic_overrides
from ..selectors import SelectorError, matches
from ..status import apply_status
from .logdirs import CONTROLLER_MANAGER

__all__ = ["TopicPlan", "plan_topic", "reconcile_topic", "effective_name", "conflict_winner",
           "placement_condition"]

Json = dict[str, Any]
_CONTROLLER_CONDITIONS = {"Ready", "ResourceConflict", "ReconciliationPaused", "PartitionsPlaced"}


def effective_name(topic: Mapping[str, Any]) -> str:
    return str((topic.get("spec") or {}).get("topicName") or topic["metadata"]["name"])


def _age_key(topic: Mapping[str, Any]) -> tuple[str, str]:
    meta = topic["metadata"]
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name")))


def conflict_winner(topic: Mapping[str, Any], peers: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The older Topic naming the same Kafka topic, if ``topic`` is not the oldest (else None).

    Kafka treats '.' and '_' as the same in metric names and refuses such pairs, so they
    conflict too. Topics being deleted or unmanaged still hold their name: their data may
    still be on disk under it.
    """
    name = effective_name(topic).replace(".", "_")
    rivals = [p for p in peers if p["metadata"]["uid"] != topic["metadata"]["uid"]
              and effective_name(p).replace(".", "_") == name]
    older = [p for p in rivals if _age_key(p) < _age_key(topic)]
    return min(older, key=_age_key) if older else None


def placement_condition(assignment: Sequence[Mapping[str, Any]], reports: Mapping[str, Any]) -> Condition:
    """``PartitionsPlaced``: whether each LogDir's agent reports every partition assigned to it.

    Ready says the controller's part is done (a valid assignment); this says the data is
    there, from the agents' own entries under ``status.logDirs`` (``kubectl wait
    --for=condition=PartitionsPlaced`` waits for both).
    """
    if not assignment:
        return Condition("PartitionsPlaced", False, "NotAssigned", "no partition is assigned")
    missing: dict[str, list[int]] = {}
    for entry in assignment:
        for logdir in entry["logDirs"]:
            held = ((reports.get(logdir) or {}).get("partitions") or {})
            if str(entry["partition"]) not in held:
                missing.setdefault(logdir, []).append(int(entry["partition"]))
    if missing:
        waiting = "; ".join(f"{d}: {ps}" for d, ps in sorted(missing.items()))
        return Condition("PartitionsPlaced", False, "WaitingForAgents",
                         f"not yet reported by their LogDir's agent: {waiting}")
    replicas = sum(len(e["logDirs"]) for e in assignment)
    return Condition("PartitionsPlaced", True, "AllPlaced",
                     f"all {replicas} partition replica{'s' if replicas != 1 else ''} are held by their LogDirs")


@dataclass(frozen=True)
class TopicPlan:
    fragment: Json
    conditions: list[Condition]
    assignment: AssignmentPlan | None


def plan_topic(topic: Mapping[str, Any], peers: Iterable[Mapping[str, Any]],
               logdirs: Iterable[Mapping[str, Any]], *, now: str) -> TopicPlan:
    meta, spec = topic["metadata"], topic.get("spec") or {}
    status = topic.get("status") or {}
    generation = meta.get("generation")
    name = effective_name(topic)
    current = parse_assignment(status.get("assignment"))
    conditions = [Condition("ReconciliationPaused", False, "NotPaused", "")]
    plan: AssignmentPlan | None = None
    assignment: list[Json] = render_assignment(current)

    problem: tuple[str, str] | None = None
    try:
        validate_topic_name(name)
    except StratalogError as error:
        where = "spec.topicName" if spec.get("topicName") else "metadata.name"
        problem = ("InvalidTopicName", f"{where}: {error}")
    else:
        try:
            topic_overrides(spec.get("config"))
        except StratalogError as error:   # its message already names spec.config.<key>
            problem = ("InvalidConfig", str(error))
    winner = conflict_winner(topic, peers) if problem is None else None
    if winner is not None:
        conditions.append(Condition("ResourceConflict", True, "TopicNameInUse",
                                    f"Topic {winner['metadata']['name']} (older) already manages Kafka topic "
                                    f"{effective_name(winner)!r}; this Topic is ignored until that one is gone"))
        conditions.append(Condition("Ready", False, "ResourceConflict",
                                    f"Kafka topic {name!r} is managed by Topic {winner['metadata']['name']}"))
        assignment = []
    else:
        conditions.append(Condition("ResourceConflict", False, "NoConflict", ""))
        if problem is not None:
            conditions.append(Condition("Ready", False, *problem))
        else:
            try:
                selected = [d["metadata"]["name"] for d in logdirs
                            if not d["metadata"].get("deletionTimestamp") and not is_unmanaged(d["metadata"])
                            and matches(spec.get("logDirSelector"), d["metadata"].get("labels"))]
            except SelectorError as error:
                conditions.append(Condition("Ready", False, "InvalidSelector", str(error)))
            else:
                plan = plan_assignment(int(spec["partitions"]), int(spec.get("replicas") or 1), selected, current)
                assignment = render_assignment(plan.assignment)
                if plan.satisfiable:
                    conditions.append(Condition("Ready", True, plan.reason, plan.message))
                else:
                    conditions.append(Condition("Ready", False, plan.reason, plan.message))
    conditions.append(placement_condition(assignment, status.get("logDirs") or {}))
    fragment: Json = {
        "observedGeneration": generation,
        "topicName": name,
        "assignment": assignment,
        "conditions": merge_conditions(
            [c for c in status.get("conditions") or [] if c.get("type") in _CONTROLLER_CONDITIONS],
            conditions, generation=generation, now=now, keep_others=False),
    }
    return TopicPlan(fragment, conditions, plan)


def reconcile_topic(kube: Kube, topic: Mapping[str, Any], peers: Sequence[Mapping[str, Any]],
                    logdirs: Sequence[Mapping[str, Any]]) -> Outcome:
    outcome = Outcome()
    meta = topic["metadata"]
    if meta.get("deletionTimestamp"):
        # The agents' finalizers do the work. One whose LogDir is gone (an agent that added it
        # while its LogDir was being deleted) would block the deletion forever: release it.
        alive = {agent_finalizer(d["metadata"]["name"]) for d in logdirs}
        for finalizer in meta.get("finalizers") or []:
            if finalizer.startswith(AGENT_FINALIZER_PREFIX) and finalizer not in alive:
                if kube.remove_finalizer("Topic", topic, finalizer):
                    outcome.writes += 1
                    outcome.event(topic, "Normal", "FinalizerReleased",
                                  f"released {finalizer}: its LogDir no longer exists")
        outcome.result = "deleting"
        return outcome
    if is_unmanaged(meta):
        outcome.result = "unmanaged"
        return outcome
    status = topic.get("status") or {}
    now = now_rfc3339()
    if is_paused(meta):
        own = [c for c in status.get("conditions") or [] if c.get("type") in _CONTROLLER_CONDITIONS]
        fragment: Json = {k: status[k] for k in ("observedGeneration", "topicName", "assignment") if k in status}
        fragment["conditions"] = merge_conditions(
            own, [Condition("ReconciliationPaused", True, "Paused",
                            "stratalog.io/pause-reconciliation is set: the assignment is left as it is")],
            generation=None, now=now, keep_others=True)
        if apply_status(kube, topic, fragment, manager=CONTROLLER_MANAGER):
            outcome.writes += 1
        outcome.result = "paused"
        return outcome

    plan = plan_topic(topic, peers, logdirs, now=now)
    old_assignment = status.get("assignment") or []
    old_conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if apply_status(kube, topic, plan.fragment, manager=CONTROLLER_MANAGER):
        outcome.writes += 1
    else:
        outcome.result = "unchanged"
        return outcome
    for c in plan.conditions:
        before = old_conditions.get(c.type)
        flipped = before is None or before.get("status") != c.status_text or before.get("reason") != c.reason
        if c.type == "ResourceConflict" and c.status and flipped:
            outcome.event(topic, "Warning", "ResourceConflict", c.message)
        if c.type == "Ready" and not c.status and flipped and c.reason != "ResourceConflict":
            outcome.event(topic, "Warning", c.reason, c.message)
    if plan.fragment["assignment"] != old_assignment and plan.fragment["assignment"]:
        moved = plan.assignment.moved if plan.assignment else []
        parts = len(plan.fragment["assignment"])
        message = f"assigned {parts} partition{'s' if parts != 1 else ''}"
        if old_assignment:
            message += f" (had {len(old_assignment)})"
        if moved:
            message += f"; re-placed {moved} because their LogDirs are gone or replicas changed"
        outcome.event(topic, "Normal", "Assigned", message)
    return outcome
