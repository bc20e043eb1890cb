"""Label selectors (metav1.LabelSelector) evaluated in memory, as the API server would.

The controller picks the LogDirs of a Topic from its own index of LogDirs rather than a
list call per reconcile, so it needs the selector semantics locally.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["matches", "SelectorError"]


class SelectorError(ValueError):
    """A selector that cannot be evaluated (unknown operator, missing values)."""


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy ``selector``; an empty or missing selector selects everything."""
    labels = labels or {}
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for i, expr in enumerate(selector.get("matchExpressions") or ()):
        key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or ())
        where = f"logDirSelector.matchExpressions[{i}]"
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"{where}: operator {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"{where}: operator {op} takes no values")
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise SelectorError(f"{where}: unknown operator {op!r}")
        if not ok:
            return False
    return True
