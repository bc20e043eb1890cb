"""Kafka's request and response frames, through kio's classes generated from Kafka's JSON schemas.

Every API version is its own set of kio classes with its own fields. The handlers work on
plain values -- dicts whose keys are the schema's field names -- which ``compiled_writer`` writes
in the version the client asked for, leaving out what that version lacks and failing loudly on a
field it needs that the handler did not give. Requests are read into kio's
classes and handlers read them with ``field``, which gives a default for a field the version
lacks.

A frame that does not parse is a ``MalformedFrame``: the listener closes the connection, as
Kafka's broker does with an ``InvalidRequestException``.
"""

from __future__ import annotations

import datetime
import functools
import types
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kio.index
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType

from stratalog.broker.fetch import FetchIsolation, FileRegion
from stratalog.server.access.model import ANONYMOUS, Principal
from stratalog.server.kafka.compiled_writer import write_frame
from stratalog.server.kafka.frame_guard import check_frame
from stratalog.common.errors import StratalogError

NO_TOPIC_ID = uuid.UUID(int=0)                 # Kafka's "unknown topic id": the engine keeps none yet
AUTHORIZED_OPERATIONS_OMITTED = -2147483648    # Kafka's answer when the client did not ask for them
READ_COMMITTED = 1                             # a request's isolation_level


class MalformedFrame(Exception):
    """A request frame that is not a Kafka request this listener can read."""


class CloseConnection(Exception):
    """A handler's answer that is no answer: the connection is to be closed (Kafka's way for some errors)."""


@dataclass(slots=True)   # not frozen: made for every request, and a frozen one sets each field through object.__setattr__
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any          # the kio request entity
    response_class: Any     # the kio response class of this version
    response_header: Any
    client_host: str = ""   # the peer's address, as DescribeGroups shows it
    principal: Principal = ANONYMOUS   # who the connection authenticated as (SASL)
    zero_copy: bool = False   # the connection sends file regions from the file (plaintext TCP)


Piece = bytes | bytearray | memoryview | FileRegion   # of a response frame, sent in order


def read_request(frame: bytes, *, client_host: str = "", principal: Principal = ANONYMOUS,
                 zero_copy: bool = False) -> Request:
    """One request (the frame without its size prefix): header, then the body of its version; the
    connection's facts are given here rather than replaced after (a copy per request)."""
    if len(frame) < 8:
        raise MalformedFrame(f"a request frame of {len(frame)} bytes is shorter than a request header (8 bytes)")
    api_key = int.from_bytes(frame[0:2], "big", signed=True)
    api_version = int.from_bytes(frame[2:4], "big", signed=True)
    request_class, response_class = _classes(api_key, api_version)
    try:
        # Lengths first: kio's reader aborts the process on an array too long to allocate.
        check_frame(request_class, frame, check_frame(request_class.__header_schema__, frame))
        header, used = entity_reader(request_class.__header_schema__)(frame, 0)
        body, body_size = entity_reader(request_class)(frame, used)
    except Exception as error:   # kio's readers raise whatever the bytes provoke (struct, unicode, its own)
        raise MalformedFrame(f"API key {api_key} version {api_version}: the request does not parse: "
                             f"{type(error).__name__}: {error}") from None
    if used + body_size != len(frame):
        raise MalformedFrame(f"API key {api_key} version {api_version}: {len(frame) - used - body_size} bytes "
                             "follow the request")
    return Request(api_key, api_version, header.correlation_id, header.client_id, body, response_class,
                   response_class.__header_schema__, client_host, principal, zero_copy)


@functools.lru_cache(maxsize=None)
def _classes(api_key: int, api_version: int) -> tuple[Any, Any]:
    """The kio request and response classes of an API version. Cached: kio finds them by importing
    modules by name, which costs a consumer's fetch more than its own answer (only found ones are
    kept; the listener lets through only the versions it offers)."""
    try:
        request_module = kio.index.load_payload_module(api_key, api_version, EntityType.request)
        response_module = kio.index.load_payload_module(api_key, api_version, EntityType.response)
    except kio.index.KioIndexError as error:
        raise MalformedFrame(f"API key {api_key} version {api_version} is unknown: {error}") from None
    return _payload_class(request_module, EntityType.request), _payload_class(response_module, EntityType.response)


def _payload_class(module: types.ModuleType, kind: EntityType) -> Any:
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "__type__", None) is kind:
            return value
    raise MalformedFrame(f"{module.__name__} has no {kind.name} class")


def write_response(request: Request, values: Mapping[str, Any]) -> list[Piece]:
    """The response frame, size prefix included, of ``values`` in the request's version, as the
    pieces to send in order: a fetch's record batches are sent from the buffers they were read
    into, or from their files, not copied into the frame first (``compiled_writer``)."""
    return write_frame(request.response_header, {"correlation_id": request.correlation_id}, request.response_class,
                       values)


def field(entity: Any, name: str, default: Any = None) -> Any:
    """A request field, or ``default`` in a version that lacks it."""
    return getattr(entity, name, default)


def error_code(error: BaseException | None) -> int:
    """Kafka's numeric code for an engine error (its ``code`` is Kafka's name for it)."""
    if error is None:
        return 0
    if isinstance(error, StratalogError):
        try:
            return int(ErrorCode[error.code.lower()])
        except KeyError:
            return int(ErrorCode.unknown_server_error)
    return int(ErrorCode.unknown_server_error)


def isolation_of(body: Any) -> FetchIsolation:
    """A Fetch's or ListOffsets' isolation level (read_uncommitted where the version has none)."""
    if field(body, "isolation_level", 0) == READ_COMMITTED:
        return FetchIsolation.TXN_COMMITTED
    return FetchIsolation.HIGH_WATERMARK


def code_named(name: str) -> int:
    """Kafka's numeric code for one of its error names (``NONE`` is 0)."""
    return 0 if name == "NONE" else int(ErrorCode[name.lower()])


def millis(value: Any) -> int:
    """A kio time value (timedelta, aware datetime or int) as milliseconds."""
    if isinstance(value, datetime.timedelta):   # by its parts: dividing by a timedelta costs a fetch 2 µs
        return (value.days * 86_400 + value.seconds) * 1000 + value.microseconds // 1000
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)
