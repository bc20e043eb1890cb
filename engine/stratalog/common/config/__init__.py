"""Definitions and validation of every setting stratalog understands, under Kafka's names.

Why this package exists: topic configs (``retention.ms``, ``cleanup.policy``, ...) and
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

The package's modules, in the order they build on each other: ``key`` (one setting as data, and
its parsing), ``topic_keys`` and ``engine_keys`` (the tables), ``lookup`` (a setting by name),
``log_config`` and ``engine_config`` (the typed configurations), ``overrides`` (what users give).
Everything public is imported from here.
"""

from __future__ import annotations

from stratalog.common.config.engine_config import EngineConfig
from stratalog.common.config.engine_keys import ENGINE_CONFIGS
from stratalog.common.config.key import DOUBLE_MAX, ConfigKey, ConfigType, ConfigValue
from stratalog.common.config.log_config import LogConfig
from stratalog.common.config.lookup import REMOVED_CONFIGS, engine_config_key, topic_config_key
from stratalog.common.config.overrides import parse_key_value_pairs, validate_topic_overrides
from stratalog.common.config.topic_keys import SERVER_SYNONYMS, TOPIC_CONFIGS, ServerSynonym

__all__ = [
    "DOUBLE_MAX",
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
