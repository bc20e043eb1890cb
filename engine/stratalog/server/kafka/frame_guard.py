"""Every length in a Kafka frame checked against the bytes left, before kio reads the frame.

kio's native reader (0.6.5) sets aside room for as many elements as an array says it holds
before it reads them: a request whose array length is a 5-byte varint of four billion makes the
allocation fail, and a failed allocation aborts the whole process -- any client could stop an
engine with a 14-byte Metadata request. Every element takes at least one byte, so a count or a
size past the frame's end is bad input. This walks a frame by its kio class (fields classified as
kio's own writers classify them) reading only lengths, and refuses such a frame with the path of
the field, before kio sees it. Both ends use it: the listener on requests, a follower on its
leader's answers.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

# (frame, position, end, path) → the position after the value
Walk = Callable[[bytes | bytearray | memoryview, int, int, str], int]

FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
               "float64": 8, "uuid": 16, "bool": 1, "error_code": 2, "timedelta_i32": 4, "timedelta_i64": 8,
               "datetime_i64": 8}
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


class FrameLengthError(ValueError):
    """A count or size in a frame that the rest of the frame cannot hold."""


def check_frame(entity_class: Any, frame: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Raise ``FrameLengthError`` unless every length of ``entity_class`` at ``offset`` fits in the
    frame; the position after the entity otherwise."""
    return _entity(entity_class)(frame, offset, len(frame), entity_class.__name__)


def _need(position: int, size: int, end: int, path: str, what: str) -> int:
    if size < 0 or position + size > end:
        raise FrameLengthError(f"{path}: {what} of {size} at byte {position}, with {end - position} left")
    return position + size


def _uvarint(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= end or shift > 28:
            raise FrameLengthError(f"{path}: an unsigned varint at byte {position} is cut off or too long")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fixed(size: int) -> Walk:
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> int:
        return _need(position, size, end, path, "a value")
    return walk


def _sized(flexible: bool, legacy_width: int) -> Walk:
    """A string, bytes or records: its size, then that many bytes (null: -1, or 0 when flexible)."""
    legacy = _INT16 if legacy_width == 2 else _INT32

    def walk(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> int:
        if flexible:
            size_plus_one, position = _uvarint(frame, position, end, path)
            size = size_plus_one - 1
        else:
            _need(position, legacy.size, end, path, "a size")
            (size,) = legacy.unpack_from(frame, position)
            position += legacy.size
        return position if size == -1 else _need(position, size, end, path, "a string or bytes")
    return walk


def _array(flexible: bool, element: Walk) -> Walk:
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> int:
        if flexible:
            count_plus_one, position = _uvarint(frame, position, end, path)
            count = count_plus_one - 1
        else:
            _need(position, 4, end, path, "an array length")
            (count,) = _INT32.unpack_from(frame, position)
            position += 4
        if count == -1:
            return position
        _need(position, count, end, path, "an array of elements (a byte each at least)")
        for i in range(count):
            position = element(frame, position, end, f"{path}[{i}]")
        return position
    return walk


def _nullable(inner: Walk) -> Walk:
    """KIP-893's nullable struct: a marker byte (-1 null, 1 present), then the struct."""
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> int:
        _need(position, 1, end, path, "a null marker")
        present = frame[position] != 0xFF
        return inner(frame, position + 1, end, path) if present else position + 1
    return walk


def _field(field: dataclasses.Field[Any], flexible: bool, client_id: bool, tagged: bool) -> Walk:
    kind = classify_field(field)
    if client_id:   # RequestHeader.client_id: a legacy nullable string in every header version
        inner: Walk = _sized(False, 2)
    elif isinstance(kind, (EntityField, EntityTupleField)):
        inner = _entity(kind.type_)
        optional = type(None) in getattr(field.type, "__args__", ()) and not tagged
        if isinstance(kind, EntityField) and optional:
            inner = _nullable(inner)
    else:
        kafka_type = get_schema_field_type(field)
        if kafka_type in FIXED_SIZES:
            inner = _fixed(FIXED_SIZES[kafka_type])
        elif kafka_type == "string":
            inner = _sized(flexible, 2)
        elif kafka_type in ("bytes", "records"):
            inner = _sized(flexible, 4)
        else:
            raise TypeError(f"{field.name}: kio type {kafka_type!r} is unknown here")
    if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
        return _array(flexible, inner)
    return inner


@functools.lru_cache(maxsize=None)
def _entity(entity_class: Any) -> Walk:
    flexible = bool(entity_class.__flexible__)
    header = entity_class.__name__ == "RequestHeader"
    plain: list[tuple[str, Walk]] = []
    tagged: dict[int, tuple[str, Walk]] = {}
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        walk = _field(field, flexible, header and field.name == "client_id", tag is not None)
        if tag is None:
            plain.append((field.name, walk))
        else:
            tagged[tag] = (field.name, walk)

    def walk_entity(frame: bytes | bytearray | memoryview, position: int, end: int, path: str) -> int:
        for name, walk in plain:
            position = walk(frame, position, end, f"{path}.{name}")
        if not flexible:
            return position
        count, position = _uvarint(frame, position, end, f"{path} (tagged fields)")
        _need(position, count, end, path, "tagged fields (two bytes each at least)")
        for _ in range(count):
            tag, position = _uvarint(frame, position, end, f"{path} (a tag)")
            size, position = _uvarint(frame, position, end, f"{path} (a tag's size)")
            field_end = _need(position, size, end, f"{path} (tag {tag})", "a tagged field")
            known = tagged.get(tag)
            if known is not None:   # read by kio: its lengths must fit in its own size
                known[1](frame, position, field_end, f"{path}.{known[0]}")
            position = field_end
        return position
    return walk_entity
