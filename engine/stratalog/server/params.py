"""Parsing of path, query and body parameters, each failure naming what was wrong and where.

A malformed request must come back as a 400 that tells the caller which field
to fix, and must never reach the engine half-parsed. Every handler therefore
takes its inputs through these helpers; they raise ``RequestError``
(``INVALID_REQUEST``) with messages such as ``query parameter 'maxBytes': ...``.
Topic names go through the engine's own rule (``INVALID_TOPIC_EXCEPTION``),
exactly as the CLI's do.
"""

from __future__ import annotations

import json
from collections.abc import Set
from functools import lru_cache
from typing import Any

from stratalog.broker.fetch import FetchIsolation
from stratalog.common import strict_json
from stratalog.common.names import TopicPartition, validate_topic_name
from stratalog.server.api_request import ApiRequest
from stratalog.server.errors import BodyTooLargeError, RequestError
from stratalog.common.limits import INT32_MAX, INT64_MIN, INT64_MAX


JSON = "application/json"
RECORD_BATCH = "application/vnd.kafka.record-batch"
OCTET_STREAM = "application/octet-stream"

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


# -- path ------------------------------------------------------------------------------------
# A valid name is valid on every request: the rule (a regular expression) runs once per name seen lately.
_valid_topic = lru_cache(maxsize=1024)(validate_topic_name)


def topic(request: ApiRequest) -> str:
    return _valid_topic(request.match_info["topic"])


def partition(request: ApiRequest) -> int:
    return parse_int(request.match_info["partition"], "path parameter 'partition'", minimum=0, maximum=INT32_MAX)


@lru_cache(maxsize=4096)
def _topic_partition(topic_name: str, partition_text: str) -> TopicPartition:
    return TopicPartition(validate_topic_name(topic_name), parse_int(
        partition_text, "path parameter 'partition'", minimum=0, maximum=INT32_MAX))


def topic_partition(request: ApiRequest) -> TopicPartition:
    """The path's topic and partition, each checked as ``topic`` and ``partition`` check them; a pair
    seen lately is not checked again (the data route's requests name a few partitions over and over)."""
    match = request.match_info
    return _topic_partition(match["topic"], match["partition"])


# -- query -----------------------------------------------------------------------------------
def parse_int(text: str, where: str, *, minimum: int, maximum: int) -> int:
    stripped = text.strip()
    # int() would also take "1_000" and "+5"; the API takes plain decimal integers only.
    digits = stripped[1:] if stripped.startswith("-") else stripped
    if not digits.isascii() or not digits.isdigit() or len(digits) > 20:
        raise RequestError(f"{where}: expected an integer, got {text!r}")
    value = int(stripped)
    if not minimum <= value <= maximum:
        raise RequestError(f"{where}: {value} is out of range [{minimum}, {maximum}]")
    return value


def query_int(request: ApiRequest, name: str, default: int | None, *, minimum: int, maximum: int) -> int | None:
    values = request.query.getall(name, [])
    if not values:
        return default
    if len(values) > 1:
        raise RequestError(f"query parameter {name!r}: given {len(values)} times")
    text = values[0]
    if text.isascii() and text.isdigit() and len(text) <= 20:   # the common case, without naming the place first
        value = int(text)
        if minimum <= value <= maximum:
            return value
    return parse_int(text, f"query parameter {name!r}", minimum=minimum, maximum=maximum)


def query_bool(request: ApiRequest, name: str, default: bool) -> bool:
    value = query_str(request, name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise RequestError(f"query parameter {name!r}: expected true or false, got {value!r}")


def query_str(request: ApiRequest, name: str) -> str | None:
    values = request.query.getall(name, [])
    if not values:
        return None
    if len(values) > 1:
        raise RequestError(f"query parameter {name!r}: given {len(values)} times")
    return values[0]


def query_choice(request: ApiRequest, name: str, choices: tuple[str, ...], default: str | None) -> str | None:
    value = query_str(request, name)
    if value is None:
        return default
    if value not in choices:
        raise RequestError(f"query parameter {name!r}: {value!r} is not one of {', '.join(choices)}")
    return value


def isolation(request: ApiRequest) -> FetchIsolation:
    """A consumer's ``isolation`` (Kafka's isolation.level): read_uncommitted (the default) or read_committed."""
    level = query_choice(request, "isolation", ("read_uncommitted", "read_committed"), "read_uncommitted")
    return FetchIsolation.for_consumer(level or "read_uncommitted")


def query_topic(request: ApiRequest, name: str = "topic") -> str | None:
    value = query_str(request, name)
    return None if value is None else validate_topic_name(value)


# -- body ------------------------------------------------------------------------------------
def media_type(request: ApiRequest) -> str:
    """The body's media type without parameters; aiohttp's default when absent is octet-stream."""
    return request.content_type.lower()


async def read_body(request: ApiRequest, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it is known to exceed ``limit``."""
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLargeError(f"request body of {length} bytes exceeds the server's limit of {limit} bytes")
    whole = getattr(request, "whole_body", None)
    if whole is not None:   # the direct path's, all come before the handler ran: its length is the one above
        return bytes(whole)
    # A body that came in one chunk (most do) is returned as it is, not copied twice.
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"request body exceeds the server's limit of {limit} bytes")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_json(data: bytes, where: str = "body") -> Any:
    """The body as JSON; NaN, Infinity and -Infinity (which Python's json would take) are refused by field."""
    try:
        return strict_json.loads(data)
    except strict_json.NonFiniteNumberError as error:
        at = f"{where} field {error.path!r}" if error.path else where
        raise RequestError(f"{at}: {error}") from None
    except UnicodeDecodeError:
        raise RequestError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise RequestError(f"{where}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno})") \
            from None
    except RecursionError:
        raise RequestError(f"{where}: JSON nested too deeply") from None


async def json_object(request: ApiRequest, limit: int, *, allowed: Set[str], required: Set[str] = frozenset(),
                      ) -> dict[str, Any]:
    """A JSON object body with only ``allowed`` keys (the body is required, as the document says)."""
    data = await read_body(request, limit)
    if not data.strip():
        raise RequestError(f"body: missing; expected a JSON object ({JSON})")
    if media_type(request) != JSON:
        raise RequestError(f"body: expected Content-Type {JSON}, got {request.content_type!r}", status=415)
    obj = parse_json(data)
    if not isinstance(obj, dict):
        raise RequestError(f"body: expected a JSON object, got {_describe(obj)}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise RequestError(f"body: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(obj))
    if missing:
        raise RequestError(f"body: missing required field(s) {missing}")
    return obj


def field_int(obj: dict[str, Any], name: str, default: int | None = None, *, minimum: int = INT64_MIN,
              maximum: int = INT64_MAX, within: str = "") -> int:
    """``obj[name]`` as an integer in range; ``within`` names where ``obj`` sits (``partitions[3].``)."""
    value = obj.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"body field {within + name!r}: expected an integer, got {_describe(value)}")
    if not minimum <= value <= maximum:
        raise RequestError(f"body field {within + name!r}: {value} is out of range [{minimum}, {maximum}]")
    return value


def field_str(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise RequestError(f"body field {name!r}: expected a string, got {_describe(value)}")
    return value


def field_configs(obj: dict[str, Any], name: str) -> dict[str, str]:
    """Topic settings as Kafka's string values; numbers and booleans are written as Kafka would."""
    value = obj.get(name, {})
    if not isinstance(value, dict):
        raise RequestError(f"body field {name!r}: expected an object of settings, got {_describe(value)}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, (int, str)):
            out[key] = str(item)
        elif isinstance(item, float):
            out[key] = repr(item)
        else:
            raise RequestError(f"body field {name!r}: setting {key!r} must be a string, number or boolean, "
                               f"got {_describe(item)}")
    return out


def field_str_list(obj: dict[str, Any], name: str) -> list[str]:
    value = obj.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RequestError(f"body field {name!r}: expected an array of strings")
    return list(value)
