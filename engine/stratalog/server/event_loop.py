"""The event loop a server process runs on: uvloop where it is installed, else asyncio's own.

The listeners' own Python is lean enough now that the loop's share of a request shows: on uvloop
(libuv, in C) ``stratalog serve`` spends about a tenth less CPU per HTTP produce or fetch than on
asyncio's selector loop, and up to a twentieth less on the Kafka listener (bench/README.md,
"Service path"). Both loops stay supported: tests run servers in process on asyncio's, and
``--event-loop asyncio`` is there to rule the loop out when a problem is looked into.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("uvloop", "asyncio")


def chosen(name: str | None) -> str:
    """The loop to run: ``name``, or the default (uvloop where installed); ``ValueError`` for a name
    not in ``EVENT_LOOPS``, or for uvloop where it is not installed."""
    if name is None:
        return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    if name not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {name!r}: one of {', '.join(EVENT_LOOPS)}")
    if name == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise ValueError("uvloop is not installed here: pip install uvloop, or choose asyncio")
    return name


def running() -> str:
    """The running loop's name, as ``chosen`` gives it (for the log)."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T], event_loop: str) -> T:
    """``asyncio.run`` on the named loop (one ``chosen`` returned)."""
    if event_loop == "uvloop":
        import uvloop
        return uvloop.run(main)
    return asyncio.run(main)
