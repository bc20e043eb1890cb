"""Which event loop a server process runs on: uvloop where it is installed (the server extra
installs it), asyncio's own when asked or where uvloop is missing, and a clear refusal of a loop
that cannot run here."""

from __future__ import annotations

import importlib.util

import pytest

from stratalog.server import event_loop


async def running_loop() -> str:
    return event_loop.running()


def test_uvloop_is_the_default_where_installed_and_each_loop_runs_when_chosen():
    assert event_loop.chosen(None) == "uvloop"   # the server extra installs it
    for name in ("uvloop", "asyncio"):
        assert event_loop.run(running_loop(), event_loop.chosen(name)) == name


def test_without_uvloop_the_default_is_asyncio_and_asking_for_uvloop_is_refused(monkeypatch: pytest.MonkeyPatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert event_loop.chosen(None) == "asyncio"
    with pytest.raises(ValueError, match="uvloop is not installed here: pip install uvloop, or choose asyncio"):
        event_loop.chosen("uvloop")


def test_an_unknown_loop_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown event loop 'trio': one of uvloop, asyncio"):
        event_loop.chosen("trio")
