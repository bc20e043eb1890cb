"""Definitions and validation of every setting stratalog understands, under Kafka's names.

Why this module exists: topic configs (``retention.ms``, ``cleanup.policy``, ...) and
engine configs (``log.retention.hours``, ``log.cleaner.threads``, ...) arrive from many
places -- CLI ``--config key=value`` flags, the HTTP API, Kubernetes custom resources,
Kafka ``server.properties`` files -- and must be understood identically everywhere.
So each setting is declared once, as data (a :class:`ConfigKey`: type, default, range,
choices, broker synonym), in :data:`TOPIC_CONFIGS` and :data:`ENGINE_CONFIGS`.  The
engine reads typed values from :class:`LogConfig` / :class:`EngineConfig`; the API and
CRD generators read the same tables to describe and validate settings.

Defaults and ranges are Kafka 4.x's (``LogConfig``, ``ServerLogConfigs``,
``CleanerConfig``), with the deliberate exceptions noted at each key.  Every failure
raises :class:`~stratalog.common.errors.InvalidConfigError` naming the key, the value given
and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from stratalog.common.errors import InvalidConfigError
from stratalog.common.limits import INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX

__all__ = [
    "ConfigType",
    "ConfigValue",
    "ConfigKey",
    "ServerSynonym",
    "TOPIC_CONFIGS",
    "ENGINE_CONFIGS",
    "SERVER_SYNONYMS",
    "REMOVED_CONFIGS",
    "topic_config_key",
    "engine_config_key",
    "LogConfig",
    "EngineConfig",
    "parse_key_value_pairs",
    "validate_topic_overrides",
]

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


def _show(value: object) -> str:
    """Render a given value for an error message."""
    if isinstance(value, (frozenset, set)):
        return ",".join(sorted(str(v) for v in value))
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _suggest(name: str, candidates: Iterable[str]) -> str:
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
        return self._parse(value, f"config '{self.name}'")

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
            f"invalid value '{_show(value)}' for {label}: {problem} (allowed: {self.allowed}){hint}"
        )

    def _parse(self, value: object, label: str) -> ConfigValue:
        # ``label`` lets a broker key that feeds a topic key be named in the message
        # while the topic key's rules are applied (see EngineConfig.log_config_defaults).
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
            raise self._invalid(given, label, what, _suggest(item, self.choices))

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


def _index(keys: Iterable[ConfigKey]) -> Mapping[str, ConfigKey]:
    table = {key.name: key for key in keys}
    return MappingProxyType(table)


_L = ConfigType.LONG
_I = ConfigType.INT
_D = ConfigType.DOUBLE
_B = ConfigType.BOOLEAN
_S = ConfigType.STRING

_CLEANUP_POLICIES = ("compact", "delete")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_WEEK_MS = 7 * 24 * 60 * 60 * 1000

#: Topic-level configs (Kafka's ``LogConfig``), by Kafka name.
TOPIC_CONFIGS: Mapping[str, ConfigKey] = _index(
    [
        ConfigKey(
            "cleanup.policy", ConfigType.LIST, frozenset({"delete"}),
            "What happens to old segments: 'delete' discards them past retention.ms/retention.bytes, "
            "'compact' keeps the latest record per key, both may be combined; an empty list keeps everything.",
            choices=_CLEANUP_POLICIES, synonym="log.cleanup.policy",
        ),
        ConfigKey(
            "retention.ms", _L, _WEEK_MS,
            "How long a segment is kept (by its largest record timestamp) before the delete policy "
            "may discard it; -1 means no time limit.",
            minimum=-1, synonym="log.retention.ms",
        ),
        ConfigKey(
            "retention.bytes", _L, -1,
            "Largest size a partition may grow to before the delete policy discards its oldest "
            "segments; negative means no size limit.",
            synonym="log.retention.bytes",
        ),
        ConfigKey(
            "segment.bytes", _I, 1024 * 1024 * 1024,
            "Size at which the active segment is rolled.",
            # Kafka 3.x's minimum, not 4.x's 1 MiB (KIP-1030), so tiny segments stay testable.
            minimum=14, synonym="log.segment.bytes",
        ),
        ConfigKey(
            "segment.ms", _L, _WEEK_MS,
            "Age at which the active segment is rolled even if not full, so retention and "
            "compaction can act on it.",
            minimum=1, synonym="log.roll.ms",
        ),
        ConfigKey(
            "segment.jitter.ms", _L, 0,
            "Largest random amount subtracted from segment.ms per segment, so many partitions do "
            "not roll at the same moment.",
            minimum=0, synonym="log.roll.jitter.ms",
        ),
        ConfigKey(
            "segment.index.bytes", _I, 10 * 1024 * 1024,
            "Size preallocated for each segment's offset and time index; a segment rolls when "
            "an index is full.",
            minimum=4, synonym="log.index.size.max.bytes",
        ),
        ConfigKey(
            "index.interval.bytes", _I, 4096,
            "Bytes of records appended between two offset-index entries.",
            minimum=0, synonym="log.index.interval.bytes",
        ),
        ConfigKey(
            "max.message.bytes", _I, 1024 * 1024 + 12,
            "Largest record batch (after compression) the log accepts.",
            minimum=0, synonym="message.max.bytes",
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio", _D, 0.5,
            "Share of a compacted log that must be uncleaned before the cleaner considers it.",
            minimum=0, maximum=1, synonym="log.cleaner.min.cleanable.ratio",
        ),
        ConfigKey(
            "max.compaction.lag.ms", _L, INT64_MAX,
            "Longest time a record may stay uncompacted; past it the log is cleaned whatever "
            "its dirty ratio.",
            minimum=1, synonym="log.cleaner.max.compaction.lag.ms",
        ),
        ConfigKey(
            "min.compaction.lag.ms", _L, 0,
            "Shortest time a record stays uncompacted; must not exceed max.compaction.lag.ms.",
            minimum=0, synonym="log.cleaner.min.compaction.lag.ms",
        ),
        ConfigKey(
            "delete.retention.ms", _L, 24 * 60 * 60 * 1000,
            "How long tombstones and transaction markers survive compaction, giving readers "
            "time to see them.",
            minimum=0, synonym="log.cleaner.delete.retention.ms",
        ),
        ConfigKey(
            "file.delete.delay.ms", _L, 60000,
            "Delay between renaming a segment to .deleted and removing its files.",
            minimum=0, synonym="log.segment.delete.delay.ms",
        ),
        ConfigKey(
            "flush.messages", _L, INT64_MAX,
            "Records appended between forced fsyncs; the default leaves flushing to the OS.",
            minimum=1, synonym="log.flush.interval.messages",
        ),
        ConfigKey(
            "flush.ms", _L, INT64_MAX,
            "Time between forced fsyncs; the default leaves flushing to the OS.",
            minimum=0, synonym="log.flush.interval.ms",
        ),
        ConfigKey(
            "message.timestamp.type", _S, "CreateTime",
            "Whether record timestamps are the producer's (CreateTime) or set by the log on "
            "append (LogAppendTime).",
            choices=_TIMESTAMP_TYPES, synonym="log.message.timestamp.type",
        ),
        ConfigKey(
            "message.timestamp.before.max.ms", _L, INT64_MAX,
            "With CreateTime, how far in the past a record timestamp may be before the append "
            "is refused.",
            minimum=0, synonym="log.message.timestamp.before.max.ms",
        ),
        ConfigKey(
            "message.timestamp.after.max.ms", _L, 3600000,  # 1 h since Kafka 4.0 (KIP-1030)
            "With CreateTime, how far in the future a record timestamp may be before the append "
            "is refused.",
            minimum=0, synonym="log.message.timestamp.after.max.ms",
        ),
        ConfigKey(
            "compression.type", _S, "producer",
            "Codec the log stores batches with; 'producer' keeps the producer's codec.",
            choices=_COMPRESSION_TYPES, synonym="compression.type",
        ),
        ConfigKey(
            "compression.gzip.level", _I, -1,
            "gzip level when the log recompresses with gzip; -1 is the library default.",
            minimum=1, maximum=9, also_allowed=(-1,), synonym="compression.gzip.level",
        ),
        ConfigKey(
            "compression.lz4.level", _I, 9,
            "lz4 level when the log recompresses with lz4.",
            minimum=1, maximum=17, synonym="compression.lz4.level",
        ),
        ConfigKey(
            "compression.zstd.level", _I, 3,
            "zstd level when the log recompresses with zstd.",
            minimum=-131072, maximum=22, synonym="compression.zstd.level",
        ),
        ConfigKey(
            "preallocate", _B, False,
            "Whether a new segment file is preallocated to segment.bytes.",
            synonym="log.preallocate",
        ),
        ConfigKey(
            "min.insync.replicas", _I, 1,
            "Replicas that must acknowledge an acks=all write (replication layer; stored, not "
            "enforced by the engine).",
            minimum=1, synonym="min.insync.replicas",
        ),
        ConfigKey(
            "unclean.leader.election.enable", _B, False,
            "Whether an out-of-sync replica may become leader (replication layer; stored, not "
            "enforced by the engine).",
            synonym="unclean.leader.election.enable",
        ),
        ConfigKey(
            "local.retention.ms", _L, -2,
            "Tiered storage: how long segments stay on local disk; -2 means retention.ms. "
            "Must not exceed retention.ms.",
            minimum=-2, synonym="log.local.retention.ms",
        ),
        ConfigKey(
            "local.retention.bytes", _L, -2,
            "Tiered storage: local size limit per partition; -2 means retention.bytes. "
            "Must not exceed retention.bytes.",
            minimum=-2, synonym="log.local.retention.bytes",
        ),
    ]
)


@dataclass(frozen=True)
class ServerSynonym:
    """A broker key supplying a topic key's default; ``multiplier`` converts its unit to the topic's."""

    name: str
    multiplier: int = 1


_HOUR_MS = 60 * 60 * 1000

#: For each topic key, the broker keys that supply its default, highest priority first
#: (Kafka's ``ServerTopicConfigSynonyms``): the first one set wins, e.g.
#: log.retention.ms > log.retention.minutes > log.retention.hours.
SERVER_SYNONYMS: Mapping[str, tuple[ServerSynonym, ...]] = MappingProxyType(
    {
        "cleanup.policy": (ServerSynonym("log.cleanup.policy"),),
        "retention.ms": (
            ServerSynonym("log.retention.ms"),
            ServerSynonym("log.retention.minutes", 60 * 1000),
            ServerSynonym("log.retention.hours", _HOUR_MS),
        ),
        "retention.bytes": (ServerSynonym("log.retention.bytes"),),
        "segment.bytes": (ServerSynonym("log.segment.bytes"),),
        "segment.ms": (ServerSynonym("log.roll.ms"), ServerSynonym("log.roll.hours", _HOUR_MS)),
        "segment.jitter.ms": (
            ServerSynonym("log.roll.jitter.ms"),
            ServerSynonym("log.roll.jitter.hours", _HOUR_MS),
        ),
        "segment.index.bytes": (ServerSynonym("log.index.size.max.bytes"),),
        "index.interval.bytes": (ServerSynonym("log.index.interval.bytes"),),
        "max.message.bytes": (ServerSynonym("message.max.bytes"),),
        "min.cleanable.dirty.ratio": (ServerSynonym("log.cleaner.min.cleanable.ratio"),),
        "max.compaction.lag.ms": (ServerSynonym("log.cleaner.max.compaction.lag.ms"),),
        "min.compaction.lag.ms": (ServerSynonym("log.cleaner.min.compaction.lag.ms"),),
        "delete.retention.ms": (ServerSynonym("log.cleaner.delete.retention.ms"),),
        "file.delete.delay.ms": (ServerSynonym("log.segment.delete.delay.ms"),),
        "flush.messages": (ServerSynonym("log.flush.interval.messages"),),
        "flush.ms": (
            ServerSynonym("log.flush.interval.ms"),
            ServerSynonym("log.flush.scheduler.interval.ms"),
        ),
        "message.timestamp.type": (ServerSynonym("log.message.timestamp.type"),),
        "message.timestamp.before.max.ms": (ServerSynonym("log.message.timestamp.before.max.ms"),),
        "message.timestamp.after.max.ms": (ServerSynonym("log.message.timestamp.after.max.ms"),),
        "compression.type": (ServerSynonym("compression.type"),),
        "compression.gzip.level": (ServerSynonym("compression.gzip.level"),),
        "compression.lz4.level": (ServerSynonym("compression.lz4.level"),),
        "compression.zstd.level": (ServerSynonym("compression.zstd.level"),),
        "preallocate": (ServerSynonym("log.preallocate"),),
        "min.insync.replicas": (ServerSynonym("min.insync.replicas"),),
        "unclean.leader.election.enable": (ServerSynonym("unclean.leader.election.enable"),),
        "local.retention.ms": (ServerSynonym("log.local.retention.ms"),),
        "local.retention.bytes": (ServerSynonym("log.local.retention.bytes"),),
    }
)

# Kafka (KafkaConfig.logRetentionTimeMillis) turns any negative broker retention time,
# e.g. log.retention.hours=-1, into -1 ("no limit") rather than refusing it.
_NEGATIVE_MEANS_UNLIMITED = frozenset({"retention.ms"})


def _engine(
    name: str,
    type_: ConfigType,
    default: ConfigValue | None,
    doc: str,
    *,
    minimum: int | float | None = None,
    maximum: int | float | None = None,
    choices: tuple[str, ...] | None = None,
    also_allowed: tuple[int, ...] = (),
) -> ConfigKey:
    return ConfigKey(
        name, type_, default, doc, minimum=minimum, maximum=maximum, choices=choices,
        scope="engine", also_allowed=also_allowed,
    )


def _engine_synonym(name: str, topic: str, default: ConfigValue | None, doc: str, **rules: Any) -> ConfigKey:
    """A broker key feeding ``topic``: same type and, unless given, the same rules."""
    t = TOPIC_CONFIGS[topic]
    return _engine(
        name, t.type, default, doc,
        minimum=rules.get("minimum", t.minimum), maximum=rules.get("maximum", t.maximum),
        choices=t.choices, also_allowed=t.also_allowed,
    )


def _same_as_topic(name: str, topic: str | None = None) -> ConfigKey:
    t = TOPIC_CONFIGS[topic or name]
    return _engine_synonym(name, t.name, t.default, f"Default of topic config {t.name}: {t.doc}")


#: Engine-level (broker) configs of the log layer, by Kafka name.
ENGINE_CONFIGS: Mapping[str, ConfigKey] = _index(
    [
        _engine(
            "log.retention.check.interval.ms", _L, 300000,
            "Period of the retention task that deletes segments past retention.", minimum=1,
        ),
        _engine(
            "log.initial.task.delay.ms", _L, 30000,
            "Delay before the first run of every periodic log task (Kafka internal, for tests).",
            minimum=0,
        ),
        _engine(
            "log.flush.scheduler.interval.ms", _L, INT64_MAX,
            "Period of the task that checks whether any log is due a time-based flush; also "
            "flush.ms's default when log.flush.interval.ms is unset.",
        ),
        _engine(
            "log.flush.offset.checkpoint.interval.ms", _I, 60000,
            "Period of writing recovery-point-offset-checkpoint.", minimum=0,
        ),
        _engine(
            "log.flush.start.offset.checkpoint.interval.ms", _I, 60000,
            "Period of writing log-start-offset-checkpoint.", minimum=0,
        ),
        _engine(
            "num.recovery.threads.per.data.dir", _I, 2,  # 2 since Kafka 4.0 (KIP-1030)
            "Threads per data directory loading and recovering logs at startup and flushing "
            "them at shutdown.",
            minimum=1,
        ),
        _engine(
            "log.cleaner.enable", _B, True,
            "Whether the cleaner runs; without it compacted topics grow forever.",
        ),
        _engine("log.cleaner.threads", _I, 1, "Number of cleaner threads.", minimum=0),
        _engine(
            "log.cleaner.dedupe.buffer.size", _L, 128 * 1024 * 1024,
            "Memory for the key-deduplication maps, shared by all cleaner threads.",
        ),
        _engine(
            "log.cleaner.io.buffer.size", _I, 512 * 1024,
            "Memory for cleaner read/write buffers, shared by all cleaner threads.", minimum=0,
        ),
        _engine(
            "log.cleaner.io.buffer.load.factor", _D, 0.9,
            "Fill ratio of the dedupe map (despite the name, not an I/O buffer setting).",
        ),
        _engine(
            "log.cleaner.backoff.ms", _L, 15000,
            "Sleep of a cleaner thread when no log needs cleaning.", minimum=0,
        ),
        _engine(
            "log.cleaner.io.max.bytes.per.second", _D, DOUBLE_MAX,
            "Read plus write throughput limit shared by all cleaner threads.",
        ),
        _engine(
            "replica.high.watermark.checkpoint.interval.ms", _L, 5000,
            "Period of writing replication-offset-checkpoint (high watermarks).",
        ),
        # Replication (Kafka's broker settings and defaults).
        _engine(
            "replica.lag.time.max.ms", _L, 30000,
            "A follower that has not caught up with the leader's log end for this long leaves the ISR.",
            minimum=1,
        ),
        _engine(
            "replica.fetch.max.bytes", _I, 1048576,
            "Bytes a follower asks for per partition in one fetch (a larger first batch is still sent).",
            minimum=0,
        ),
        _engine(
            "replica.fetch.wait.max.ms", _I, 500,
            "How long the leader holds a follower's fetch that finds less than replica.fetch.min.bytes.",
            minimum=0,
        ),
        _engine(
            "replica.fetch.min.bytes", _I, 1,
            "Bytes a follower's fetch waits for before the leader answers.", minimum=1,
        ),
        _engine(
            "request.timeout.ms", _I, 30000,
            "How long an acks=all produce waits for the high watermark to pass it.", minimum=0,
        ),
        # Idempotent producers (Kafka's ProducerStateManager settings and defaults).
        _engine(
            "producer.id.expiration.ms", _I, 86400000,
            "How long a producer's state is kept after its last batch's timestamp (unless a transaction of it "
            "is open); a producer forgotten here may start again at any sequence.", minimum=1,
        ),
        _engine(
            "producer.id.expiration.check.interval.ms", _I, 600000,
            "Period of the task that forgets expired producers.", minimum=1,
        ),
        # Consumer groups (Kafka's group coordinator settings and defaults).
        _engine(
            "group.initial.rebalance.delay.ms", _I, 3000,
            "How long a group's first rebalance waits for more members to join.", minimum=0,
        ),
        _engine(
            "group.min.session.timeout.ms", _I, 6000,
            "The shortest session.timeout.ms a group member may ask for.", minimum=1,
        ),
        _engine(
            "group.max.session.timeout.ms", _I, 1800000,
            "The longest session.timeout.ms a group member may ask for.", minimum=1,
        ),
        _engine(
            "offsets.topic.num.partitions", _I, 50,
            "Partitions of __consumer_offsets, where groups' committed offsets are kept (set at its creation).",
            minimum=1,
        ),
        _engine(
            "offset.metadata.max.bytes", _I, 4096,
            "The longest metadata string a committed offset may carry.", minimum=0,
        ),
        _engine(
            "offsets.retention.minutes", _I, 10080,
            "How long a group's committed offsets are kept once it has no members (or, for a "
            "consumer that never joined, after its commit).", minimum=1,
        ),
        _engine(
            "offsets.retention.check.interval.ms", _I, 600000,
            "Period of the task that removes expired committed offsets.", minimum=1,
        ),
        _same_as_topic("message.max.bytes", "max.message.bytes"),
        # Broker defaults of topic configs (Kafka's server synonyms).
        _same_as_topic("log.cleanup.policy", "cleanup.policy"),
        # Kafka's broker retention-time keys have no range: negatives mean "no limit".
        _engine_synonym(
            "log.retention.ms", "retention.ms", None,
            "Default of retention.ms; if unset, log.retention.minutes then log.retention.hours "
            "apply. Negative means no time limit.",
            minimum=None,
        ),
        _engine(
            "log.retention.minutes", _I, None,
            "Default of retention.ms in minutes, used when log.retention.ms is unset.",
        ),
        _engine(
            "log.retention.hours", _I, 168,
            "Default of retention.ms in hours, used when log.retention.ms and "
            "log.retention.minutes are unset.",
        ),
        _same_as_topic("log.retention.bytes", "retention.bytes"),
        _same_as_topic("log.segment.bytes", "segment.bytes"),
        _engine_synonym(
            "log.roll.ms", "segment.ms", None,
            "Default of segment.ms; if unset, log.roll.hours applies.",
        ),
        _engine(
            "log.roll.hours", _I, 168,
            "Default of segment.ms in hours, used when log.roll.ms is unset.", minimum=1,
        ),
        _engine_synonym(
            "log.roll.jitter.ms", "segment.jitter.ms", None,
            "Default of segment.jitter.ms; if unset, log.roll.jitter.hours applies.",
        ),
        _engine(
            "log.roll.jitter.hours", _I, 0,
            "Default of segment.jitter.ms in hours, used when log.roll.jitter.ms is unset.",
            minimum=0,
        ),
        _same_as_topic("log.index.size.max.bytes", "segment.index.bytes"),
        _same_as_topic("log.index.interval.bytes", "index.interval.bytes"),
        _same_as_topic("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"),
        _same_as_topic("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
        _same_as_topic("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
        _same_as_topic("log.cleaner.delete.retention.ms", "delete.retention.ms"),
        _same_as_topic("log.segment.delete.delay.ms", "file.delete.delay.ms"),
        _same_as_topic("log.flush.interval.messages", "flush.messages"),
        _engine_synonym(
            "log.flush.interval.ms", "flush.ms", None,
            "Default of flush.ms; if unset, log.flush.scheduler.interval.ms applies.",
        ),
        _same_as_topic("log.message.timestamp.type", "message.timestamp.type"),
        _same_as_topic("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms"),
        _same_as_topic("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms"),
        _same_as_topic("compression.type"),
        _same_as_topic("compression.gzip.level"),
        _same_as_topic("compression.lz4.level"),
        _same_as_topic("compression.zstd.level"),
        _same_as_topic("log.preallocate", "preallocate"),
        _same_as_topic("min.insync.replicas"),
        _same_as_topic("unclean.leader.election.enable"),
        _same_as_topic("log.local.retention.ms", "local.retention.ms"),
        _same_as_topic("log.local.retention.bytes", "local.retention.bytes"),
    ]
)

#: Keys Kafka 4.0 removed; refused with an explanation rather than as unknown.
REMOVED_CONFIGS: Mapping[str, str] = MappingProxyType(
    {
        "message.format.version": "records are always written in format v2 (KIP-724)",
        "log.message.format.version": "records are always written in format v2 (KIP-724)",
        "message.timestamp.difference.max.ms": (
            "use message.timestamp.before.max.ms and message.timestamp.after.max.ms"
        ),
        "log.message.timestamp.difference.max.ms": (
            "use log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms"
        ),
    }
)

# Reverse of SERVER_SYNONYMS: broker key -> topic key it feeds (for hints and messages).
_FEEDS: Mapping[str, str] = MappingProxyType(
    {s.name: topic for topic, chain in SERVER_SYNONYMS.items() for s in chain}
)


def _refuse_removed(name: str) -> None:
    if name in REMOVED_CONFIGS:
        raise InvalidConfigError(
            f"config '{name}' was removed in Kafka 4.0 and is not supported: {REMOVED_CONFIGS[name]}"
        )


def topic_config_key(name: str) -> ConfigKey:
    """The definition of topic config ``name``; InvalidConfigError if removed or unknown."""
    key = TOPIC_CONFIGS.get(name)
    if key is not None:
        return key
    _refuse_removed(name)
    if name in _FEEDS:
        hint = f"; it is the engine-level default of topic config '{_FEEDS[name]}'"
    elif name in ENGINE_CONFIGS:
        hint = "; it is an engine-level config"
    else:
        hint = _suggest(name, TOPIC_CONFIGS)
    raise InvalidConfigError(f"unknown topic config '{name}'{hint}")


def engine_config_key(name: str) -> ConfigKey:
    """The definition of engine config ``name``; InvalidConfigError if removed or unknown."""
    key = ENGINE_CONFIGS.get(name)
    if key is not None:
        return key
    _refuse_removed(name)
    if name in TOPIC_CONFIGS:
        hint = (
            f"; it is a topic-level config, whose engine-level default is "
            f"'{TOPIC_CONFIGS[name].synonym}'"
        )
    else:
        hint = _suggest(name, ENGINE_CONFIGS)
    raise InvalidConfigError(f"unknown engine config '{name}'{hint}")


def _check_cross_key(values: Mapping[str, Any], shown: Mapping[str, str] | None = None) -> None:
    """Rules spanning two topic keys (Kafka's LogConfig.validateValues and its remote
    storage retention checks). ``values`` are by topic key. ``shown`` renders a key as
    the user wrote it, e.g. ``log.retention.hours=1`` when checking broker defaults;
    by default ``key=value``."""

    def show(name: str) -> str:
        return shown[name] if shown is not None else f"{name}={values[name]}"

    def conflict(a: str, b: str, why: str) -> InvalidConfigError:
        return InvalidConfigError(f"conflicting configs: {show(a)} {why} {show(b)}")

    if values["min.compaction.lag.ms"] > values["max.compaction.lag.ms"]:
        raise conflict("min.compaction.lag.ms", "max.compaction.lag.ms", "must not be greater than")
    # -2 = "same as retention.*"; an unlimited total retention bounds nothing.
    for local, total, unlimited in (
        ("local.retention.ms", "retention.ms", values["retention.ms"] == -1),
        ("local.retention.bytes", "retention.bytes", values["retention.bytes"] < 0),
    ):
        if values[local] == -2 or unlimited:
            continue
        if values[local] == -1:
            raise conflict(local, total, "(unlimited) must not be greater than")
        if values[local] > values[total]:
            raise conflict(local, total, "must not be greater than")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective topic configuration of one log, one typed attribute per topic key.

    Build it with :meth:`defaults`, :meth:`from_overrides` or
    :meth:`EngineConfig.log_config_defaults`, which validate; the constructor does not.
    """

    cleanup_policy: frozenset[str]
    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    max_message_bytes: int
    min_cleanable_dirty_ratio: float
    max_compaction_lag_ms: int
    min_compaction_lag_ms: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    message_timestamp_type: str
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    preallocate: bool
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    local_retention_ms: int
    local_retention_bytes: int

    @property
    def compact(self) -> bool:
        """Whether the cleaner compacts this log (cleanup.policy contains 'compact')."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (cleanup.policy contains 'delete')."""
        return "delete" in self.cleanup_policy

    @classmethod
    def defaults(cls) -> LogConfig:
        """Kafka 4.x's topic defaults (no broker overrides)."""
        values: dict[str, Any] = {key.attribute: key.default for key in TOPIC_CONFIGS.values()}
        return cls(**values)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """``base`` (default: :meth:`defaults`) with ``overrides`` (Kafka names, strings
        or native values) applied; each key and the cross-key rules are validated."""
        base = base if base is not None else cls.defaults()
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            key = topic_config_key(name)
            changes[key.attribute] = key.parse(value)
        config = dataclasses.replace(base, **changes)
        _check_cross_key({name: getattr(config, key.attribute) for name, key in TOPIC_CONFIGS.items()})
        return config

    def get(self, name: str) -> ConfigValue:
        """The value of topic config ``name`` (Kafka's name)."""
        value: ConfigValue = getattr(self, topic_config_key(name).attribute)
        return value

    def to_properties(self) -> dict[str, str]:
        """Every topic key, stringified as in a Kafka properties file."""
        return {name: key.to_string(self.get(name)) for name, key in TOPIC_CONFIGS.items()}

    def overrides_vs(self, base: LogConfig) -> dict[str, str]:
        """Only the keys whose value differs from ``base``, stringified; feeding the result
        to ``from_overrides(..., base)`` gives back this config."""
        return {
            name: key.to_string(self.get(name))
            for name, key in TOPIC_CONFIGS.items()
            if self.get(name) != base.get(name)
        }


@dataclass(frozen=True)
class EngineConfig:
    """The engine's broker-level settings, one typed attribute per engine key.

    Synonym keys that Kafka leaves unset by default (``log.retention.ms``,
    ``log.roll.ms``, ...) are None; :meth:`log_config_defaults` resolves precedence.
    Build it with :meth:`from_properties` or :meth:`defaults`, which validate.
    """

    log_retention_check_interval_ms: int
    log_initial_task_delay_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    num_recovery_threads_per_data_dir: int
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_backoff_ms: int
    log_cleaner_io_max_bytes_per_second: float
    replica_high_watermark_checkpoint_interval_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    request_timeout_ms: int
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    offsets_topic_num_partitions: int
    offset_metadata_max_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    message_max_bytes: int
    log_cleanup_policy: frozenset[str]
    log_retention_ms: int | None
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_segment_bytes: int
    log_roll_ms: int | None
    log_roll_hours: int
    log_roll_jitter_ms: int | None
    log_roll_jitter_hours: int
    log_index_size_max_bytes: int
    log_index_interval_bytes: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_delete_retention_ms: int
    log_segment_delete_delay_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    log_preallocate: bool
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    log_local_retention_ms: int
    log_local_retention_bytes: int

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> EngineConfig:
        """Validate ``properties`` (Kafka broker names; strings or native values), fill in
        defaults, and check that the topic defaults they imply are valid."""
        values: dict[str, Any] = {key.attribute: key.default for key in ENGINE_CONFIGS.values()}
        for name, value in properties.items():
            key = engine_config_key(name)
            values[key.attribute] = key.parse(value)
        config = cls(**values)
        config.log_config_defaults()  # refuses e.g. log.roll.ms=0 or min lag > max lag
        if config.replica_fetch_wait_max_ms > config.replica_lag_time_max_ms:
            # KafkaConfig's rule: a follower whose fetch waits that long at its leader would leave the ISR.
            raise InvalidConfigError(
                f"conflicting configs: replica.fetch.wait.max.ms={config.replica_fetch_wait_max_ms} must not be "
                f"greater than replica.lag.time.max.ms={config.replica_lag_time_max_ms} (a follower's fetch "
                "may wait that long at its leader, and one not caught up for replica.lag.time.max.ms leaves "
                "the ISR)")
        return config

    @classmethod
    def defaults(cls) -> EngineConfig:
        """Kafka 4.x's broker defaults."""
        return cls.from_properties({})

    def get(self, name: str) -> ConfigValue | None:
        """The value of engine config ``name`` (Kafka's name); None if unset."""
        value: ConfigValue | None = getattr(self, engine_config_key(name).attribute)
        return value

    def _resolve(self, topic: str) -> tuple[Any, str]:
        """The broker value feeding topic key ``topic`` (converted to its unit) and the
        broker key it came from: the first set synonym, in priority order."""
        for synonym in SERVER_SYNONYMS[topic]:
            raw: Any = self.get(synonym.name)
            if raw is None:
                continue
            value: Any = raw * synonym.multiplier if synonym.multiplier != 1 else raw
            if topic in _NEGATIVE_MEANS_UNLIMITED and value < 0:
                value = -1
            return value, synonym.name
        raise AssertionError(f"no broker default for {topic}")  # lowest synonym always has one

    def log_config_defaults(self) -> LogConfig:
        """The topic defaults these broker settings imply, as Kafka derives LogConfig from
        KafkaConfig: topics without overrides use exactly this."""
        values: dict[str, Any] = {}
        shown: dict[str, str] = {}
        for name, key in TOPIC_CONFIGS.items():
            raw, source = self._resolve(name)
            values[name] = key._parse(raw, f"config '{source}' (the default of topic config '{name}')")
            # Name the broker key with the value the user gave (hours stay hours).
            shown[name] = f"{source}={_show(self.get(source))}"
        _check_cross_key(values, shown)
        return LogConfig(**{TOPIC_CONFIGS[name].attribute: value for name, value in values.items()})


def parse_key_value_pairs(items: Sequence[str], *, where: str) -> dict[str, str]:
    """Split CLI-style ``key=value`` items (e.g. repeated ``--config``) into a dict.

    Only the syntax is checked here; validate the result with the functions above.
    The value may be empty (``cleanup.policy=``) or contain '='. ``where`` names the
    source (e.g. "--config") in error messages.
    """
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidConfigError(f"malformed config '{item}' in {where}: expected key=value")
        # Two different values for one key is ambiguous; refuse rather than guess.
        if key in result and result[key] != value:
            raise InvalidConfigError(
                f"config '{key}' given twice in {where} with different values "
                f"('{result[key]}' and '{value}')"
            )
        result[key] = value
    return result


def validate_topic_overrides(
    overrides: Mapping[str, object], *, base: LogConfig | None = None
) -> dict[str, str]:
    """Validate topic overrides (against ``base``, default: Kafka's defaults, for the
    cross-key rules) and return them normalized to Kafka's string form, e.g.
    ``{'cleanup.policy': 'delete, compact'}`` -> ``{'cleanup.policy': 'compact,delete'}``."""
    config = LogConfig.from_overrides(overrides, base)
    return {name: TOPIC_CONFIGS[name].to_string(config.get(name)) for name in overrides}
