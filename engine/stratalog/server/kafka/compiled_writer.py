"""Kafka frames written straight from plain values, by code made once per kio class.

The listener's handlers answer with dicts keyed by the schema's field names, and a follower asks
its leader the same way. kio's writers (0.6.5) are pure Python that walks its dataclasses field by
field, after ``build`` has made those dataclasses from the dicts: about 60 µs for a one-partition
Fetch answer, the largest cost of answering a follower or a consumer after the read. This
compiles each kio class, once, into a Python function (as ``dataclasses`` makes ``__init__``)
that packs each run of fixed-width fields with one ``struct`` call and writes the bytes kio would
write: field order, types, null markers and defaults are read from kio's classes with kio's own
introspection. Tagged fields, few and mostly left at their defaults, are still written by kio's
writers. The tests hold the two byte for byte over every request and response this listener offers.

Record batches of 32 KiB or more and file regions are not copied into the frame: they end the
current buffer and are pieces of their own, sent as they are (a region from its file by sendfile).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import io
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field
from kio.static.primitive import uvarint as uvarint_type

from stratalog.broker.fetch import FileRegion
from stratalog.records.varint import encode_unsigned_varint as uvarint
from stratalog.server.kafka.codegen import FunctionSource
from stratalog.server.kafka.entities import converter

LARGE = 32 * 1024   # record batches this large are sent from their own buffer, not copied

# (the buffer being filled, the pieces cut so far, the plain values) → the buffer to go on with
EntityWriter = Callable[[bytearray, list[Any], Mapping[str, Any]], bytearray]

_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H", "uint32": "I",
          "uint64": "Q", "float64": "d", "bool": "?", "error_code": "h", "timedelta_i32": "i",
          "timedelta_i64": "q", "uuid": "16s", "datetime_i64": "q"}
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
_ZERO_UUID = bytes(16)


class MissingField(KeyError):
    """A field the version needs that the handler's values do not have (a bug of the handler's)."""


class FieldValueError(ValueError):
    """A value that does not fit its field's type (an int16 past 32767, None for an int): a bug of the
    handler's, named with the class whose field it is."""


def write_frame(header_class: Any, header: Mapping[str, Any], body_class: Any, values: Mapping[str, Any]
                ) -> list[Any]:
    """A request or response frame, size prefix included, as the pieces to send in order
    (bytearrays, record batches as they were given, file regions)."""
    pieces: list[Any] = []
    buffer = entity_writer(header_class)(bytearray(4), pieces, header)
    buffer = entity_writer(body_class)(buffer, pieces, values)
    if buffer:
        pieces.append(buffer)
    first = pieces[0]   # a bytearray: the size prefix and the header open the first buffer
    first[0:4] = (sum(len(piece) for piece in pieces) - 4).to_bytes(4, "big")
    return pieces


def _uuid(value: uuid.UUID | None) -> bytes:
    return _ZERO_UUID if value is None else value.bytes


def _nullable_millis(value: int | None) -> int:
    return -1 if value is None or value < 0 else value


def plain(value: Any) -> Any:
    """A kio value as the handlers give it: entities as dicts, tuples as lists, error codes as
    ints, durations and times as milliseconds (what ``entities.build`` takes back)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return value


@functools.lru_cache(maxsize=None)
def entity_writer(entity_class: Any) -> EntityWriter:
    """The compiled writer of one kio class (compiled the first time it is asked for)."""
    return _Compiler(entity_class).compile()


class _Compiler(FunctionSource):
    """The source of one class's writer, and the names it refers to."""

    def __init__(self, entity_class: Any) -> None:
        super().__init__(f"kafka writer of {entity_class.__module__}.{entity_class.__qualname__}",
                         {"FileRegion": FileRegion, "LARGE": LARGE, "MissingField": MissingField,
                          "FieldValueError": FieldValueError, "struct_error": struct.error, "uvarint": uvarint,
                          "_uuid": _uuid,
                          "_nullable_millis": _nullable_millis, "_INT16": _INT16, "_INT32": _INT32})
        self.cls = entity_class
        self.flexible = bool(entity_class.__flexible__)
        self.run: list[tuple[str, str]] = []   # fixed-width fields not yet packed: (struct code, expression)
        # RequestHeader.client_id is a legacy nullable string in every header version (Kafka's exception)
        self.legacy_client_id = entity_class.__name__ == "RequestHeader"

    def compile(self) -> EntityWriter:
        tagged = []
        for field in dataclasses.fields(self.cls):
            if get_field_tag(field) is not None:
                tagged.append(field)
            else:
                self._field(field)
        self._pack_run()
        if self.flexible:
            self.lines.append(f"buf += {self.name('tags', _tag_writer(tagged))}(v)" if tagged
                              else "buf += b'\\x00'")
        # A field the version needs and the handler left out, or a value that does not fit its field:
        # named with its class, once, at the innermost.
        name = f"{self.cls.__module__}.{self.cls.__qualname__}"
        writer: EntityWriter = self.make("write(buf, pieces, v)", head=["try:"], indent=2, tail=[
            "except (MissingField, FieldValueError):", "    raise",
            "except KeyError as missing:",
            f"    raise MissingField(f'{name} needs {{missing.args[0]!r}}') from None",
            "except struct_error as bad:",
            f"    raise FieldValueError(f'{name}: a value does not fit its field: {{bad}}') from None",
            "return buf"])
        return writer

    def _value(self, field: dataclasses.Field[Any]) -> str:
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:   # required: a missing value is the handler's mistake, named by the KeyError
            return f"v[{field.name!r}]"
        return f"v.get({field.name!r}, {self.name('default', plain(default))})"

    def _field(self, field: dataclasses.Field[Any]) -> None:
        kind = classify_field(field)
        value = self._value(field)
        optional = is_optional(field)
        if isinstance(kind, PrimitiveField):
            kafka_type = get_schema_field_type(field)
            if kafka_type in _FIXED:
                self.run.append((_FIXED[kafka_type], self._fixed_expression(kafka_type, value, optional)))
                return
            self._pack_run()
            self.lines.append(f"x = {value}")
            legacy_client_id = self.legacy_client_id and field.name == "client_id"
            self._sized("x", kafka_type, optional or legacy_client_id, self.lines, "", legacy=legacy_client_id)
            return
        self._pack_run()
        self.lines.append(f"x = {value}")
        if isinstance(kind, EntityField):
            write = self.name("entity", entity_writer(kind.type_))
            if optional:   # KIP-893's nullable struct: a marker byte, then the struct
                self.lines += ["if x is None:", "    buf += b'\\xff'", "else:", "    buf += b'\\x01'",
                               f"    buf = {write}(buf, pieces, x)"]
            else:
                self.lines.append(f"buf = {write}(buf, pieces, x)")
            return
        self._array_length("x")
        self.lines.append("if x is not None:")
        self.lines.append("    for i in x:")
        if isinstance(kind, EntityTupleField):
            self.lines.append(f"        buf = {self.name('entity', entity_writer(kind.type_))}(buf, pieces, i)")
            return
        kafka_type = get_schema_field_type(field)
        if kafka_type in _FIXED:
            item = struct.Struct(">" + _FIXED[kafka_type])
            self.lines.append(f"        buf += {self.name('struct', item)}.pack("
                              f"{self._fixed_expression(kafka_type, 'i', False)})")
        else:
            self._sized("i", kafka_type, False, self.lines, "        ")

    @staticmethod
    def _fixed_expression(kafka_type: str, value: str, optional: bool) -> str:
        if kafka_type == "uuid":
            return f"_uuid({value})"
        if kafka_type == "datetime_i64" and optional:   # handlers say "none" with -1 or None
            return f"_nullable_millis({value})"
        return value

    def _pack_run(self) -> None:
        if self.run:
            packer = struct.Struct(">" + "".join(code for code, _ in self.run))
            self.lines.append(f"buf += {self.name('struct', packer)}.pack({', '.join(e for _, e in self.run)})")
            self.run = []

    def _array_length(self, var: str) -> None:
        if self.flexible:
            self.lines.append(f"buf += b'\\x00' if {var} is None else uvarint(len({var}) + 1)")
        else:
            self.lines.append(f"buf += _INT32.pack(-1 if {var} is None else len({var}))")

    def _sized(self, var: str, kafka_type: str, optional: bool, lines: list[str], indent: str, *,
               legacy: bool = False) -> None:
        """A string, bytes or records value: its size, then the value (null: size -1, or 0 when flexible)."""
        flexible = self.flexible and not legacy
        if kafka_type == "string":
            data, length = f"{var}.encode()", _INT16
        elif kafka_type in ("bytes", "records"):
            data, length = var, _INT32
        else:
            raise TypeError(f"{self.cls.__qualname__}: kio type {kafka_type!r} is unknown here")
        inner = indent
        if optional:
            null = "b'\\x00'" if flexible else f"{self.name('struct', length)}.pack(-1)"
            lines += [f"{indent}if {var} is None:", f"{indent}    buf += {null}", f"{indent}else:"]
            inner = indent + "    "
        lines.append(f"{inner}s = {data}")
        if flexible:
            lines.append(f"{inner}buf += uvarint(len(s) + 1)")
        else:
            lines.append(f"{inner}buf += {self.name('struct', length)}.pack(len(s))")
        if kafka_type == "string":
            lines.append(f"{inner}buf += s")
            return
        lines += [f"{inner}if s.__class__ is FileRegion or len(s) >= LARGE:",
                  f"{inner}    pieces.append(buf)", f"{inner}    pieces.append(s)", f"{inner}    buf = bytearray()",
                  f"{inner}else:", f"{inner}    buf += s"]


def _tag_writer(tagged: list[dataclasses.Field[Any]]) -> Callable[[Mapping[str, Any]], bytes]:
    """The tagged fields of a flexible class, by kio's writers: each one the values give that is not
    at its default, in the order of their tags, after their count."""
    plan = []
    for field in sorted(tagged, key=lambda f: f.metadata["tag"]):
        plan.append((field.name, uvarint_type(field.metadata["tag"]),
                     converter(field.type, field.metadata.get("kafka_type")),
                     get_field_writer(field, flexible=True, is_request_header=False, is_tag=True),
                     field.default, get_tagged_field_default(field)))

    def write(values: Mapping[str, Any]) -> bytes:
        count = 0
        out = io.BytesIO()
        for name, tag, convert, write_value, default, implicit in plan:
            if name not in values:
                continue
            value = convert(values[name])
            if value == default or (default is dataclasses.MISSING and value == implicit):
                continue
            write_tagged_field(out, tag, write_value, value)
            count += 1
        return uvarint(count) + out.getvalue()
    return write
