"""What the inspection tools report: one finding, an error or a warning, about one place in a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: which file, where in it (byte position and/or index entry), what is wrong."""

    severity: Severity
    path: str
    message: str
    position: int | None = None
    entry: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"severity": self.severity, "file": self.path, "position": self.position, "entry": self.entry,
                "message": self.message}
