"""Plain values to kio entities: the handlers answer with dicts keyed by the schema's field names.

``build`` makes the instance of a kio class from such values (nested dicts and lists included),
leaving out what that version lacks and failing loudly on a field it needs that was not given.
``converter`` is how one field's plain value becomes kio's type for it (milliseconds to a
timedelta, an int to an ``ErrorCode``); the compiled response writer uses it for the rare fields
it leaves to kio.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta


def build(cls: Any, values: Mapping[str, Any]) -> Any:
    """An instance of the kio class ``cls`` from plain values, nested dicts and lists included."""
    kwargs: dict[str, Any] = {}
    for name, required, convert in _plan(cls):
        if name not in values:
            if required:
                raise KeyError(f"{cls.__module__}.{cls.__qualname__} needs {name!r}")
            continue
        kwargs[name] = convert(values[name])
    return cls(**kwargs)


Converter = Callable[[Any], Any]


@functools.lru_cache(maxsize=None)
def _plan(cls: Any) -> tuple[tuple[str, bool, Converter], ...]:
    """Each field of a kio class: its name, whether it must be given, and how a plain value becomes
    its type. Worked out once per class, not on every response (the introspection cost more than
    the rest of a small answer)."""
    return tuple((f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                  converter(f.type, f.metadata.get("kafka_type")))
                 for f in dataclasses.fields(cls))


def converter(annotation: Any, kafka_type: str | None) -> Converter:
    """How a plain value becomes the kio type of a field annotated ``annotation``."""
    annotation = _not_none(annotation)
    if typing.get_origin(annotation) is tuple:
        item = converter(typing.get_args(annotation)[0], kafka_type)
        return lambda value: None if value is None else tuple(item(v) for v in value)
    if dataclasses.is_dataclass(annotation):
        return lambda value: None if value is None else build(annotation, value)
    if kafka_type == "error_code":
        return lambda value: None if value is None else ErrorCode(value)
    if kafka_type == "timedelta_i32":
        return lambda value: None if value is None else i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "datetime_i64":
        return lambda value: (None if value is None or value < 0
                              else datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc))
    return _unchanged


def _unchanged(value: Any) -> Any:
    return value


def _not_none(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0]
    return annotation
