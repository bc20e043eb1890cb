"""Which requests the direct path takes, and the bytes of its answers: pure functions, no I/O.

A request is the direct path's when its request line names a data route with GET or POST and its
head, parsed by httptools (llhttp, the parser aiohttp's own C parser is built on), is plain: CRLF
line ends, a ``Content-Length`` body or none, no ``Transfer-Encoding``, ``Content-Encoding``,
``Expect`` or ``Upgrade``, a ``Host`` (HTTP/1.1), none of the fields aiohttp takes once given
twice, no more fields and no longer ones than aiohttp takes. Anything else is left whole to aiohttp,
which answers it as it answers today (its own 400s for malformed heads included), so the two paths
do not disagree on what a request means. A connection's ``HeadReader`` remembers its last head's
fields, so a head that repeats them (as clients' heads do) has its request line read alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import formatdate

import httptools
from aiohttp.http_parser import SINGLETON_HEADERS
from multidict import CIMultiDict, CIMultiDictProxy

DATA_ROUTE = "/v1/topics/{topic}/partitions/{partition}/records"
# aiohttp's limits (run.MAX_REQUEST_LINE, its max_field_size): a longer line or field is aiohttp's to refuse.
MAX_LINE_BYTES = 64 * 1024
MAX_FIELD_BYTES = 8190
MAX_FIELDS = 128
MAX_HEAD_BYTES = MAX_LINE_BYTES + 32 * MAX_FIELD_BYTES
_METHODS = {b"GET": "GET", b"POST": "POST"}
_STARTS = (b"GET /", b"POST /")
# Fields that change what the body or the connection is, which aiohttp acts on and the handlers do not.
_REFUSED_FIELDS = frozenset({"transfer-encoding", "content-encoding", "expect", "upgrade", "sec-websocket-key1"})
_SINGLETONS = frozenset(str(name).lower() for name in SINGLETON_HEADERS)   # aiohttp refuses each twice
WAIT = -1    # head_verdict: the head may still be a data route's plain one: wait for more
LEAVE = -2   # head_verdict: it cannot be: aiohttp's


@dataclass(slots=True)   # not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__
class Head:
    """A data-route request's head, as the handler will see it."""

    method: str
    path: str
    topic: str
    partition: str
    query: str
    headers: CIMultiDictProxy[str]
    body_length: int
    keep_alive: bool
    http10: bool


def head_verdict(buf: bytes | bytearray, start: int, scanned: int, line_checked: bool) -> tuple[int, bool]:
    """For the head that begins at ``start``: where it ends (just past its blank line), ``WAIT`` or
    ``LEAVE``; and whether its request line has come whole (and is a data route's).

    ``scanned``: how many of its bytes earlier calls looked at, and ``line_checked`` what they found,
    so that a head coming in small pieces is read once, not again with each piece. A head is left
    to aiohttp as soon as it cannot be the direct path's (another route, a bare LF, too long), not
    when it ends, which such a head may never do in the direct path's eyes."""
    begin = start + scanned
    end = buf.find(b"\r\n\r\n", max(start, begin - 3))
    stop = len(buf) if end < 0 else end + 4
    if buf.find(b"\n\n", max(start, begin - 1), stop) >= 0:
        return LEAVE, line_checked   # a bare LF ends it: llhttp and aiohttp refuse bare LFs in heads
    if end >= 0:
        return end + 4, True   # whole: parse_head checks its request line
    if not line_checked:
        method = bytes(buf[start:min(stop, start + 6)])   # what would never be "GET /" or "POST /" goes at once
        if not any(known.startswith(method) or method.startswith(known) for known in _STARTS):
            return LEAVE, False
        line_end = buf.find(b"\n", begin, stop)
        if line_end < 0:
            return (LEAVE if stop - start > MAX_LINE_BYTES else WAIT), False
        if line_end == start or buf[line_end - 1] != 0x0D or data_target(bytes(buf[start:line_end - 1])) is None:
            return LEAVE, False
    return (LEAVE if stop - start > MAX_HEAD_BYTES else WAIT), True


def data_target(line: bytes) -> tuple[str, str, str, str, str] | None:
    """(method, path, topic, partition, query) of a request line naming a data route, else None.
    Paths aiohttp would decode (``%``) or not match (empty segments, a trailing slash) are left to it."""
    parts = line.split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        return None
    method = _METHODS.get(parts[0])
    if method is None:
        return None
    target = parts[1]
    path, _, query = target.partition(b"?")
    if not target.isascii() or b"%" in path or b"#" in target:
        return None
    segments = path.split(b"/")
    if (len(segments) != 7 or segments[0] or segments[1] != b"v1" or segments[2] != b"topics"
            or segments[4] != b"partitions" or segments[6] != b"records" or not segments[3] or not segments[5]):
        return None
    return method, path.decode(), segments[3].decode(), segments[5].decode(), query.decode()


class _Fields:
    """httptools' callbacks for one head: its fields, and whether it was whole and plain."""

    __slots__ = ("fields", "names", "complete", "plain", "keep_alive", "http10", "parser")

    def __init__(self) -> None:
        self.fields: list[tuple[str, str]] = []
        self.names: set[str] = set()
        self.complete = False
        self.plain = True
        self.keep_alive = False
        self.http10 = False
        self.parser: httptools.HttpRequestParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        text = name.decode("latin-1")
        lower = text.lower()
        if (len(name) + len(value) > MAX_FIELD_BYTES or lower in _REFUSED_FIELDS or len(self.fields) >= MAX_FIELDS
                or (lower in _SINGLETONS and lower in self.names)):
            self.plain = False
        self.names.add(lower)
        self.fields.append((text, value.decode("utf-8", "surrogateescape")))

    def on_headers_complete(self) -> None:
        # Asked now: once the message is complete (a GET's is, here) llhttp has begun on the next one.
        parser = self.parser
        assert parser is not None
        self.complete = True
        self.keep_alive = parser.should_keep_alive()
        self.http10 = parser.get_http_version() == "1.0"
        if parser.should_upgrade() or ("host" not in self.names and not self.http10):
            self.plain = False


def parse_head(head: bytes) -> Head | None:
    """``head`` (a request line, fields and the blank line) as a data-route request the direct path
    takes, or None: another route, or a head to leave to aiohttp. A reader that remembers nothing
    yet: httptools parses the whole head."""
    return HeadReader().read(head)


# What llhttp takes in a request target: printable ASCII, no space (a byte outside it fails the parse).
_TARGET_BYTES = bytes(range(0x21, 0x7F))
# Heads up to this long are remembered: every usual client's, while a connection that sent one
# near MAX_HEAD_BYTES does not keep it until its next request.
REMEMBERED_HEAD_BYTES = 4096


class HeadReader:
    """``parse_head`` for one connection, which remembers the last head's fields: a client sends the
    same ones with every request (Host, Content-Length, Accept), so a head whose method, version and
    field lines are the last one's byte for byte is not parsed again -- its request line is checked
    as llhttp checks a target (``_TARGET_BYTES``), and its fields are the last ones."""

    __slots__ = ("_key", "_fields")

    def __init__(self) -> None:
        self._key = b""
        self._fields: _HeadFields | None = None

    def read(self, head: bytes) -> Head | None:
        line_end = head.find(b"\r\n")
        if line_end > MAX_LINE_BYTES:
            return None
        line = head[:line_end]
        target = data_target(line)
        if target is None:
            return None
        # data_target took the line as METHOD SP target SP HTTP/1.x: its first four bytes ("GET " or
        # "POST") and its last eight name the method and the version, which the fields' reading depends on.
        key = head[:4] + head[line_end - 8:]
        fields = self._fields
        if fields is not None and key == self._key:
            if line[len(target[0]) + 1:line_end - 9].translate(None, _TARGET_BYTES):
                return None   # a byte llhttp refuses in the target: aiohttp's 400
            return _head(target, fields)
        fields = _read_fields(head)
        if fields is None:
            return None
        if len(head) <= REMEMBERED_HEAD_BYTES:
            self._key, self._fields = key, fields
        return _head(target, fields)


@dataclass(frozen=True, slots=True)
class _HeadFields:
    """What httptools read of a plain head's fields (shared by the heads that repeat them: read only)."""

    headers: CIMultiDictProxy[str]
    body_length: int
    keep_alive: bool
    http10: bool


def _read_fields(head: bytes) -> _HeadFields | None:
    """The fields of ``head``, parsed by httptools with its request line; None unless whole and plain."""
    fields = _Fields()
    parser = fields.parser = httptools.HttpRequestParser(fields)
    try:
        parser.feed_data(head)
    except (httptools.HttpParserError, httptools.HttpParserUpgrade):   # a malformed head; an upgrade
        return None
    if not (fields.complete and fields.plain):
        return None
    headers: CIMultiDict[str] = CIMultiDict(fields.fields)
    length = headers.get("Content-Length")
    return _HeadFields(CIMultiDictProxy(headers), int(length) if length else 0, fields.keep_alive, fields.http10)


def _head(target: tuple[str, str, str, str, str], fields: _HeadFields) -> Head:
    method, path, topic, partition, query = target
    return Head(method, path, topic, partition, query, fields.headers, fields.body_length, fields.keep_alive,
                fields.http10)


class HttpDate:
    """The ``Date`` header's value, formatted once a second (as aiohttp does)."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def at(self, now: float) -> str:
        second = int(now)
        if second != self._second:
            self._second, self._text = second, formatdate(second, usegmt=True)
        return self._text


def answer_head(status: int, reason: str, headers: Iterable[tuple[str, str]], body_length: int,
                date: str, *, keep_alive: bool, http10: bool) -> bytes:
    """The status line and fields of an answer: the handler's fields, then its length, the date and, where
    the request's version would mean otherwise, whether the connection stays open."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines.extend(f"{name}: {value}" for name, value in headers if name.lower() != "content-length")
    lines.append(f"Content-Length: {body_length}")
    lines.append(f"Date: {date}")
    if not keep_alive:
        lines.append("Connection: close")
    elif http10:
        lines.append("Connection: keep-alive")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


def data_answer_head(content_type: str, headers: dict[str, str], body_length: int, date: str, *,
                     keep_alive: bool, http10: bool) -> bytes:
    """``answer_head`` of a data route's 200 (``server/data_answer.py``), whose fields the handlers
    name themselves (never a Content-Length): one format rather than a list of lines filtered."""
    fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()]) if headers else ""
    connection = "Connection: close\r\n" if not keep_alive else "Connection: keep-alive\r\n" if http10 else ""
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{fields}Content-Length: {body_length}\r\n"
            f"Date: {date}\r\n{connection}\r\n").encode("utf-8", "surrogateescape")
