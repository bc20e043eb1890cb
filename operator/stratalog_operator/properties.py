"""CRD config maps (YAML-typed values, lists for list keys) to Kafka's property strings.

The CRD schema already refused unknown keys and out-of-range values; parsing again with
the engine's own :class:`~stratalog.common.config.ConfigKey` gives the engine's canonical text
and catches whatever the schema cannot express (e.g. cross-key rules), with the engine's
message naming the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from stratalog.common.config import ENGINE_CONFIGS, TOPIC_CONFIGS, ConfigKey
from stratalog.common.errors import InvalidConfigError
from stratalog.common.properties import properties_body

__all__ = ["engine_properties", "topic_overrides", "properties_text", "digest"]


def _strings(values: Mapping[str, Any] | None, table: Mapping[str, ConfigKey], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in sorted((values or {}).items()):
        key = table.get(name)
        if key is None:
            raise InvalidConfigError(f"{where}.{name}: unknown config key")
        given = ",".join(str(v) for v in value) if isinstance(value, list) else value
        try:
            out[name] = key.to_string(key.parse(given))
        except InvalidConfigError as error:
            raise InvalidConfigError(f"{where}.{name}: {error}") from None
    return out


def engine_properties(settings: Mapping[str, Any] | None) -> dict[str, str]:
    """``spec.engine.settings`` of a LogDir as engine properties."""
    return _strings(settings, ENGINE_CONFIGS, "spec.engine.settings")


def topic_overrides(config: Mapping[str, Any] | None, where: str = "spec.config") -> dict[str, str]:
    """A Topic's ``spec.config`` (or a LogDir's ``spec.topicDefaults``) as topic overrides."""
    return _strings(config, TOPIC_CONFIGS, where)


def properties_text(props: Mapping[str, str]) -> str:
    """The agent's ``--config-file``: sorted, escaped as Java's ``Properties.store`` does, no date line
    (the text's digest decides whether the agents restart)."""
    return properties_body(dict(sorted(props.items())))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
