"""What a reconcile did, as data: Kubernetes events to post and counts for the metrics.

Reconcilers run on a worker thread and return an :class:`Outcome`; the asyncio side posts
the events through kopf (whose event poster lives on the loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "Outcome"]


@dataclass(frozen=True)
class Event:
    body: Mapping[str, Any]    # the involved object (apiVersion, kind, metadata)
    type: str                  # Normal | Warning
    reason: str
    message: str


@dataclass
class Outcome:
    events: list[Event] = field(default_factory=list)
    writes: int = 0
    result: str = "ok"         # ok | unchanged | paused | unmanaged | error

    def event(self, body: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append(Event(body, type_, reason, message))
