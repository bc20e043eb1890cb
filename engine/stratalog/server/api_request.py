"""What a handler reads of a request, as a type both HTTP paths give it.

aiohttp's ``web.Request`` serves every route; the data routes (produce to and fetch from one
partition) are also served by ``server/direct``, which parses the request itself and hands the
handler a ``DirectRequest``. Both satisfy ``ApiRequest``, so each handler, parameter helper and
error answer exists once, whichever path a request took.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from aiohttp import web
from multidict import MultiMapping


class RequestBody(Protocol):
    def iter_any(self) -> AsyncIterator[bytes]: ...


class QueryArgs(Protocol):
    """A query's values by name, each name's in order (aiohttp's ``MultiDict`` is one)."""

    def getall(self, key: str, default: list[str]) -> list[str]: ...


class ApiRequest(Protocol):
    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def match_info(self) -> Mapping[str, str]: ...

    @property
    def query(self) -> QueryArgs: ...

    @property
    def headers(self) -> MultiMapping[str]: ...

    @property
    def content_type(self) -> str: ...

    @property
    def content_length(self) -> int | None: ...

    @property
    def content(self) -> RequestBody: ...

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def app(self) -> web.Application: ...
