"""Settings as users give them: ``key=value`` items (repeated ``--config`` flags), and topic overrides
validated and written back in Kafka's form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratalog.common.config.log_config import LogConfig
from stratalog.common.config.topic_keys import TOPIC_CONFIGS
from stratalog.common.errors import InvalidConfigError


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
