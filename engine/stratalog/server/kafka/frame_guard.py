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

# (frame, position, end) → the position after the value; a FrameLengthError names its own field
# on the way out, so no path is built for the frames that pass (nearly all of them).
Walk = Callable[[bytes | bytearray | memoryview, int, int], int]

FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
               "float64": 8, "uuid": 16, "bool": 1, "error_code": 2, "timedelta_i32": 4, "timedelta_i64": 8,
               "datetime_i64": 8}
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


class FrameLengthError(ValueError):
    """A count or size in a frame that the rest of the frame cannot hold."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []   # the field's path, innermost last, filled in on the way out

    def within(self, step: str) -> FrameLengthError:
        self.path.insert(0, step)
        self.args = (f"{''.join(self.path)}: {self.problem}",)
        return self


def check_frame(entity_class: Any, frame: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Raise ``FrameLengthError`` unless every length of ``entity_class`` at ``offset`` fits in the
    frame; the position after the entity otherwise."""
    try:
        return _entity(entity_class)(frame, offset, len(frame))
    except FrameLengthError as error:
        raise error.within(entity_class.__name__) from None


def _need(position: int, size: int, end: int, what: str) -> int:
    if size < 0 or position + size > end:
        raise FrameLengthError(f"{what} of {size} at byte {position}, with {end - position} left")
    return position + size


def _uvarint(frame: bytes | bytearray | memoryview, position: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= end or shift > 28:
            raise FrameLengthError(f"an unsigned varint at byte {position} is cut off or too long")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fixed(size: int) -> Walk:
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        return _need(position, size, end, "a value")
    return walk


def _sized(flexible: bool, legacy_width: int) -> Walk:
    """A string, bytes or records: its size, then that many bytes (null: -1, or 0 when flexible)."""
    legacy = _INT16 if legacy_width == 2 else _INT32

    def walk(frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        if flexible:
            size_plus_one, position = _uvarint(frame, position, end)
            size = size_plus_one - 1
        else:
            _need(position, legacy.size, end, "a size")
            (size,) = legacy.unpack_from(frame, position)
            position += legacy.size
        return position if size == -1 else _need(position, size, end, "a string or bytes")
    return walk


def _array(flexible: bool, element: Walk) -> Walk:
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        if flexible:
            count_plus_one, position = _uvarint(frame, position, end)
            count = count_plus_one - 1
        else:
            _need(position, 4, end, "an array length")
            (count,) = _INT32.unpack_from(frame, position)
            position += 4
        if count == -1:
            return position
        _need(position, count, end, "an array of elements (a byte each at least)")
        for i in range(count):
            try:
                position = element(frame, position, end)
            except FrameLengthError as error:
                raise error.within(f"[{i}]") from None
        return position
    return walk


def _nullable(inner: Walk) -> Walk:
    """KIP-893's nullable struct: a marker byte (-1 null, 1 present), then the struct."""
    def walk(frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        _need(position, 1, end, "a null marker")
        present = frame[position] != 0xFF
        return inner(frame, position + 1, end) if present else position + 1
    return walk


def _field(field: dataclasses.Field[Any], flexible: bool, client_id: bool, tagged: bool) -> Walk | int:
    """How to walk one field, or its size when that is fixed."""
    kind = classify_field(field)
    if client_id:   # RequestHeader.client_id: a legacy nullable string in every header version
        inner: Walk | int = _sized(False, 2)
    elif isinstance(kind, (EntityField, EntityTupleField)):
        inner = _entity(kind.type_)
        optional = type(None) in getattr(field.type, "__args__", ()) and not tagged
        if isinstance(kind, EntityField) and optional:
            inner = _nullable(inner)
    else:
        kafka_type = get_schema_field_type(field)
        if kafka_type in FIXED_SIZES:
            inner = FIXED_SIZES[kafka_type]
        elif kafka_type == "string":
            inner = _sized(flexible, 2)
        elif kafka_type in ("bytes", "records"):
            inner = _sized(flexible, 4)
        else:
            raise TypeError(f"{field.name}: kio type {kafka_type!r} is unknown here")
    if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
        return _array(flexible, _fixed(inner) if isinstance(inner, int) else inner)
    return inner


@functools.lru_cache(maxsize=None)
def _entity(entity_class: Any) -> Walk:
    flexible = bool(entity_class.__flexible__)
    header = entity_class.__name__ == "RequestHeader"
    plain: list[tuple[str, Walk]] = []   # runs of fixed-size fields are one step, named by its first field
    tagged: dict[int, tuple[str, Walk | int]] = {}
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        walk = _field(field, flexible, header and field.name == "client_id", tag is not None)
        if tag is not None:
            tagged[tag] = (f".{field.name}", walk)
        elif isinstance(walk, int):
            if plain and isinstance(plain[-1][1], _Run):
                plain[-1][1].size += walk
            else:
                plain.append((f".{field.name}", _Run(walk)))
        else:
            plain.append((f".{field.name}", walk))
    for i, (name, run) in enumerate(plain):   # a run becomes a plain walk of its whole size
        if isinstance(run, _Run):
            plain[i] = (name, _fixed(run.size))
    tagged_walks = {tag: (name, _fixed(walk) if isinstance(walk, int) else walk)
                    for tag, (name, walk) in tagged.items()}

    def walk_entity(frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        for name, walk in plain:
            try:
                position = walk(frame, position, end)
            except FrameLengthError as error:
                raise error.within(name) from None
        if not flexible:
            return position
        try:
            count, position = _uvarint(frame, position, end)
            _need(position, count, end, "tagged fields (two bytes each at least)")
            for _ in range(count):
                tag, position = _uvarint(frame, position, end)
                size, position = _uvarint(frame, position, end)
                field_end = _need(position, size, end, f"tag {tag}: a tagged field")
                known = tagged_walks.get(tag)
                if known is not None:   # read by kio: its lengths must fit in its own size
                    try:
                        known[1](frame, position, field_end)
                    except FrameLengthError as error:
                        raise error.within(known[0]) from None
                position = field_end
        except FrameLengthError as error:
            if not error.path:
                error.within(" (tagged fields)")
            raise
        return position
    return walk_entity


class _Run:
    """Consecutive fixed-size fields, while an entity's walk is put together."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, frame: bytes | bytearray | memoryview, position: int, end: int) -> int:
        raise AssertionError("a run is replaced by a plain walk before use")
