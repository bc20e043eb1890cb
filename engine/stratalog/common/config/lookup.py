"""Finding a setting by name, and the errors for names that are not settings.

A name may be unknown, misspelt, removed by Kafka 4.0, or a setting of the other level (a broker
key given as a topic's, or the reverse); each gets an error that says which, with the closest
name or the right level to use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from stratalog.common.config.engine_keys import ENGINE_CONFIGS
from stratalog.common.config.key import ConfigKey, suggest
from stratalog.common.config.topic_keys import SERVER_SYNONYMS, TOPIC_CONFIGS
from stratalog.common.errors import InvalidConfigError

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
        hint = suggest(name, TOPIC_CONFIGS)
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
        hint = suggest(name, ENGINE_CONFIGS)
    raise InvalidConfigError(f"unknown engine config '{name}'{hint}")

