"""A data-route answer as plain values: its media type, its fields and its body, or the file region
that is its body.

The data route's handlers (produce to and fetch from one partition, ``server/records.py``) answer
with a ``DataAnswer`` rather than aiohttp's ``Response``. aiohttp's path turns it into one
(``as_response``); the direct path (``server/direct``) writes its head from it at once
(``direct.framing.data_answer_head``). Building an aiohttp ``Response`` and taking it apart again
cost the direct path about 4 µs a produce and 6 µs a fetch (bench/README.md, "Service path").
Errors stay aiohttp ``Response``s on both paths (``server/errors.py``): they are rare and varied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from stratalog.broker.fetch import FileRegion
from stratalog.server.api_request import ApiRequest
from stratalog.server.region_response import RegionResponse

JSON_UTF8 = "application/json; charset=utf-8"


class DataAnswer:
    """A successful data-route answer (200): ``body`` bytes, or ``region`` sent from its file."""

    __slots__ = ("content_type", "headers", "body", "region")
    status = 200

    def __init__(self, content_type: str, body: bytes = b"", headers: dict[str, str] | None = None,
                 region: FileRegion | None = None) -> None:
        self.content_type = content_type
        self.body = body
        self.headers: dict[str, str] = headers if headers is not None else {}
        self.region = region

    @property
    def size(self) -> int:
        """The body's length in bytes (a region's, when it has one)."""
        return self.region.size if self.region is not None else len(self.body)

    def as_response(self) -> web.StreamResponse:
        """The same answer as aiohttp's path sends it."""
        if self.region is not None:
            return RegionResponse(self.region, content_type=self.content_type, headers=self.headers)
        return web.Response(body=self.body, headers={**self.headers, "Content-Type": self.content_type})


DataHandler = Callable[[ApiRequest], Awaitable[DataAnswer]]
