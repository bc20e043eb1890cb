"""Reconcile one LogDir: its PVCs, ConfigMap, Service and StatefulSet, its finalizer and status.

Plan, then apply: :func:`~stratalog_operator.children.desired_children` says what should
exist; this module compares with what does (``is_subset``, so API-server defaults are not
differences) and writes only what differs. Every object has a fixed name derived from the
LogDir, so a controller killed between two writes and restarted finds what it made and
never makes a second copy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from stratalog.common.errors import InvalidConfigError

from ..children import AgentOptions, desired_children, owner_reference
from ..conditions import Condition, merge_conditions, now_rfc3339
from ..kube import ApiError, Kube, is_subset, quantity
from ..names import CONTROLLER_FINALIZER, agent_finalizer, agent_timer_finalizer, is_paused, is_unmanaged
from ..outcome import Outcome
from ..status import apply_status

__all__ = ["reconcile_logdir", "CONTROLLER_MANAGER"]

logger = logging.getLogger(__name__)

CONTROLLER_MANAGER = "stratalog-operator"
Json = dict[str, Any]


def _ensure(kube: Kube, kind: str, namespace: str, desired: Json, owner: Mapping[str, Any],
            outcome: Outcome) -> Json:
    name = desired["metadata"]["name"]
    actual = kube.get(kind, namespace, name)
    if actual is None:
        try:
            created = kube.create(kind, namespace, desired)
        except ApiError as error:
            if error.status != 409:
                raise
            actual = kube.get(kind, namespace, name)   # raced with ourselves before a restart
            assert actual is not None
        else:
            outcome.writes += 1
            outcome.event(owner, "Normal", "Created", f"created {kind} {name}")
            return created
    if not is_subset(desired, actual):
        patched = kube.patch(kind, namespace, name, desired, type="merge")
        outcome.writes += 1
        outcome.event(owner, "Normal", "Updated", f"updated {kind} {name} to match the LogDir spec")
        return patched
    return actual


def _storage(claim: Mapping[str, Any], where: str) -> int | None:
    value = ((claim.get(where) or {}).get("resources" if where == "spec" else "capacity") or {})
    if where == "spec":
        value = value.get("requests") or {}
    text = value.get("storage")
    return None if text is None else int(quantity(text))


def _ensure_claim(kube: Kube, namespace: str, desired: Json, logdir: Mapping[str, Any],
                  outcome: Outcome) -> tuple[Json, str | None]:
    """Create the PVC, or grow it; returns the claim and a resize problem, if any."""
    name = desired["metadata"]["name"]
    actual = kube.get("PersistentVolumeClaim", namespace, name)
    if actual is None:
        body = dict(desired)
        body["metadata"] = {k: v for k, v in desired["metadata"].items() if v != []}
        try:
            actual = kube.create("PersistentVolumeClaim", namespace, body)
            outcome.writes += 1
            outcome.event(logdir, "Normal", "Created",
                          f"created PersistentVolumeClaim {name} ({desired['spec']['resources']['requests']['storage']})")
            return actual, None
        except ApiError as error:
            if error.status != 409:
                raise
            actual = kube.get("PersistentVolumeClaim", namespace, name)
            assert actual is not None
    problem = None
    want = int(quantity(desired["spec"]["resources"]["requests"]["storage"]))
    have = _storage(actual, "spec") or 0
    if want > have:
        try:
            actual = kube.patch("PersistentVolumeClaim", namespace, name,
                                {"spec": {"resources": {"requests": {"storage": desired["spec"]["resources"]
                                                                     ["requests"]["storage"]}}}})
            outcome.writes += 1
            outcome.event(logdir, "Normal", "Resizing",
                          f"requested {desired['spec']['resources']['requests']['storage']} for "
                          f"PersistentVolumeClaim {name}")
        except ApiError as error:
            if error.status not in (403, 422):
                raise
            problem = f"{name}: {error.message}"
            # Said once per refusal, not on every reconcile while the condition stands.
            resizing: Mapping[str, Any] = next((c for c in (logdir.get("status") or {}).get("conditions") or []
                             if c.get("type") == "StorageResizing"), {})
            if resizing.get("reason") != "ResizeRefused" or name not in str(resizing.get("message")):
                outcome.event(logdir, "Warning", "ResizeRefused", f"cannot grow {name}: {error.message}")
    # deleteClaim may be switched either way: the owner reference follows it.
    refs = [r for r in actual["metadata"].get("ownerReferences") or []]
    ours = [r for r in refs if r.get("uid") == logdir["metadata"]["uid"]]
    wanted = desired["metadata"].get("ownerReferences") or []
    if bool(wanted) != bool(ours):
        others = [r for r in refs if r.get("uid") != logdir["metadata"]["uid"]]
        actual = kube.patch("PersistentVolumeClaim", namespace, name,
                            {"metadata": {"ownerReferences": others + list(wanted)}})
        outcome.writes += 1
    return actual, problem


def _delete_children(kube: Kube, body: Mapping[str, Any], options: AgentOptions, outcome: Outcome,
                     topics: list[Json]) -> None:
    meta, spec = body["metadata"], body.get("spec") or {}
    namespace = meta["namespace"]
    try:
        children = desired_children(body, options)
    except InvalidConfigError:
        children = None
    names = []
    if children is not None:
        names = [("StatefulSet", children.statefulset), ("Service", children.service),
                 ("ConfigMap", children.configmap)]
    for kind, child in names:
        if kube.delete(kind, namespace, child["metadata"]["name"]):
            outcome.writes += 1
    if spec.get("deleteClaim"):
        for claim in (children.claims if children else []):
            if kube.delete("PersistentVolumeClaim", namespace, claim["metadata"]["name"]):
                outcome.writes += 1
                outcome.event(body, "Normal", "Deleted",
                              f"deleted PersistentVolumeClaim {claim['metadata']['name']} (deleteClaim)")
    # The agent is gone with its pod: its finalizers on Topics would block their deletion forever.
    finalizer = agent_finalizer(meta["name"])
    for topic in topics:
        if finalizer in (topic["metadata"].get("finalizers") or []):
            if kube.remove_finalizer("Topic", topic, finalizer):
                outcome.writes += 1
    kept = "" if spec.get("deleteClaim") else "; PersistentVolumeClaims kept (deleteClaim: false)"
    outcome.event(body, "Normal", "Deleted", f"deleted the LogDir's StatefulSet, Service and ConfigMap{kept}")


def reconcile_logdir(kube: Kube, body: Mapping[str, Any], options: AgentOptions, *,
                     topics: list[Json] | None = None) -> Outcome:
    """Bring one LogDir's children and status in line with its spec (idempotent)."""
    outcome = Outcome()
    meta = body["metadata"]
    namespace, generation = meta["namespace"], meta.get("generation")
    finalizers = meta.get("finalizers") or []

    if meta.get("deletionTimestamp"):
        if CONTROLLER_FINALIZER in finalizers:
            if not is_unmanaged(meta):
                _delete_children(kube, body, options, outcome, topics or [])
            # The agent's kopf finalizer (its timers) would outlive the agent's pod, deleted above.
            timers = agent_timer_finalizer(meta["name"])
            if timers in finalizers and kube.remove_finalizer("LogDir", body, timers):
                outcome.writes += 1
                body = kube.get("LogDir", namespace, meta["name"]) or body
            if kube.remove_finalizer("LogDir", body, CONTROLLER_FINALIZER):
                outcome.writes += 1
        outcome.result = "deleted"
        return outcome
    if is_unmanaged(meta):
        outcome.result = "unmanaged"
        return outcome
    now = now_rfc3339()
    status = body.get("status") or {}
    if is_paused(meta):
        # Everything stays as it is, the controller's status included; only the condition says why.
        wanted = [Condition("ReconciliationPaused", True, "Paused",
                            "stratalog.io/pause-reconciliation is set: the operator changes nothing")]
        fragment: Json = {"conditions": merge_conditions(_own(status), wanted, generation=None, now=now,
                                                         keep_others=True)}
        if status.get("observedGeneration") is not None:
            fragment["observedGeneration"] = status["observedGeneration"]
        kept = [{k: v for k, v in entry.items() if k in ("name", "claimName", "capacity")}
                for entry in status.get("volumes") or []]
        if kept:
            fragment["volumes"] = kept
        if apply_status(kube, body, fragment, manager=CONTROLLER_MANAGER):
            outcome.writes += 1
        outcome.result = "paused"
        return outcome

    if CONTROLLER_FINALIZER not in finalizers:
        if kube.add_finalizer("LogDir", body, CONTROLLER_FINALIZER):
            outcome.writes += 1

    conditions: list[Condition] = [Condition("ReconciliationPaused", False, "NotPaused", "")]
    volumes_status: list[Json] = []
    try:
        children = desired_children(body, options)
    except InvalidConfigError as error:
        conditions.append(Condition("Ready", False, "InvalidSettings", str(error)))
        outcome.event(body, "Warning", "InvalidSettings", str(error))
        children = None
    if children is not None:
        _ensure(kube, "ConfigMap", namespace, children.configmap, body, outcome)
        _ensure(kube, "Service", namespace, children.service, body, outcome)
        problems, resizing = [], []
        for desired, volume in zip(children.claims, (body.get("spec") or {}).get("volumes") or []):
            claim, problem = _ensure_claim(kube, namespace, desired, body, outcome)
            if problem:
                problems.append(problem)
            requested, capacity = _storage(claim, "spec"), _storage(claim, "status")
            entry: Json = {"name": volume["name"], "claimName": desired["metadata"]["name"]}
            cap_text = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
            if cap_text:
                entry["capacity"] = cap_text
            volumes_status.append(entry)
            if capacity is not None and requested is not None and capacity < requested:
                resizing.append(f"{desired['metadata']['name']}: {cap_text} of "
                                f"{claim['spec']['resources']['requests']['storage']}")
        if problems:
            conditions.append(Condition("StorageResizing", False, "ResizeRefused", "; ".join(problems)))
        elif resizing:
            conditions.append(Condition("StorageResizing", True, "Resizing", "; ".join(resizing)))
        else:
            conditions.append(Condition("StorageResizing", False, "NotResizing", "every claim has its size"))
        sts = _ensure(kube, "StatefulSet", namespace, children.statefulset, body, outcome)
        ready = int((sts.get("status") or {}).get("readyReplicas") or 0)
        pod = f"{children.statefulset['metadata']['name']}-0"
        if ready >= 1:
            conditions.append(Condition("Ready", True, "AgentReady", f"agent pod {pod} is ready"))
        else:
            conditions.append(Condition("Ready", False, "AgentNotReady",
                                        f"waiting for agent pod {pod} to become ready (0/1 ready)"))
    fragment = {"observedGeneration": generation,
                "conditions": merge_conditions(_own(status), conditions, generation=generation, now=now,
                                                     keep_others=False)}
    if volumes_status:
        fragment["volumes"] = volumes_status
    if apply_status(kube, body, fragment, manager=CONTROLLER_MANAGER):
        outcome.writes += 1
    if outcome.writes == 0:
        outcome.result = "unchanged"
    return outcome


_CONTROLLER_CONDITIONS = {"Ready", "StorageResizing", "ReconciliationPaused"}


def _own(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The controller's own conditions (the agent's are not the controller's to keep or drop)."""
    return [c for c in status.get("conditions") or [] if c.get("type") in _CONTROLLER_CONDITIONS]
