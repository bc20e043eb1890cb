"""Every length in a Kafka frame checked against the bytes left, before kio reads the frame.

kio's native reader (0.6.5) sets aside room for as many elements as an array says it holds
before it reads them: a request whose array length is a 5-byte varint of four billion makes the
allocation fail, and a failed allocation aborts the whole process -- any client could stop an
engine with a 14-byte Metadata request. Every element takes at least one byte, so a count or a
size past the frame's end is bad input. This walks a frame by its kio class (fields classified as
kio's own writers classify them) reading only lengths, and refuses such a frame with the path of
the field, before kio sees it. Both ends use it: the listener on requests, a follower on its
leader's answers.

Every request passes here, so each kio class gets a walk of its own compiled once into Python
(as ``compiled_writer`` does for writing): runs of fixed-size fields are one bounds check, and a
field's path is put together only when a length does not fit.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

from stratalog.server.kafka.codegen import FunctionSource

# (frame, position, end) → the position after the value; a FrameLengthError names its own field
# on the way out.
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


def _short(what: str, size: int, position: int, end: int) -> FrameLengthError:
    return FrameLengthError(f"{what} of {size} at byte {position}, with {end - position} left")


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


def _tagged_fields(frame: bytes | bytearray | memoryview, position: int, end: int,
                   known: Mapping[int, tuple[str, Walk]]) -> int:
    """A flexible entity's tagged fields: their count, then each tag, its size and its value."""
    try:
        count, position = _uvarint(frame, position, end)
        if position + count > end:
            raise _short("tagged fields (two bytes each at least)", count, position, end)
        for _ in range(count):
            tag, position = _uvarint(frame, position, end)
            size, position = _uvarint(frame, position, end)
            field_end = position + size
            if field_end > end:
                raise _short(f"tag {tag}: a tagged field", size, position, end)
            field = known.get(tag)
            if field is not None:   # read by kio: its lengths must fit in its own size
                try:
                    field[1](frame, position, field_end)
                except FrameLengthError as error:
                    raise error.within(field[0]) from None
            position = field_end
    except FrameLengthError as error:
        if not error.path:
            error.within(" (tagged fields)")
        raise
    return position


@functools.lru_cache(maxsize=None)
def _entity(entity_class: Any) -> Walk:
    return _Compiler(entity_class).compile()


_NAMES = {"FrameLengthError": FrameLengthError, "_short": _short, "_uvarint": _uvarint,
          "_tagged_fields": _tagged_fields, "_INT16": _INT16, "_INT32": _INT32}


class _Compiler(FunctionSource):
    """The source of one class's walk, and the names it refers to."""

    def __init__(self, entity_class: Any) -> None:
        super().__init__(f"frame guard of {entity_class.__module__}.{entity_class.__qualname__}", _NAMES)
        self.cls = entity_class
        self.flexible = bool(entity_class.__flexible__)
        self.run: tuple[str, int] | None = None   # fixed-size fields not yet checked: (first name, size)

    def compile(self) -> Walk:
        header = self.cls.__name__ == "RequestHeader"
        tagged: dict[int, tuple[str, Walk]] = {}
        for field in dataclasses.fields(self.cls):
            tag = get_field_tag(field)
            if tag is not None:
                tagged[tag] = (f".{field.name}", _field_walk(field, self.flexible))
            else:
                self._field(field, legacy_string=header and field.name == "client_id")
        self._check_run()
        if self.flexible:
            known = self.name("tags", tagged)
            self.lines += ["f = ''", "if p < end and frame[p] == 0:", "    p += 1", "else:",
                           f"    p = _tagged_fields(frame, p, end, {known})"]
        walk: Walk = self.make("walk(frame, p, end)", head=["f = ''", "try:"], indent=2,
                               tail=["except FrameLengthError as error:", "    raise error.within(f) from None",
                                     "return p"])
        return walk

    def _check_run(self) -> None:
        if self.run is not None:
            name, size = self.run
            self.lines += [f"f = {name!r}", f"p += {size}", "if p > end:",
                           f"    raise _short('a value', {size}, p - {size}, end)"]
            self.run = None

    def _field(self, field: dataclasses.Field[Any], *, legacy_string: bool) -> None:
        kind = classify_field(field)
        name = f".{field.name}"
        if isinstance(kind, (EntityField, EntityTupleField)):
            self._check_run()
            self.lines.append(f"f = {name!r}")
            walk = self.name("walk", _entity(kind.type_))
            if isinstance(kind, EntityTupleField):
                self._array(walk)
            elif type(None) in getattr(field.type, "__args__", ()):   # KIP-893's nullable struct: a marker byte
                self.lines += ["if p >= end:", "    raise _short('a null marker', 1, p, end)",
                               "if frame[p] == 0xFF:", "    p += 1", "else:", f"    p = {walk}(frame, p + 1, end)"]
            else:
                self.lines.append(f"p = {walk}(frame, p, end)")
            return
        kafka_type = get_schema_field_type(field)
        if kafka_type in FIXED_SIZES and not isinstance(kind, PrimitiveTupleField):
            first, size = self.run if self.run is not None else (name, 0)
            self.run = (first, size + FIXED_SIZES[kafka_type])
            return
        self._check_run()
        self.lines.append(f"f = {name!r}")
        if isinstance(kind, PrimitiveTupleField):
            self._array(self.name("walk", _primitive_walk(kafka_type, self.flexible)))
            return
        self.lines += _sized_lines(kafka_type, self.flexible and not legacy_string, self.cls.__qualname__)

    def _array(self, element: str) -> None:
        """An array's count, then each element by the walk named ``element``."""
        self._count("an array length")
        self.lines += ["if n != -1:",
                       "    if n < 0 or p + n > end:",
                       "        raise _short('an array of elements (a byte each at least)', n, p, end)",
                       "    for i in range(n):",
                       "        try:",
                       f"            p = {element}(frame, p, end)",
                       "        except FrameLengthError as error:",
                       "            raise error.within(f'[{i}]') from None"]

    def _count(self, what: str) -> None:
        """An array's count into ``n`` (-1: null)."""
        if self.flexible:
            self.lines += ["if p < end and frame[p] < 0x80:", "    n = frame[p] - 1", "    p += 1", "else:",
                           "    n, p = _uvarint(frame, p, end)", "    n -= 1"]
        else:
            self.lines += ["if p + 4 > end:", f"    raise _short({what!r}, 4, p, end)",
                           "n = _INT32.unpack_from(frame, p)[0]", "p += 4"]


def _sized_lines(kafka_type: str, flexible: bool, owner: str) -> list[str]:
    """A string, bytes or records: its size into ``n``, then that many bytes (null: -1, or 0 when flexible)."""
    if kafka_type == "string":
        width, legacy = 2, "_INT16"
    elif kafka_type in ("bytes", "records"):
        width, legacy = 4, "_INT32"
    else:
        raise TypeError(f"{owner}: kio type {kafka_type!r} is unknown here")
    if flexible:
        lines = ["if p < end and frame[p] < 0x80:", "    n = frame[p] - 1", "    p += 1", "else:",
                 "    n, p = _uvarint(frame, p, end)", "    n -= 1"]
    else:
        lines = [f"if p + {width} > end:", f"    raise _short('a size', {width}, p, end)",
                 f"n = {legacy}.unpack_from(frame, p)[0]", f"p += {width}"]
    return lines + ["if n != -1:", "    if n < 0 or p + n > end:",
                    "        raise _short('a string or bytes', n, p, end)", "    p += n"]


def _primitive_walk(kafka_type: str, flexible: bool) -> Walk:
    """One element of an array of primitives, or one tagged primitive field."""
    size = FIXED_SIZES.get(kafka_type)
    if size is not None:
        def fixed(frame: bytes | bytearray | memoryview, p: int, end: int) -> int:
            if p + size > end:
                raise _short("a value", size, p, end)
            return p + size
        return fixed
    source = FunctionSource(f"frame guard of a {kafka_type}", _NAMES)
    source.lines += _sized_lines(kafka_type, flexible, kafka_type)
    walk: Walk = source.make("walk(frame, p, end)", tail=["return p"])
    return walk


def _field_walk(field: dataclasses.Field[Any], flexible: bool) -> Walk:
    """A tagged field's value (tagged fields are never nullable structs: their absence is their null)."""
    kind = classify_field(field)
    if isinstance(kind, (EntityField, EntityTupleField)):
        inner = _entity(kind.type_)
        if isinstance(kind, EntityField):
            return inner
        return _array(flexible, inner)
    element = _primitive_walk(get_schema_field_type(field), flexible)
    return _array(flexible, element) if isinstance(kind, PrimitiveTupleField) else element


def _array(flexible: bool, element: Walk) -> Walk:
    def walk(frame: bytes | bytearray | memoryview, p: int, end: int) -> int:
        if flexible:
            n, p = _uvarint(frame, p, end)
            n -= 1
        else:
            if p + 4 > end:
                raise _short("an array length", 4, p, end)
            n = _INT32.unpack_from(frame, p)[0]
            p += 4
        if n == -1:
            return p
        if n < 0 or p + n > end:
            raise _short("an array of elements (a byte each at least)", n, p, end)
        for i in range(n):
            try:
                p = element(frame, p, end)
            except FrameLengthError as error:
                raise error.within(f"[{i}]") from None
        return p
    return walk
