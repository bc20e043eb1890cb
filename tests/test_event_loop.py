"""Which event loop a server process runs on: uvloop where it is installed (the server extra
installs it), asyncio's own when asked or where uvloop is missing, and a clear refusal of a loop
that cannot run here."""

from __future__ import annotations

import asyncio
import importlib.util
import socket

import pytest

from stratalog.server import event_loop
from stratalog.server.served_connection import write_buffers


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


class Recording(asyncio.Protocol):
    """A real connection's protocol that notes the flow control its transport reports."""

    def __init__(self) -> None:
        self.paused = False

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_an_answers_buffers_written_in_one_go_still_pause_the_writer_of_a_peer_that_does_not_read(loop: str):
    async def answers_until_paused() -> tuple[int, bool, int]:
        here, there = socket.socketpair()   # ``there`` never reads
        try:
            transport, protocol = await asyncio.get_running_loop().create_connection(Recording, sock=here)
            written = 0
            while not protocol.paused and written < 200:
                write_buffers(transport, (b"h" * 100, b"b" * 16384))
                written += 1
            buffered = transport.get_write_buffer_size()
            transport.abort()
            return written, protocol.paused, buffered
        finally:
            there.close()

    written, paused, buffered = event_loop.run(answers_until_paused(), loop)
    assert paused and written < 200 and buffered < 1 << 20, (written, paused, buffered)
