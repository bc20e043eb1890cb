"""One setting as data: its Kafka name, type, default, range and choices, and how a value of it is read.

Why a module of its own: every table of settings (``topic_keys``, ``engine_keys``), the API's and
the CRDs' schema generators and every error message read settings through ``ConfigKey``, so a
value means the same wherever it comes from (a properties file, ``--config``, the HTTP API, a
custom resource). Parsing follows Java's syntax and Kafka's rules, and a value is written back
as Kafka writes it.
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from types import MappingProxyType
from typing import Literal, TypeAlias

from stratalog.common.errors import InvalidConfigError
from stratalog.common.limits import INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX

# Java's Double.MAX_VALUE, Kafka's "unlimited" for the cleaner throttle.
DOUBLE_MAX = sys.float_info.max

# A parsed value. Lists are frozensets: the only list config (cleanup.policy) is a set,
# and a frozenset keeps LogConfig hashable and comparable regardless of input order.
ConfigValue: TypeAlias = int | float | bool | str | frozenset[str]


class ConfigType(Enum):
    """Value types, as Kafka's ``ConfigDef.Type`` (without CLASS/PASSWORD, unused here)."""

    INT = "int"  # int32
    LONG = "long"  # int64
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"  # comma-separated


_TYPE_BOUNDS: dict[ConfigType, tuple[int | float, int | float]] = {
    ConfigType.INT: (INT32_MIN, INT32_MAX),
    ConfigType.LONG: (INT64_MIN, INT64_MAX),
    ConfigType.DOUBLE: (-DOUBLE_MAX, DOUBLE_MAX),
}

# Java's Integer/Long.parseLong and Double.parseDouble syntax (minus hex floats and the
# d/f suffixes nobody writes in a properties file). Python's int()/float() would also
# take "1_000" and "infinity", which Kafka refuses or which cannot go into JSON.
_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _java_double(x: float) -> str:
    """Format ``x`` as Java's ``Double.toString`` does, so written properties match Kafka's."""
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)  # Python's shortest repr is positional in this range, like Java's
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    scientific_exponent = len(digits) - 1 + exponent
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{scientific_exponent}"


def show(value: object) -> str:
    """Render a given value for an error message."""
    if isinstance(value, (frozenset, set)):
        return ",".join(sorted(str(v) for v in value))
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def suggest(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


@dataclass(frozen=True)
class ConfigKey:
    """One setting: its Kafka name, type, default, documentation and validity rules.

    All rules are plain data (no callables) so that API schemas and CRD schemas can be
    generated from the same definition the engine validates with.
    """

    name: str
    type: ConfigType
    default: ConfigValue | None  # None: unset, a lower-priority synonym supplies the value
    doc: str
    minimum: int | float | None = None
    maximum: int | float | None = None
    # Allowed values of a STRING, or allowed items of a LIST.
    choices: tuple[str, ...] | None = None
    # For topic keys: the highest-priority broker key that supplies the default
    # (full chain, with unit conversions, in SERVER_SYNONYMS).
    synonym: str | None = None
    scope: Literal["topic", "engine"] = "topic"
    # Integers accepted outside [minimum, maximum]: gzip's -1 ("library default") is
    # the one such case; kept as data rather than a validator function (see class doc).
    also_allowed: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # A definition whose own default it would refuse is a bug; fail at import.
        if self.default is not None and self.parse(self.default) != self.default:
            raise AssertionError(f"default of {self.name} does not round-trip")

    @property
    def attribute(self) -> str:
        """The snake_case attribute of LogConfig/EngineConfig holding this key."""
        return self.name.replace(".", "_")

    @property
    def lower_bound(self) -> int | float | None:
        """Smallest accepted number: the key's minimum, else its type's (None if not numeric)."""
        if self.type not in _TYPE_BOUNDS:
            return None
        return self.minimum if self.minimum is not None else _TYPE_BOUNDS[self.type][0]

    @property
    def upper_bound(self) -> int | float | None:
        """Largest accepted number: the key's maximum, else its type's (None if not numeric)."""
        if self.type not in _TYPE_BOUNDS:
            return None
        return self.maximum if self.maximum is not None else _TYPE_BOUNDS[self.type][1]

    @property
    def allowed(self) -> str:
        """Human description of the valid values, as used in error messages."""
        if self.type in _TYPE_BOUNDS:
            lo, hi = self.lower_bound, self.upper_bound
            assert lo is not None and hi is not None
            if self.type is ConfigType.DOUBLE and self.minimum is None and self.maximum is None:
                return "any finite number"
            span = f"[{self._number(lo)}, {self._number(hi)}]"
            if self.also_allowed:
                return " or ".join(str(v) for v in self.also_allowed) + f" or {span}"
            return span
        if self.type is ConfigType.BOOLEAN:
            return "true, false"
        if self.type is ConfigType.LIST:
            items = ", ".join(self.choices) if self.choices else "any strings"
            return f"comma-separated list of {items}"
        return ", ".join(self.choices) if self.choices else "any string"

    def parse(self, value: object) -> ConfigValue:
        """Convert a string (as in a properties file) or a native value, and validate it.

        Raises InvalidConfigError naming the key, the value and what is allowed.
        """
        return self.parse_as(value, f"config '{self.name}'")

    def parse_as(self, value: object, label: str) -> ConfigValue:
        """``parse`` with the setting named ``label`` in errors: a broker key that feeds a topic key
        is named as the user gave it while the topic key's rules apply
        (``EngineConfig.log_config_defaults``)."""
        if self.type in (ConfigType.INT, ConfigType.LONG):
            return self._parse_integer(value, label)
        if self.type is ConfigType.DOUBLE:
            return self._parse_double(value, label)
        if self.type is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            raise self._invalid(value, label, "must be true or false")
        if self.type is ConfigType.STRING:
            if not isinstance(value, str):
                raise self._invalid(value, label, "must be a string")
            text = value.strip()  # Kafka trims string values
            self._check_choice(value, text, label)
            return text
        return self._parse_list(value, label)

    def to_string(self, value: ConfigValue) -> str:
        """The value as Kafka would write it in a properties file (parse() reads it back)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, frozenset):
            return ",".join(sorted(value))
        if isinstance(value, float):
            return _java_double(value)
        return str(value)

    # -- internals ---------------------------------------------------------------------

    def _number(self, x: int | float) -> str:
        return _java_double(float(x)) if self.type is ConfigType.DOUBLE else str(x)

    def _invalid(self, value: object, label: str, problem: str, hint: str = "") -> InvalidConfigError:
        return InvalidConfigError(
            f"invalid value '{show(value)}' for {label}: {problem} (allowed: {self.allowed}){hint}"
        )

    def _parse_integer(self, value: object, label: str) -> int:
        width = "32-bit" if self.type is ConfigType.INT else "64-bit"
        if isinstance(value, bool):  # bool is an int subclass; True is not a number here
            raise self._invalid(value, label, f"must be a {width} integer")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            raise self._invalid(value, label, f"must be a {width} integer")
        self._check_range(value, number, label)
        return number

    def _parse_double(self, value: object, label: str) -> float:
        if isinstance(value, bool):
            raise self._invalid(value, label, "must be a number")
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str) and _DOUBLE_RE.fullmatch(value.strip()):
            number = float(value.strip())
        else:
            raise self._invalid(value, label, "must be a number")
        if not math.isfinite(number):
            # NaN/inf cannot be range-checked meaningfully nor written to JSON/CRDs.
            raise self._invalid(value, label, "must be a finite number")
        self._check_range(value, number, label)
        return number

    def _check_range(self, given: object, number: int | float, label: str) -> None:
        if number in self.also_allowed:
            return
        lo, hi = self.lower_bound, self.upper_bound
        assert lo is not None and hi is not None
        if lo <= number <= hi:
            return
        if self.also_allowed:
            alternatives = " or ".join(str(v) for v in self.also_allowed)
            problem = f"must be {alternatives} or between {self._number(lo)} and {self._number(hi)}"
        elif number < lo:
            problem = f"must be at least {self._number(lo)}"
        else:
            problem = f"must be at most {self._number(hi)}"
        raise self._invalid(given, label, problem)

    def _check_choice(self, given: object, item: str, label: str) -> None:
        # Case-sensitive, like Kafka's ValidString/ValidList.
        if self.choices is not None and item not in self.choices:
            what = f"'{item}' is not a valid choice" if self.type is ConfigType.LIST else "not a valid choice"
            raise self._invalid(given, label, what, suggest(item, self.choices))

    def _parse_list(self, value: object, label: str) -> frozenset[str]:
        if isinstance(value, str):
            text = value.strip()
            # Kafka: blank means the empty list (for cleanup.policy: keep forever, 4.x).
            items = [] if not text else [item.strip() for item in text.split(",")]
        elif isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            items = [str(v).strip() for v in value]
        else:
            raise self._invalid(value, label, "must be a comma-separated string or a list of strings")
        for item in items:
            if not item:
                raise self._invalid(value, label, "contains an empty item")
            self._check_choice(value, item, label)
        return frozenset(items)


def index(keys: Iterable[ConfigKey]) -> Mapping[str, ConfigKey]:
    table = {key.name: key for key in keys}
    return MappingProxyType(table)

