"""Records as JSON for people: the form ``produce`` reads and ``consume`` writes.

``{"key": ..., "value": ..., "timestamp": ..., "headers": {...}}``: text keys and
values are UTF-8 strings; bytes that are not UTF-8 travel as ``key_b64`` /
``value_b64``; ``null`` is a null key or a tombstone. Headers are an object, or
a list of ``[key, value]`` pairs when a key repeats; a header value that is not
UTF-8 is ``{"b64": "..."}``. The CLI and the HTTP API share this module so the
two never disagree.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from stratalog.common import strict_json
from stratalog.common.errors import InvalidRecordError
from stratalog.records import Header, Record, TimestampType

_FIELDS = {"key", "value", "key_b64", "value_b64", "timestamp", "headers", "partition"}


def _text_or_b64(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(value).decode("ascii")}


def record_to_dict(record: Record, *, topic: str, partition: int, timestamp_type: TimestampType) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": topic, "partition": partition, "offset": record.offset,
                           "timestamp": record.timestamp, "timestampType": timestamp_type.kafka_name}
    for name, raw in (("key", record.key), ("value", record.value)):
        shown = _text_or_b64(raw)
        if isinstance(shown, dict):
            out[f"{name}_b64"] = shown["b64"]
        else:
            out[name] = shown
    keys = [h.key for h in record.headers]
    if len(set(keys)) == len(keys):
        out["headers"] = {h.key: _text_or_b64(h.value) for h in record.headers}
    else:
        out["headers"] = [[h.key, _text_or_b64(h.value)] for h in record.headers]
    return out


def record_to_json(record: Record, *, topic: str, partition: int, timestamp_type: TimestampType) -> str:
    return json.dumps(record_to_dict(record, topic=topic, partition=partition, timestamp_type=timestamp_type),
                      ensure_ascii=False)


def _bytes(obj: dict[str, Any], name: str, where: str) -> bytes | None:
    text_given, b64_given = name in obj, f"{name}_b64" in obj
    if text_given and b64_given:
        raise InvalidRecordError(f"{where}: give either '{name}' or '{name}_b64', not both")
    if b64_given:
        encoded = obj[f"{name}_b64"]
        if encoded is None:
            return None
        if not isinstance(encoded, str):
            raise InvalidRecordError(f"{where}: '{name}_b64' must be a base64 string")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRecordError(f"{where}: '{name}_b64' is not valid base64") from None
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    # Numbers, objects and lists are stored as their JSON text: what a user most likely means.
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _header_value(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRecordError(f"{where}: header value is not valid base64") from None
    raise InvalidRecordError(f"{where}: a header value must be a string, null or {{\"b64\": ...}}")


def _headers(raw: Any, where: str) -> tuple[Header, ...]:
    if raw is None:
        return ()
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list) and all(isinstance(p, list) and len(p) == 2 for p in raw):
        pairs = [(p[0], p[1]) for p in raw]
    else:
        raise InvalidRecordError(f"{where}: 'headers' must be an object or a list of [key, value] pairs")
    headers = []
    for key, value in pairs:
        if not isinstance(key, str):
            raise InvalidRecordError(f"{where}: header key {key!r} must be a string")
        headers.append(Header(key, _header_value(value, f"{where}, header {key!r}")))
    return tuple(headers)


def record_from_dict(obj: Any, *, offset: int, now_ms: int, where: str) -> Record:
    """A ``Record`` (with a relative offset) from one JSON object; errors name ``where``."""
    if not isinstance(obj, dict):
        raise InvalidRecordError(f"{where}: expected a JSON object, found {type(obj).__name__}")
    unknown = set(obj) - _FIELDS
    if unknown:
        raise InvalidRecordError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_FIELDS)}")
    timestamp = obj.get("timestamp", now_ms)
    if timestamp is None:
        timestamp = now_ms
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not -1 <= timestamp < 2**63:
        raise InvalidRecordError(f"{where}: 'timestamp' must be milliseconds since the epoch, got {timestamp!r}")
    return Record(offset, timestamp, _bytes(obj, "key", where), _bytes(obj, "value", where),
                  _headers(obj.get("headers"), where))


def record_from_json_line(line: str, *, offset: int, now_ms: int, where: str) -> Record:
    """One JSON line as a record; NaN, Infinity and -Infinity (not JSON, though Python's json takes them)
    are refused naming the field, rather than stored as the text ``NaN``."""
    try:
        obj = strict_json.loads(line)
    except strict_json.NonFiniteNumberError as error:
        at = f"{where}, field {error.path!r}" if error.path else where
        raise InvalidRecordError(f"{at}: {error}") from None
    except json.JSONDecodeError as error:
        raise InvalidRecordError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise InvalidRecordError(f"{where}: JSON nested too deeply") from None
    return record_from_dict(obj, offset=offset, now_ms=now_ms, where=where)
