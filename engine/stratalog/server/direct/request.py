"""A data-route request as the handlers read it (``server/api_request.ApiRequest``), built from a
``framing.Head`` and its body rather than by aiohttp."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.helpers import parse_content_type
from multidict import CIMultiDictProxy

from stratalog.server.direct.framing import Head

_DEFAULT_CONTENT_TYPE = "application/octet-stream"   # aiohttp's, when a request names none


class Query(dict[str, list[str]]):
    """A query's values by name: what the handlers ask of aiohttp's ``MultiDict`` (``getall``), as a
    plain dict, which a request of a few parameters builds and reads in a fraction of the time."""

    __slots__ = ()

    def getall(self, key: str, default: list[str]) -> list[str]:
        return self.get(key, default)


def _query(text: str) -> Query:
    """yarl's reading of a query (blank values kept, '+' a space, %-escapes decoded): by ``parse_qsl``
    where there is anything to decode, else by a split (``offset=5&maxBytes=16384``, every data
    request's), each as (name, '=', value)."""
    triples = [item.partition("=") for item in text.split("&") if item] if "%" not in text and "+" not in text \
        else [(name, "=", value) for name, value in parse_qsl(text, keep_blank_values=True)]
    query = Query()
    get = query.get
    for name, _, value in triples:
        values = get(name)
        if values is None:
            query[name] = [value]
        else:
            values.append(value)
    return query


class DirectRequest:
    __slots__ = ("_head", "_body", "_query", "match_info", "transport", "app")

    def __init__(self, head: Head, body: bytes, transport: asyncio.Transport, app: web.Application) -> None:
        self._head = head
        self._body = body
        self._query: Query | None = None
        self.match_info: Mapping[str, str] = {"topic": head.topic, "partition": head.partition}
        self.transport: asyncio.Transport | None = transport
        self.app = app

    @property
    def method(self) -> str:
        return self._head.method

    @property
    def path(self) -> str:
        return self._head.path

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._head.headers

    @property
    def query(self) -> Query:
        if self._query is None:
            self._query = _query(self._head.query)
        return self._query

    @property
    def content_type(self) -> str:
        given = self._head.headers.get("Content-Type")
        # aiohttp's own reading (cached by it), so both paths name a media type alike
        return _DEFAULT_CONTENT_TYPE if given is None else parse_content_type(given)[0]

    @property
    def content_length(self) -> int | None:
        return self._head.body_length if "Content-Length" in self._head.headers else None

    @property
    def whole_body(self) -> bytes:
        """The body, which has all come (``params.read_body`` takes it without iterating)."""
        return self._body

    @property
    def content(self) -> DirectRequest:
        return self

    async def iter_any(self) -> AsyncIterator[bytes]:
        """The body, which has all come: one chunk (none when empty)."""
        if self._body:
            yield self._body
