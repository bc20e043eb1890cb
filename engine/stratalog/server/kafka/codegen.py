"""Python functions written at run time for kio's classes, once each: the compiled writer's and the
frame guard's.

Both go through a kio class's fields once and write the source of one function for it, as
``dataclasses`` writes ``__init__``: the per-field dispatch that a generic walker repeats on every
frame is paid once per class. What they share is here: the values a generated function refers to
by name, and turning its source into the function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class FunctionSource:
    """The lines of one generated function's body and the values its code refers to by name."""

    def __init__(self, label: str, names: dict[str, Any]) -> None:
        self.label = label   # where the function came from, as tracebacks show it
        self.names = dict(names)
        self.lines: list[str] = []

    def name(self, hint: str, value: Any) -> str:
        """A name, unique in this function, under which its code finds ``value``."""
        name = f"_{hint}{len(self.names)}"
        self.names[name] = value
        return name

    def make(self, signature: str, *, head: Sequence[str] = (), indent: int = 1, tail: Sequence[str] = ()) -> Any:
        """``def {signature}:`` with ``head``, the body's lines (indented ``indent`` levels), then ``tail``."""
        inner = "    " * indent
        body = [f"    {line}" for line in head] + [f"{inner}{line}" for line in self.lines or ["pass"]] \
            + [f"    {line}" for line in tail]
        source = f"def {signature}:\n" + "\n".join(body) + "\n"
        namespace = dict(self.names)
        exec(compile(source, f"<{self.label}>", "exec"), namespace)
        return namespace[signature.partition("(")[0]]
