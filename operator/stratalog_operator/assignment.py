"""Replica assignment of a Topic's partitions over LogDirs (seed 004's rule), without I/O.

The rule, as Kafka's documentation teaches it: sort the n LogDirs; partition i goes to
LogDir ``i mod n``, and its replica j to LogDir ``(i + j) mod n`` (replica 0 is the
preferred one). Assignments already made stay as they are: a partition keeps its LogDirs
while they are all still selected and the replica count is unchanged, so growing
partitions or adding LogDirs never moves existing data. Only new partitions, and
partitions whose LogDir went away or whose replica count changed, are placed by the rule
over today's LogDirs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["AssignmentPlan", "plan_assignment", "by_rule", "parse_assignment", "render_assignment"]

Assignment = dict[int, list[str]]


@dataclass(frozen=True)
class AssignmentPlan:
    assignment: Assignment
    satisfiable: bool
    reason: str = "Assigned"
    message: str = ""
    moved: list[int] = field(default_factory=list)   # partitions (re)placed although they had LogDirs


def by_rule(partition: int, replicas: int, logdirs: Sequence[str]) -> list[str]:
    ordered = sorted(logdirs)
    n = len(ordered)
    return [ordered[(partition + j) % n] for j in range(replicas)]


def plan_assignment(partitions: int, replicas: int, logdirs: Sequence[str],
                    current: Mapping[int, Sequence[str]]) -> AssignmentPlan:
    """The assignment for ``partitions`` × ``replicas`` over ``logdirs``.

    When there are fewer LogDirs than replicas the plan is unsatisfiable: the current
    assignment is kept untouched (nothing is moved or deleted because a LogDir is briefly
    missing), and the reason says what is lacking.
    """
    available = sorted(set(logdirs))
    if replicas > len(available):
        count = len(available)
        what = "no LogDir is" if count == 0 else f"only {count} LogDir{'s are' if count > 1 else ' is'}"
        return AssignmentPlan(
            {p: list(dirs) for p, dirs in current.items()}, False, "InsufficientLogDirs",
            f"{replicas} replica{'s need' if replicas > 1 else ' needs'} {replicas} "
            f"LogDir{'s' if replicas > 1 else ''} but {what} selected"
            + (f" ({', '.join(available)})" if available else ""))
    chosen = set(available)
    result: Assignment = {}
    moved: list[int] = []
    for p in range(partitions):
        have = list(current.get(p, ()))
        if len(have) == replicas and len(set(have)) == replicas and chosen.issuperset(have):
            result[p] = have
            continue
        if have:
            moved.append(p)
        result[p] = by_rule(p, replicas, available)
    return AssignmentPlan(result, True, "Assigned",
                          f"{partitions} partition{'s' if partitions != 1 else ''} × {replicas} "
                          f"replica{'s' if replicas != 1 else ''} on {len(available)} LogDir"
                          f"{'s' if len(available) != 1 else ''}", moved)


def parse_assignment(status_assignment: Sequence[Mapping[str, object]] | None) -> Assignment:
    """``status.assignment`` (a list of {partition, logDirs}) as a dict."""
    out: Assignment = {}
    for entry in status_assignment or ():
        partition, dirs = entry.get("partition"), entry.get("logDirs")
        if isinstance(partition, int) and isinstance(dirs, list):
            out[partition] = [str(d) for d in dirs]
    return out


def render_assignment(assignment: Mapping[int, Sequence[str]]) -> list[dict[str, object]]:
    return [{"partition": p, "logDirs": list(assignment[p])} for p in sorted(assignment)]
