"""The Kafka listener's close, in process over a real engine: what it waits for and what it cuts.

The request in flight is held by a handler that waits until the test lets it go (ApiVersions'
handler replaced for the test: the one seam, so that "in flight" lasts as long as the test needs).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from kafka_wire import request_frame
from stratalog.broker.groups.coordinator import GroupCoordinator
from stratalog.broker.producer_ids import ProducerIdAllocator
from stratalog.server.kafka import api_versions, dispatch
from stratalog.server.kafka.codec import Request
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.listener import KafkaListener


async def _one_request_held(broker, tmp_path, monkeypatch, held) -> tuple[KafkaListener, asyncio.StreamReader,
                                                                           asyncio.StreamWriter]:
    """A listener over ``broker`` whose ApiVersions is answered by ``held``, and a connection that has
    sent one ApiVersions request, which now waits in ``held``."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    monkeypatch.setitem(dispatch.HANDLERS, api_versions.API_VERSIONS, held)
    ctx = KafkaContext(broker, broker.engine, 0, "127.0.0.1", 0, 500, ProducerIdAllocator(tmp_path, 0),
                       GroupCoordinator(broker))
    listener = KafkaListener(ctx)
    [(host, port)] = await listener.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1")))
    await asyncio.sleep(0.2)   # the request is taken and waits in its handler
    return listener, reader, writer


@pytest.mark.parametrize("client_leaves", [False, True], ids=["client stays", "client left"])
def test_close_waits_for_a_request_in_flight_even_when_its_client_has_left(started_broker, tmp_path,
                                                                           monkeypatch, client_leaves: bool):
    """An accepted request is completed before the listener's close returns (and with it the engine's
    stop may begin), whether or not its client is still there to read the answer."""
    broker = started_broker()
    finished: list[str] = []

    async def scenario() -> tuple[bool, bool]:
        release = asyncio.Event()

        async def held(ctx: KafkaContext, request: Request) -> dict[str, Any]:
            await release.wait()
            finished.append("answered")
            return api_versions.api_versions_response(sasl=False)

        listener, reader, writer = await _one_request_held(broker, tmp_path, monkeypatch, held)
        if client_leaves:   # gone at once, with a reset (a FIN would leave the sending half open for the answer)
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
            await asyncio.sleep(0.2)   # the listener has seen the connection go
        closing = asyncio.create_task(listener.close(grace_s=10))
        await asyncio.sleep(0.3)
        waited = not closing.done()
        release.set()
        await asyncio.wait_for(closing, 5)
        answered = False
        if not client_leaves:
            answered = len(await reader.read()) > 0   # the answer, then the close
            writer.close()
        return waited, answered

    waited, answered = asyncio.run(scenario())
    assert waited, "the close returned while a request was still being answered"
    assert finished == ["answered"]
    assert answered == (not client_leaves)


def test_close_cuts_a_request_still_in_flight_after_its_grace(started_broker, tmp_path, monkeypatch):
    broker = started_broker()

    async def scenario() -> bool:
        async def held(ctx: KafkaContext, request: Request) -> dict[str, Any]:
            await asyncio.sleep(60)
            return api_versions.api_versions_response(sasl=False)

        listener, reader, writer = await _one_request_held(broker, tmp_path, monkeypatch, held)
        await asyncio.wait_for(listener.close(grace_s=0.5), 5)
        cut = await reader.read() == b""   # no answer: the connection was cut
        writer.close()
        return cut

    assert asyncio.run(scenario())
