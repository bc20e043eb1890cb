"""bench/service_drivers.py's closed loop: its requests carry no timeout of their own, so the run's end
is what bounds them."""

from __future__ import annotations

import asyncio
import os

import pytest

from bench import service_drivers
from bench.http_wire import HttpWire


def test_a_server_that_never_answers_ends_the_run_with_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch
                                                                           ) -> None:
    monkeypatch.setattr(service_drivers, "STOP_TIMEOUT_S", 0.5)
    held: list[asyncio.StreamWriter] = []

    async def run() -> None:
        # A real listener that reads each request and never answers it.
        server = await asyncio.start_server(lambda _reader, writer: held.append(writer), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        wire = await HttpWire.connect(f"http://127.0.0.1:{port}", timeout_s=None)

        async def request(partition: int, state: dict[str, object]) -> tuple[int, int]:
            await wire.request("GET", "/v1/topics/t/partitions/0/records?offset=0")
            return 0, 0

        try:
            with pytest.raises(RuntimeError, match="still unanswered 0.5 s after the run's end"):
                await service_drivers.closed_loop("stratalog", "fetch", 1, 0.1, request, os.getpid())
        finally:
            wire.close()
            server.close()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_a_clients_own_timeout_error_is_raised_as_it_is_not_as_an_unanswered_request() -> None:
    async def run() -> None:
        async def request(partition: int, state: dict[str, object]) -> tuple[int, int]:
            raise TimeoutError("the library client's own timeout")

        with pytest.raises(TimeoutError, match="the library client's own timeout"):
            await service_drivers.closed_loop("stratalog", "fetch", 1, 0.1, request, os.getpid())

    asyncio.run(asyncio.wait_for(run(), 30))
