"""What this LogDir's engine should hold for one Topic, and what to do about it (no I/O).

The controller writes ``status.assignment``; the agent of a LogDir holds exactly the
partitions whose LogDirs include its own. Its finalizer on the Topic is the record that
it holds data for that Topic: it is added *before* the first partition is created (so a
Topic can never be deleted with data it does not know about), and only a Topic carrying
it can make the agent delete data, so a conflicting Topic (which gets no assignment) can
never delete the data of the Topic that owns the Kafka name.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from ..assignment import parse_assignment
from ..election import records_of
from ..names import is_paused, is_unmanaged

__all__ = ["LocalTopic", "TopicActions", "plan_topic_here", "effective_name"]


@dataclass(frozen=True)
class LocalTopic:
    """What the engine holds under one Kafka topic name."""

    partitions: frozenset[int]
    overrides: Mapping[str, str]


@dataclass
class TopicActions:
    topic: str                                  # Kafka topic name
    add_finalizer: bool = False
    create: list[int] = field(default_factory=list)
    overrides: dict[str, str] | None = None     # config to create with / set (None: leave config alone)
    alter_config: bool = False
    delete: list[int] = field(default_factory=list)
    keep: list[int] = field(default_factory=list)   # moved away or Topic gone, kept under Retain/unmanaged
    remove_finalizer: bool = False
    reason: str = ""

    @property
    def empty(self) -> bool:
        return not (self.add_finalizer or self.create or self.alter_config or self.delete or self.remove_finalizer)


def effective_name(topic: Mapping[str, Any]) -> str:
    return str((topic.get("spec") or {}).get("topicName") or topic["metadata"]["name"])


def plan_topic_here(topic: Mapping[str, Any], logdir: str, finalizer: str, wanted_overrides: Mapping[str, str],
                    local: LocalTopic | None) -> TopicActions:
    """The actions for ``topic`` on LogDir ``logdir``.

    ``wanted_overrides`` is the Topic's config over the LogDir's topic defaults, already
    normalized by the engine (so equal configs compare equal); ``local`` is what the
    engine holds under the Topic's Kafka name, or None.
    """
    meta, spec = topic["metadata"], topic.get("spec") or {}
    name = effective_name(topic)
    actions = TopicActions(name)
    ours = finalizer in (meta.get("finalizers") or [])
    held: Set[int] = local.partitions if local else frozenset()
    retain = spec.get("deletionPolicy") == "Retain" or is_unmanaged(meta)

    if meta.get("deletionTimestamp"):
        if not ours:
            return actions
        if retain:
            actions.keep = sorted(held)
            actions.reason = "Retain" if spec.get("deletionPolicy") == "Retain" else "Unmanaged"
        else:
            actions.delete = sorted(held)
            actions.reason = "TopicDeleted"
        actions.remove_finalizer = True
        return actions
    if is_unmanaged(meta):
        # Forgotten by the operator: data stays, and this agent no longer blocks deletion.
        actions.remove_finalizer = ours
        actions.reason = "Unmanaged"
        return actions
    if is_paused(meta):
        return actions

    assignment = parse_assignment((topic.get("status") or {}).get("assignment"))
    mine = sorted(p for p, dirs in assignment.items() if logdir in dirs)
    if mine and not ours:
        actions.add_finalizer = True
    actions.create = [p for p in mine if p not in held]
    if (ours or mine) and held and dict(local.overrides if local else {}) != dict(wanted_overrides):
        actions.alter_config = True
    actions.overrides = dict(wanted_overrides)
    if ours:   # only data this Topic made here is this Topic's to delete
        # A replica a partition record still lists is part of a move not yet finished (or of
        # one the controller has not started): the data may exist nowhere else in sync yet.
        listed = {r.partition for r in records_of(topic).values() if logdir in r.replicas}
        gone = sorted(p for p in held if p not in mine and p not in listed)
        if spec.get("deletionPolicy") == "Retain":
            actions.keep = gone
        else:
            actions.delete = gone
        if not mine and not (listed & set(held)):
            actions.remove_finalizer = True
            actions.reason = "NotAssignedHere"
    return actions
