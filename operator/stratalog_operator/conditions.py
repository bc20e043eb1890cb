"""Kubernetes-format conditions (metav1.Condition), computed without I/O.

``lastTransitionTime`` moves only when a condition's ``status`` changes: a new reason or
message on the same status keeps the time, which is what ``kubectl wait`` users and
alerting on "how long has this been not Ready" rely on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Condition", "merge_conditions", "now_rfc3339", "condition"]

Json = dict[str, Any]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool | None      # None: Unknown
    reason: str
    message: str

    @property
    def status_text(self) -> str:
        return "Unknown" if self.status is None else ("True" if self.status else "False")


def merge_conditions(current: Sequence[Mapping[str, Any]] | None, wanted: Iterable[Condition], *,
                     generation: int | None, now: str, keep_others: bool = True) -> list[Json]:
    """The conditions list after setting ``wanted``.

    Conditions not in ``wanted`` are kept as they are (another writer, e.g. an agent, may own
    them) unless ``keep_others`` is false. The result is sorted by type so that equal states
    compare equal and a status patch is written only on a real change.
    """
    by_type = {str(c.get("type")): dict(c) for c in current or ()}
    result: dict[str, Json] = dict(by_type) if keep_others else {}
    for want in wanted:
        old = by_type.get(want.type)
        changed = old is None or old.get("status") != want.status_text
        entry: Json = {
            "type": want.type,
            "status": want.status_text,
            "reason": want.reason,
            "message": want.message,
            "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime", now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        elif old is not None and "observedGeneration" in old:
            entry["observedGeneration"] = old["observedGeneration"]
        result[want.type] = entry
    return [result[k] for k in sorted(result)]


def condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions or () if c.get("type") == type_), None)
