"""``EngineConfig``: the engine's broker-level settings, and the topic defaults they imply.

Kafka derives each topic's defaults from the broker's settings through its server synonyms
(``log.retention.hours`` feeds ``retention.ms``); ``log_config_defaults`` does the same, naming
the broker key the user gave in any error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratalog.common.config.engine_keys import ENGINE_CONFIGS
from stratalog.common.config.key import ConfigValue, show
from stratalog.common.config.log_config import LogConfig, check_cross_key
from stratalog.common.config.lookup import engine_config_key
from stratalog.common.config.topic_keys import NEGATIVE_MEANS_UNLIMITED, SERVER_SYNONYMS, TOPIC_CONFIGS
from stratalog.common.errors import InvalidConfigError


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
            if topic in NEGATIVE_MEANS_UNLIMITED and value < 0:
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
            values[name] = key.parse_as(raw, f"config '{source}' (the default of topic config '{name}')")
            # Name the broker key with the value the user gave (hours stay hours).
            shown[name] = f"{source}={show(self.get(source))}"
        check_cross_key(values, shown)
        return LogConfig(**{TOPIC_CONFIGS[name].attribute: value for name, value in values.items()})

