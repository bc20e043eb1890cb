"""The HTTP API's listening sockets: each new connection starts on the direct path, and aiohttp's
``AppRunner`` serves whatever is handed to it (``connection``).

With the direct path off (``--access-log``, whose lines aiohttp writes, or
``STRATALOG_HTTP_DIRECT=0`` to compare the two), every connection is aiohttp's from its first byte,
exactly as a ``TCPSite`` would serve it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from ssl import SSLContext
from typing import Any

from aiohttp import web

from stratalog.server.access.permissions import Need
from stratalog.server.data_answer import DataHandler
from stratalog.server.direct.connection import DirectConnection, DirectRoutes
from stratalog.server.socket_writes import SocketWrites, thread_writes_enabled
from stratalog.server.state import STATE

# aiohttp's keepalive_timeout: a direct connection idle this long is closed, as aiohttp closes its own.
IDLE_SECONDS = 75.0
_SWEEP_SECONDS = 15.0


def direct_enabled(access_log: bool) -> bool:
    choice = os.environ.get("STRATALOG_HTTP_DIRECT", "1")
    if choice not in ("0", "1"):
        raise ValueError(f"STRATALOG_HTTP_DIRECT={choice!r}: expected 1 (the data routes served directly) or 0")
    return choice == "1" and not access_log


class HttpListener:
    """What ``listen`` started: its addresses, and ``cleanup`` to stop (drain, then close)."""

    def __init__(self, runner: web.AppRunner, server: asyncio.Server, routes: DirectRoutes | None,
                 shutdown_timeout: float) -> None:
        self._runner = runner
        self._server = server
        self._routes = routes
        self._shutdown_timeout = shutdown_timeout
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep()) if routes is not None else None

    @property
    def addresses(self) -> list[Any]:
        return [sock.getsockname() for sock in self._server.sockets]

    async def cleanup(self) -> None:
        """Stop accepting; answer the direct requests in flight (up to the shutdown timeout) and close
        those connections; then aiohttp's own shutdown (its connections, ``on_shutdown``)."""
        self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._routes is not None:
            self._routes.state.begin_draining()   # as aiohttp's on_shutdown does: long polls answer now
            # A connection's worker ends once its queue is answered, the server draining.
            working = [c.worker for c in self._routes.connections if c.worker is not None and not c.idle]
            if working:
                await asyncio.wait(working, timeout=self._shutdown_timeout)
            for connection in list(self._routes.connections):
                connection.close(now=not connection.idle)   # one still answering after the timeout is cut
        await self._runner.cleanup()
        if self._routes is not None and self._routes.writes is not None:
            await self._routes.writes.close_when_written(self._shutdown_timeout)

    async def _sweep(self) -> None:
        assert self._routes is not None
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(_SWEEP_SECONDS)
            now = loop.time()
            for connection in list(self._routes.connections):
                if connection.idle and now - connection.last_active > IDLE_SECONDS:
                    connection.close()


async def start_listener(app: web.Application, handlers: Mapping[str, tuple[DataHandler, Need]], host: str,
                         port: int, *, runner_options: dict[str, Any], shutdown_timeout: float, direct: bool,
                         ssl_context: SSLContext | None) -> HttpListener:
    """Listen on ``host:port``, ``handlers`` (by method) answering the data route directly; raises
    ``OSError`` when the address cannot be bound."""
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=shutdown_timeout, **runner_options)
    await runner.setup()
    aiohttp_protocol = runner.server
    assert aiohttp_protocol is not None
    # TLS encrypts on the loop: a TLS listener's answers never go to the writing thread, which it does not start.
    threaded = ssl_context is None and thread_writes_enabled()
    shared = DirectRoutes(app, app[STATE], handlers, aiohttp_protocol,
                          writes=SocketWrites() if threaded else None) if direct else None

    def connection() -> asyncio.Protocol:
        return DirectConnection(shared) if shared is not None else aiohttp_protocol()

    try:
        server = await asyncio.get_running_loop().create_server(
            connection, host, port, ssl=ssl_context, reuse_address=True, backlog=128)
    except BaseException:
        if shared is not None and shared.writes is not None:
            shared.writes.close()
        await runner.cleanup()
        raise
    return HttpListener(runner, server, shared, shutdown_timeout)
