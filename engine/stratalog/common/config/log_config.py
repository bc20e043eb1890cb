"""``LogConfig``: the effective topic configuration of one log, one typed attribute per topic key.

Built only by validating constructors (Kafka's defaults, overrides on a base, or the defaults a
broker configuration implies), with the rules that span two keys checked each time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratalog.common.config.key import ConfigValue
from stratalog.common.config.lookup import topic_config_key
from stratalog.common.config.topic_keys import TOPIC_CONFIGS
from stratalog.common.errors import InvalidConfigError


def check_cross_key(values: Mapping[str, Any], shown: Mapping[str, str] | None = None) -> None:
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
        check_cross_key({name: getattr(config, key.attribute) for name, key in TOPIC_CONFIGS.items()})
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

