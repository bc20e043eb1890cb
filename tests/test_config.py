"""Behaviour of stratalog.common.config: Kafka 4.x defaults and ranges, parsing, synonyms, errors."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stratalog.common.config import (
    DOUBLE_MAX,
    ENGINE_CONFIGS,
    REMOVED_CONFIGS,
    SERVER_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigKey,
    ConfigType,
    EngineConfig,
    LogConfig,
    engine_config_key,
    parse_key_value_pairs,
    topic_config_key,
    validate_topic_overrides,
)
from stratalog.common.errors import InvalidConfigError
from stratalog.common.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

WEEK_MS = 604800000

# Transcribed from the reference, §3.1 (Kafka 4.x column), as properties-file strings.
KAFKA_4_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "max.message.bytes": "1048588",
    "min.cleanable.dirty.ratio": "0.5",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "3600000",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "preallocate": "false",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
}

# §3.2 plus the broker synonyms of §3.1; None = unset by default (a lower synonym applies).
KAFKA_4_ENGINE_DEFAULTS: dict[str, str | None] = {
    "log.retention.check.interval.ms": "300000",
    "log.initial.task.delay.ms": "30000",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "num.recovery.threads.per.data.dir": "2",
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.io.buffer.size": "524288",
    "log.cleaner.io.buffer.load.factor": "0.9",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    # Replication (ReplicationConfigs / ServerConfigs of Kafka 4).
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "request.timeout.ms": "30000",
    # Idempotent producers (TransactionLogConfig of Kafka 4).
    "producer.id.expiration.ms": "86400000",
    "producer.id.expiration.check.interval.ms": "600000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "offsets.topic.num.partitions": "50",
    "offset.metadata.max.bytes": "4096",
    "offsets.retention.minutes": "10080",                # Kafka's GroupCoordinatorConfig: 7 days
    "offsets.retention.check.interval.ms": "600000",
    "message.max.bytes": "1048588",
    "log.cleanup.policy": "delete",
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": "0",
    "log.index.size.max.bytes": "10485760",
    "log.index.interval.bytes": "4096",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.segment.delete.delay.ms": "60000",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": None,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "3600000",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "log.preallocate": "false",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "log.local.retention.ms": "-2",
    "log.local.retention.bytes": "-2",
}

# Inclusive integer ranges, from the reference and Kafka 4.x's ConfigDefs (with the
# brief's segment.bytes >= 14). Type limits apply where Kafka sets no range.
INTEGER_RANGES = {
    "retention.ms": (-1, INT64_MAX),
    "retention.bytes": (INT64_MIN, INT64_MAX),
    "segment.bytes": (14, INT32_MAX),
    "segment.ms": (1, INT64_MAX),
    "segment.jitter.ms": (0, INT64_MAX),
    "segment.index.bytes": (4, INT32_MAX),
    "index.interval.bytes": (0, INT32_MAX),
    "max.message.bytes": (0, INT32_MAX),
    "max.compaction.lag.ms": (1, INT64_MAX),
    "min.compaction.lag.ms": (0, INT64_MAX),
    "delete.retention.ms": (0, INT64_MAX),
    "file.delete.delay.ms": (0, INT64_MAX),
    "flush.messages": (1, INT64_MAX),
    "flush.ms": (0, INT64_MAX),
    "message.timestamp.before.max.ms": (0, INT64_MAX),
    "message.timestamp.after.max.ms": (0, INT64_MAX),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
    "min.insync.replicas": (1, INT32_MAX),
    "local.retention.ms": (-2, INT64_MAX),
    "local.retention.bytes": (-2, INT64_MAX),
}
ENGINE_INTEGER_RANGES = {
    "log.retention.check.interval.ms": (1, INT64_MAX),
    "log.initial.task.delay.ms": (0, INT64_MAX),
    "log.flush.scheduler.interval.ms": (INT64_MIN, INT64_MAX),
    "log.flush.offset.checkpoint.interval.ms": (0, INT32_MAX),
    "log.flush.start.offset.checkpoint.interval.ms": (0, INT32_MAX),
    "num.recovery.threads.per.data.dir": (1, INT32_MAX),
    "log.cleaner.threads": (0, INT32_MAX),
    "log.cleaner.dedupe.buffer.size": (INT64_MIN, INT64_MAX),
    "log.cleaner.io.buffer.size": (0, INT32_MAX),
    "log.cleaner.backoff.ms": (0, INT64_MAX),
    "replica.high.watermark.checkpoint.interval.ms": (INT64_MIN, INT64_MAX),
    "replica.lag.time.max.ms": (1, INT64_MAX),
    "replica.fetch.max.bytes": (0, INT32_MAX),
    "replica.fetch.wait.max.ms": (0, INT32_MAX),
    "replica.fetch.min.bytes": (1, INT32_MAX),
    "request.timeout.ms": (0, INT32_MAX),
    "producer.id.expiration.ms": (1, INT32_MAX),
    "producer.id.expiration.check.interval.ms": (1, INT32_MAX),
    "offsets.retention.minutes": (1, INT32_MAX),
    "offsets.retention.check.interval.ms": (1, INT32_MAX),
    "group.initial.rebalance.delay.ms": (0, INT32_MAX),
    "group.min.session.timeout.ms": (1, INT32_MAX),
    "group.max.session.timeout.ms": (1, INT32_MAX),
    "offsets.topic.num.partitions": (1, INT32_MAX),
    "offset.metadata.max.bytes": (0, INT32_MAX),
    "message.max.bytes": (0, INT32_MAX),
    "log.retention.ms": (INT64_MIN, INT64_MAX),
    "log.retention.minutes": (INT32_MIN, INT32_MAX),
    "log.retention.hours": (INT32_MIN, INT32_MAX),
    "log.retention.bytes": (INT64_MIN, INT64_MAX),
    "log.segment.bytes": (14, INT32_MAX),
    "log.roll.ms": (1, INT64_MAX),
    "log.roll.hours": (1, INT32_MAX),
    "log.roll.jitter.ms": (0, INT64_MAX),
    "log.roll.jitter.hours": (0, INT32_MAX),
    "log.index.size.max.bytes": (4, INT32_MAX),
    "log.index.interval.bytes": (0, INT32_MAX),
    "log.cleaner.max.compaction.lag.ms": (1, INT64_MAX),
    "log.cleaner.min.compaction.lag.ms": (0, INT64_MAX),
    "log.cleaner.delete.retention.ms": (0, INT64_MAX),
    "log.segment.delete.delay.ms": (0, INT64_MAX),
    "log.flush.interval.messages": (1, INT64_MAX),
    "log.flush.interval.ms": (0, INT64_MAX),
    "log.message.timestamp.before.max.ms": (0, INT64_MAX),
    "log.message.timestamp.after.max.ms": (0, INT64_MAX),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
    "min.insync.replicas": (1, INT32_MAX),
    "log.local.retention.ms": (-2, INT64_MAX),
    "log.local.retention.bytes": (-2, INT64_MAX),
}


def refused(key: ConfigKey, value: object) -> str:
    with pytest.raises(InvalidConfigError) as caught:
        key.parse(value)
    return str(caught.value)


# -- the definitions ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), KAFKA_4_TOPIC_DEFAULTS.items())
def test_every_topic_default_matches_kafka_4(name: str, expected: str) -> None:
    key = TOPIC_CONFIGS[name]
    assert key.default == key.parse(expected)
    assert LogConfig.defaults().to_properties()[name] == expected


@pytest.mark.parametrize(("name", "expected"), KAFKA_4_ENGINE_DEFAULTS.items())
def test_every_engine_default_matches_kafka_4(name: str, expected: str | None) -> None:
    key = ENGINE_CONFIGS[name]
    if expected is None:
        assert key.default is None
    else:
        assert key.default is not None and key.to_string(key.default) == expected
    assert EngineConfig.defaults().get(name) == key.default


def test_topic_configs_hold_exactly_the_topic_keys_of_the_reference() -> None:
    assert set(TOPIC_CONFIGS) == set(KAFKA_4_TOPIC_DEFAULTS)
    assert all(key.scope == "topic" for key in TOPIC_CONFIGS.values())


def test_engine_configs_hold_exactly_the_broker_keys_and_synonyms_of_the_reference() -> None:
    assert set(ENGINE_CONFIGS) == set(KAFKA_4_ENGINE_DEFAULTS)
    assert all(key.scope == "engine" for key in ENGINE_CONFIGS.values())


def test_log_config_has_one_attribute_per_topic_key_named_in_snake_case() -> None:
    fields = [f.name for f in dataclasses.fields(LogConfig)]
    assert fields == [key.attribute for key in TOPIC_CONFIGS.values()]
    assert TOPIC_CONFIGS["unclean.leader.election.enable"].attribute == "unclean_leader_election_enable"


def test_engine_config_has_one_attribute_per_engine_key_named_in_snake_case() -> None:
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    assert fields == {key.attribute for key in ENGINE_CONFIGS.values()}


def test_every_topic_key_names_its_highest_priority_broker_synonym() -> None:
    assert set(SERVER_SYNONYMS) == set(TOPIC_CONFIGS)
    for name, key in TOPIC_CONFIGS.items():
        chain = SERVER_SYNONYMS[name]
        assert key.synonym == chain[0].name
        assert all(synonym.name in ENGINE_CONFIGS for synonym in chain)
    assert TOPIC_CONFIGS["retention.ms"].synonym == "log.retention.ms"
    assert TOPIC_CONFIGS["max.message.bytes"].synonym == "message.max.bytes"


def test_definitions_are_plain_data_that_serialize_to_json() -> None:
    # What an API or CRD generator needs: every rule is a value, none is code.
    for key in [*TOPIC_CONFIGS.values(), *ENGINE_CONFIGS.values()]:
        data: dict[str, Any] = dataclasses.asdict(key)
        assert not any(callable(v) for v in data.values())
        data["type"] = key.type.value
        data["default"] = None if key.default is None else key.to_string(key.default)
        json.dumps(data)


def test_broker_defaults_imply_exactly_kafkas_topic_defaults() -> None:
    assert EngineConfig.defaults().log_config_defaults() == LogConfig.defaults()


def test_default_cleanup_policy_deletes_and_does_not_compact() -> None:
    config = LogConfig.defaults()
    assert config.cleanup_policy == frozenset({"delete"})
    assert config.delete and not config.compact


# -- ranges ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "bounds"), INTEGER_RANGES.items())
def test_topic_integer_range_edges_are_accepted_and_one_past_is_refused(
    name: str, bounds: tuple[int, int]
) -> None:
    key = TOPIC_CONFIGS[name]
    lo, hi = bounds
    assert key.parse(str(lo)) == lo
    assert key.parse(str(hi)) == hi
    for outside in (lo - 1, hi + 1):
        message = refused(key, str(outside))
        assert f"'{name}'" in message and f"'{outside}'" in message
        assert f"[{lo}, {hi}]" in message


@pytest.mark.parametrize(("name", "bounds"), ENGINE_INTEGER_RANGES.items())
def test_engine_integer_range_edges_are_accepted_and_one_past_is_refused(
    name: str, bounds: tuple[int, int]
) -> None:
    key = ENGINE_CONFIGS[name]
    lo, hi = bounds
    assert key.parse(lo) == lo and key.parse(hi) == hi
    for outside in (lo - 1, hi + 1):
        message = refused(key, outside)
        assert f"'{name}'" in message and f"'{outside}'" in message


def test_every_integer_key_has_its_range_checked_by_these_tests() -> None:
    integer_types = (ConfigType.INT, ConfigType.LONG)
    topic = {n for n, k in TOPIC_CONFIGS.items() if k.type in integer_types and not k.also_allowed}
    engine = {n for n, k in ENGINE_CONFIGS.items() if k.type in integer_types and not k.also_allowed}
    assert topic == set(INTEGER_RANGES)
    assert engine == set(ENGINE_INTEGER_RANGES)


def test_retention_ms_below_minus_one_is_refused_naming_key_value_and_range() -> None:
    assert refused(TOPIC_CONFIGS["retention.ms"], "-5") == (
        "invalid value '-5' for config 'retention.ms': must be at least -1 "
        "(allowed: [-1, 9223372036854775807])"
    )


def test_int32_key_refuses_a_value_that_only_fits_a_long() -> None:
    assert refused(TOPIC_CONFIGS["segment.bytes"], "2147483648") == (
        "invalid value '2147483648' for config 'segment.bytes': must be at most 2147483647 "
        "(allowed: [14, 2147483647])"
    )


def test_segment_bytes_accepts_kafka_3_minimum_so_tiny_segments_work() -> None:
    assert LogConfig.from_overrides({"segment.bytes": "128"}).segment_bytes == 128


@pytest.mark.parametrize("level", ["-1", "1", "5", "9"])
def test_gzip_level_accepts_minus_one_and_one_to_nine(level: str) -> None:
    assert TOPIC_CONFIGS["compression.gzip.level"].parse(level) == int(level)


@pytest.mark.parametrize("level", ["-2", "0", "10"])
def test_gzip_level_refuses_anything_else_listing_both_allowed_forms(level: str) -> None:
    assert refused(TOPIC_CONFIGS["compression.gzip.level"], level) == (
        f"invalid value '{level}' for config 'compression.gzip.level': must be -1 or between "
        "1 and 9 (allowed: -1 or [1, 9])"
    )


@pytest.mark.parametrize("name", ["min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"])
def test_dirty_ratio_accepts_zero_and_one_and_refuses_just_beyond(name: str) -> None:
    key = TOPIC_CONFIGS.get(name) or ENGINE_CONFIGS[name]
    assert key.parse("0") == 0.0 and key.parse("1.0") == 1.0
    assert "must be at least 0.0 (allowed: [0.0, 1.0])" in refused(key, math.nextafter(0.0, -1.0))
    assert "must be at most 1.0 (allowed: [0.0, 1.0])" in refused(key, math.nextafter(1.0, 2.0))


# -- parsing --------------------------------------------------------------------------


def test_integers_are_read_from_trimmed_decimal_strings_and_native_ints() -> None:
    key = TOPIC_CONFIGS["retention.ms"]
    assert key.parse(" 1000 ") == 1000
    assert key.parse("+1000") == 1000
    assert key.parse(1000) == 1000


@pytest.mark.parametrize("value", ["1.0", "1e3", "1_000", "", "0x10", "ten", True, 1.5, None])
def test_integer_keys_refuse_fractions_exponents_underscores_text_and_booleans(value: object) -> None:
    message = refused(TOPIC_CONFIGS["retention.ms"], value)
    assert "must be a 64-bit integer" in message and "'retention.ms'" in message
    assert "must be a 32-bit integer" in refused(TOPIC_CONFIGS["segment.bytes"], value)


@pytest.mark.parametrize(("text", "expected"), [("0.25", 0.25), (".25", 0.25), ("25e-2", 0.25), ("1", 1.0), (1, 1.0)])
def test_double_keys_accept_decimal_and_scientific_strings_and_ints(text: object, expected: float) -> None:
    assert TOPIC_CONFIGS["min.cleanable.dirty.ratio"].parse(text) == expected


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e400", float("nan"), float("inf"), "half", True])
def test_double_keys_refuse_nan_infinity_and_text(value: object) -> None:
    message = refused(ENGINE_CONFIGS["log.cleaner.io.max.bytes.per.second"], value)
    assert "'log.cleaner.io.max.bytes.per.second'" in message and "number" in message


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("FALSE", False), (" True ", True), (False, False)])
def test_booleans_accept_true_and_false_in_any_case(text: object, expected: bool) -> None:
    assert TOPIC_CONFIGS["preallocate"].parse(text) is expected


@pytest.mark.parametrize("value", ["yes", "1", "t", "", 1, 0])
def test_booleans_refuse_anything_but_true_and_false(value: object) -> None:
    assert refused(TOPIC_CONFIGS["preallocate"], value) == (
        f"invalid value '{value}' for config 'preallocate': must be true or false (allowed: true, false)"
    )


@pytest.mark.parametrize("codec", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_every_kafka_compression_type_is_accepted(codec: str) -> None:
    assert LogConfig.from_overrides({"compression.type": codec}).compression_type == codec


def test_unknown_compression_type_is_refused_listing_choices_and_the_closest() -> None:
    assert refused(TOPIC_CONFIGS["compression.type"], "gzipp") == (
        "invalid value 'gzipp' for config 'compression.type': not a valid choice "
        "(allowed: uncompressed, zstd, lz4, snappy, gzip, producer); did you mean 'gzip'?"
    )


def test_timestamp_type_choices_are_case_sensitive_like_kafka() -> None:
    key = TOPIC_CONFIGS["message.timestamp.type"]
    assert key.parse("LogAppendTime") == "LogAppendTime"
    assert "(allowed: CreateTime, LogAppendTime)" in refused(key, "logappendtime")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("compact", {"compact"}),
        ("compact,delete", {"compact", "delete"}),
        (" delete , compact ", {"compact", "delete"}),
        (["delete", "compact"], {"compact", "delete"}),
        ("compact,compact", {"compact"}),
        ("", set()),
    ],
)
def test_cleanup_policy_is_a_set_of_compact_and_delete(value: object, expected: set[str]) -> None:
    config = LogConfig.from_overrides({"cleanup.policy": value})
    assert config.cleanup_policy == frozenset(expected)
    assert config.compact == ("compact" in expected)
    assert config.delete == ("delete" in expected)


@pytest.mark.parametrize("value", ["compact,bogus", "compact,", ",", ["compact", 7], 5])
def test_cleanup_policy_refuses_unknown_or_empty_items(value: object) -> None:
    message = refused(TOPIC_CONFIGS["cleanup.policy"], value)
    assert "'cleanup.policy'" in message and "compact, delete" in message


def test_cleanup_policy_error_names_the_offending_item() -> None:
    assert "'bogus' is not a valid choice" in refused(TOPIC_CONFIGS["cleanup.policy"], "compact,bogus")


# -- unknown and removed keys ---------------------------------------------------------


@pytest.mark.parametrize("name", ["message.format.version", "message.timestamp.difference.max.ms"])
def test_keys_removed_in_kafka_4_are_refused_as_removed(name: str) -> None:
    with pytest.raises(InvalidConfigError, match=f"config '{name}' was removed in Kafka 4.0"):
        LogConfig.from_overrides({name: "0"})


@pytest.mark.parametrize("name", ["log.message.format.version", "log.message.timestamp.difference.max.ms"])
def test_broker_keys_removed_in_kafka_4_are_refused_as_removed(name: str) -> None:
    assert name in REMOVED_CONFIGS
    with pytest.raises(InvalidConfigError, match="removed in Kafka 4.0"):
        EngineConfig.from_properties({name: "0"})


def test_misspelt_topic_key_is_refused_suggesting_the_closest() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_overrides({"retention.msx": "1"})
    assert str(caught.value) == "unknown topic config 'retention.msx'; did you mean 'retention.ms'?"


def test_unrelated_unknown_key_is_refused_without_a_suggestion() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        topic_config_key("zzz")
    assert str(caught.value) == "unknown topic config 'zzz'"


def test_broker_key_given_as_topic_key_is_refused_naming_the_topic_key() -> None:
    with pytest.raises(InvalidConfigError, match="engine-level default of topic config 'retention.ms'"):
        topic_config_key("log.retention.hours")
    with pytest.raises(InvalidConfigError, match="'log.cleaner.threads'; it is an engine-level config"):
        topic_config_key("log.cleaner.threads")


def test_topic_key_given_as_engine_key_is_refused_naming_its_broker_synonym() -> None:
    with pytest.raises(InvalidConfigError, match="whose engine-level default is 'log.roll.ms'"):
        EngineConfig.from_properties({"segment.ms": "1000"})


def test_misspelt_engine_key_is_refused_suggesting_the_closest() -> None:
    with pytest.raises(InvalidConfigError, match="did you mean 'log.cleaner.threads'"):
        engine_config_key("log.cleaner.thread")


def test_errors_carry_kafkas_invalid_config_code() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        topic_config_key("nope")
    assert caught.value.code == "INVALID_CONFIG"


# -- cross-key rules ------------------------------------------------------------------

LOCAL_AND_TOTAL = [("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes")]


def test_min_compaction_lag_above_max_is_refused_naming_both_keys() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_overrides({"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"})
    assert str(caught.value) == (
        "conflicting configs: min.compaction.lag.ms=5000 must not be greater than "
        "max.compaction.lag.ms=1000"
    )


def test_min_compaction_lag_equal_to_max_is_accepted() -> None:
    config = LogConfig.from_overrides({"min.compaction.lag.ms": 1000, "max.compaction.lag.ms": 1000})
    assert config.min_compaction_lag_ms == config.max_compaction_lag_ms == 1000


def test_cross_key_rules_apply_against_the_base_config() -> None:
    base = LogConfig.from_overrides({"max.compaction.lag.ms": "1000"})
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms=2000.*max.compaction.lag.ms=1000"):
        LogConfig.from_overrides({"min.compaction.lag.ms": "2000"}, base)


@pytest.mark.parametrize(("local", "total"), LOCAL_AND_TOTAL)
def test_local_retention_above_total_retention_is_refused_naming_both_keys(local: str, total: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_overrides({total: "1000", local: "1001"})
    assert str(caught.value) == f"conflicting configs: {local}=1001 must not be greater than {total}=1000"


@pytest.mark.parametrize(("local", "total"), LOCAL_AND_TOTAL)
def test_local_retention_up_to_total_or_minus_two_is_accepted(local: str, total: str) -> None:
    for value in ("1000", "0", "-2"):
        LogConfig.from_overrides({total: "1000", local: value})


@pytest.mark.parametrize(("local", "total"), LOCAL_AND_TOTAL)
def test_unlimited_local_retention_under_a_limited_total_is_refused(local: str, total: str) -> None:
    with pytest.raises(InvalidConfigError, match=f"{local}=-1 \\(unlimited\\) must not be greater than {total}=1000"):
        LogConfig.from_overrides({total: "1000", local: "-1"})


def test_any_local_retention_is_accepted_when_total_retention_is_unlimited() -> None:
    config = LogConfig.from_overrides(
        {
            "retention.ms": "-1",
            "local.retention.ms": str(INT64_MAX),
            "retention.bytes": "-5",
            "local.retention.bytes": "-1",
        }
    )
    assert config.local_retention_ms == INT64_MAX and config.local_retention_bytes == -1


# -- LogConfig API --------------------------------------------------------------------


def test_from_overrides_keeps_every_other_value_of_the_base() -> None:
    base = LogConfig.from_overrides({"segment.bytes": "1024", "cleanup.policy": "compact"})
    config = LogConfig.from_overrides({"retention.ms": "1000"}, base)
    assert (config.segment_bytes, config.cleanup_policy, config.retention_ms) == (1024, frozenset({"compact"}), 1000)


def test_overrides_vs_base_lists_only_differing_keys_as_kafka_strings() -> None:
    config = LogConfig.from_overrides(
        {
            "cleanup.policy": "delete,compact",
            "min.cleanable.dirty.ratio": 0.25,
            "preallocate": True,
            "retention.ms": WEEK_MS,
        }
    )
    assert config.overrides_vs(LogConfig.defaults()) == {
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.25",
        "preallocate": "true",
    }
    assert config.overrides_vs(config) == {}


def test_to_properties_lists_every_key_as_a_string() -> None:
    properties = LogConfig.defaults().to_properties()
    assert list(properties) == list(TOPIC_CONFIGS)
    assert properties == KAFKA_4_TOPIC_DEFAULTS


def test_get_reads_a_value_by_kafka_name_and_refuses_unknown_names() -> None:
    config = LogConfig.from_overrides({"segment.ms": "5000"})
    assert config.get("segment.ms") == 5000
    assert config.get("cleanup.policy") == frozenset({"delete"})
    with pytest.raises(InvalidConfigError, match="unknown topic config 'segment.msec'"):
        config.get("segment.msec")


def test_log_config_is_immutable_and_hashable() -> None:
    config = LogConfig.defaults()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.retention_ms = 5  # type: ignore[misc]
    assert hash(config) == hash(LogConfig.defaults())


# -- EngineConfig and synonym precedence ----------------------------------------------


def retention_ms(**properties: object) -> int:
    props = {name.replace("_", "."): value for name, value in properties.items()}
    return EngineConfig.from_properties(props).log_config_defaults().retention_ms


def test_log_retention_ms_wins_over_minutes_and_hours() -> None:
    assert retention_ms(log_retention_ms="1234", log_retention_minutes="5", log_retention_hours="6") == 1234


def test_log_retention_minutes_win_over_hours() -> None:
    assert retention_ms(log_retention_minutes="5", log_retention_hours="6") == 5 * 60_000


def test_log_retention_hours_alone_set_retention_in_hours() -> None:
    assert retention_ms(log_retention_hours="6") == 6 * 3_600_000
    assert retention_ms() == WEEK_MS


@pytest.mark.parametrize("name", ["log.retention.ms", "log.retention.minutes", "log.retention.hours"])
def test_negative_broker_retention_time_means_unlimited_like_kafka(name: str) -> None:
    config = EngineConfig.from_properties({name: "-5"}).log_config_defaults()
    assert config.retention_ms == -1


def test_log_roll_ms_wins_over_log_roll_hours_which_count_in_hours() -> None:
    both = EngineConfig.from_properties({"log.roll.ms": "1000", "log.roll.hours": "2"})
    hours = EngineConfig.from_properties({"log.roll.hours": "2"})
    assert both.log_config_defaults().segment_ms == 1000
    assert hours.log_config_defaults().segment_ms == 2 * 3_600_000


def test_log_roll_jitter_ms_wins_over_log_roll_jitter_hours() -> None:
    both = EngineConfig.from_properties({"log.roll.jitter.ms": "10", "log.roll.jitter.hours": "1"})
    hours = EngineConfig.from_properties({"log.roll.jitter.hours": "1"})
    assert both.log_config_defaults().segment_jitter_ms == 10
    assert hours.log_config_defaults().segment_jitter_ms == 3_600_000


def test_flush_ms_falls_back_to_the_flush_scheduler_interval() -> None:
    explicit = EngineConfig.from_properties({"log.flush.interval.ms": "10", "log.flush.scheduler.interval.ms": "20"})
    fallback = EngineConfig.from_properties({"log.flush.scheduler.interval.ms": "20"})
    assert explicit.log_config_defaults().flush_ms == 10
    assert fallback.log_config_defaults().flush_ms == 20


# A valid non-default value of each topic key, to show its broker synonym feeds it.
NON_DEFAULTS = {
    "cleanup.policy": "compact", "retention.ms": "1000", "retention.bytes": "1000",
    "segment.bytes": "1024", "segment.ms": "1000", "segment.jitter.ms": "10",
    "segment.index.bytes": "4096", "index.interval.bytes": "1", "max.message.bytes": "100",
    "min.cleanable.dirty.ratio": "0.1", "max.compaction.lag.ms": "5000", "min.compaction.lag.ms": "10",
    "delete.retention.ms": "10", "file.delete.delay.ms": "10", "flush.messages": "10",
    "flush.ms": "10", "message.timestamp.type": "LogAppendTime",
    "message.timestamp.before.max.ms": "10", "message.timestamp.after.max.ms": "10",
    "compression.type": "zstd", "compression.gzip.level": "9", "compression.lz4.level": "1",
    "compression.zstd.level": "-5", "preallocate": "true", "min.insync.replicas": "2",
    "unclean.leader.election.enable": "true", "local.retention.ms": "1000",
    "local.retention.bytes": "1000",
}


@pytest.mark.parametrize("topic", list(TOPIC_CONFIGS))
def test_each_topic_key_takes_its_default_from_its_first_broker_synonym(topic: str) -> None:
    engine = EngineConfig.from_properties({SERVER_SYNONYMS[topic][0].name: NON_DEFAULTS[topic]})
    derived = engine.log_config_defaults()
    assert derived.get(topic) == TOPIC_CONFIGS[topic].parse(NON_DEFAULTS[topic])
    assert derived.overrides_vs(LogConfig.defaults()) == {topic: NON_DEFAULTS[topic]}


def test_broker_value_invalid_for_the_topic_key_it_feeds_is_refused_naming_both() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        EngineConfig.from_properties({"log.flush.scheduler.interval.ms": "-5"})
    assert str(caught.value) == (
        "invalid value '-5' for config 'log.flush.scheduler.interval.ms' (the default of topic "
        "config 'flush.ms'): must be at least 0 (allowed: [0, 9223372036854775807])"
    )


def test_negative_flush_scheduler_interval_is_accepted_when_flush_interval_is_set() -> None:
    engine = EngineConfig.from_properties({"log.flush.scheduler.interval.ms": "-5", "log.flush.interval.ms": "7"})
    assert engine.log_flush_scheduler_interval_ms == -5
    assert engine.log_config_defaults().flush_ms == 7


def test_a_replica_fetch_wait_longer_than_the_replica_lag_time_is_refused_naming_both() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        EngineConfig.from_properties({"replica.lag.time.max.ms": "400"})   # the wait's default is 500
    assert str(caught.value).startswith(
        "conflicting configs: replica.fetch.wait.max.ms=500 must not be greater than replica.lag.time.max.ms=400")
    config = EngineConfig.from_properties({"replica.lag.time.max.ms": "500"})   # equal is Kafka's limit too
    assert (config.replica_fetch_wait_max_ms, config.replica_lag_time_max_ms) == (500, 500)


def test_broker_compaction_lags_in_conflict_are_refused_naming_the_broker_keys() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        EngineConfig.from_properties(
            {"log.cleaner.min.compaction.lag.ms": "50", "log.cleaner.max.compaction.lag.ms": "10"}
        )
    assert str(caught.value) == (
        "conflicting configs: log.cleaner.min.compaction.lag.ms=50 must not be greater than "
        "log.cleaner.max.compaction.lag.ms=10"
    )


def test_broker_local_retention_is_checked_against_the_resolved_retention_hours() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        EngineConfig.from_properties({"log.retention.hours": "1", "log.local.retention.ms": "7200000"})
    assert str(caught.value) == (
        "conflicting configs: log.local.retention.ms=7200000 must not be greater than log.retention.hours=1"
    )


def test_engine_config_exposes_typed_values_by_attribute_and_kafka_name() -> None:
    engine = EngineConfig.from_properties(
        {"log.cleaner.threads": "4", "log.cleaner.enable": "false", "log.cleaner.io.buffer.load.factor": "0.75"}
    )
    assert (engine.log_cleaner_threads, engine.log_cleaner_enable) == (4, False)
    assert engine.get("log.cleaner.io.buffer.load.factor") == 0.75
    assert engine.get("log.retention.ms") is None
    assert engine.num_recovery_threads_per_data_dir == 2


def test_engine_values_are_validated_naming_key_and_value() -> None:
    expected = "invalid value '0' for config 'num.recovery.threads.per.data.dir': must be at least 1"
    with pytest.raises(InvalidConfigError, match=expected):
        EngineConfig.from_properties({"num.recovery.threads.per.data.dir": "0"})


def test_derived_topic_defaults_become_the_base_for_topic_overrides() -> None:
    base = EngineConfig.from_properties({"log.segment.bytes": "4096"}).log_config_defaults()
    config = LogConfig.from_overrides({"retention.ms": "10"}, base)
    assert (config.segment_bytes, config.retention_ms) == (4096, 10)
    assert config.overrides_vs(base) == {"retention.ms": "10"}


# -- CLI pairs and normalized overrides -----------------------------------------------


def test_key_value_pairs_split_on_the_first_equals_sign_and_trim() -> None:
    assert parse_key_value_pairs(
        ["retention.ms = 1000", "cleanup.policy=", "x=a=b"], where="--config"
    ) == {"retention.ms": "1000", "cleanup.policy": "", "x": "a=b"}


@pytest.mark.parametrize("item", ["retention.ms", "=5", " = 5", ""])
def test_malformed_pair_is_refused_naming_the_item_and_where(item: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        parse_key_value_pairs(["segment.ms=1", item], where="--config")
    assert str(caught.value) == f"malformed config '{item}' in --config: expected key=value"


def test_key_given_twice_with_different_values_is_refused() -> None:
    assert parse_key_value_pairs(["a=1", "a=1"], where="--config") == {"a": "1"}
    with pytest.raises(InvalidConfigError, match="config 'a' given twice in --config"):
        parse_key_value_pairs(["a=1", "a=2"], where="--config")


def test_validated_overrides_come_back_as_normalized_kafka_strings() -> None:
    overrides = {
        "cleanup.policy": "delete, compact",
        "retention.ms": 1000,
        "min.cleanable.dirty.ratio": ".25",
        "preallocate": "TRUE",
    }
    assert validate_topic_overrides(overrides) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "1000",
        "min.cleanable.dirty.ratio": "0.25",
        "preallocate": "true",
    }


def test_validated_overrides_are_checked_against_a_given_base() -> None:
    base = LogConfig.from_overrides({"retention.ms": "100"})
    with pytest.raises(InvalidConfigError, match="local.retention.ms=200 must not be greater than retention.ms=100"):
        validate_topic_overrides({"local.retention.ms": "200"}, base=base)


def test_validating_overrides_refuses_unknown_keys() -> None:
    with pytest.raises(InvalidConfigError, match="unknown topic config 'retention'"):
        validate_topic_overrides({"retention": "1"})


# -- doubles written as Java writes them ----------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.5, "0.5"), (1.0, "1.0"), (0.0, "0.0"), (0.001, "0.001"), (1e-5, "1.0E-5"), (12345678.0, "1.2345678E7"),
     (1e7, "1.0E7"), (9999999.0, "9999999.0"), (DOUBLE_MAX, "1.7976931348623157E308")],
)
def test_doubles_are_written_as_java_double_to_string(value: float, text: str) -> None:
    assert ENGINE_CONFIGS["log.cleaner.io.max.bytes.per.second"].to_string(value) == text


# -- properties -----------------------------------------------------------------------


@given(st.integers(-1, INT64_MAX))
def test_any_in_range_retention_ms_round_trips_through_its_string(value: int) -> None:
    key = TOPIC_CONFIGS["retention.ms"]
    assert key.parse(key.to_string(value)) == value


@given(st.integers(14, INT32_MAX))
def test_any_in_range_segment_bytes_round_trips_through_its_string(value: int) -> None:
    key = TOPIC_CONFIGS["segment.bytes"]
    assert key.parse(key.to_string(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_finite_double_round_trips_through_its_java_string(value: float) -> None:
    key = ENGINE_CONFIGS["log.cleaner.io.max.bytes.per.second"]
    assert key.parse(key.to_string(value)) == value


def valid_values(key: ConfigKey) -> st.SearchStrategy[Any]:
    """Any valid value of ``key``, generated from its definition."""
    if key.type in (ConfigType.INT, ConfigType.LONG):
        numbers: st.SearchStrategy[Any] = st.integers(key.lower_bound, key.upper_bound)  # type: ignore[arg-type]
        return numbers | st.sampled_from(key.also_allowed) if key.also_allowed else numbers
    if key.type is ConfigType.DOUBLE:
        return st.floats(key.lower_bound, key.upper_bound, allow_nan=False, allow_infinity=False)
    if key.type is ConfigType.BOOLEAN:
        return st.booleans()
    assert key.choices is not None
    if key.type is ConfigType.LIST:
        return st.frozensets(st.sampled_from(key.choices))
    return st.sampled_from(key.choices)


def consistent(overrides: dict[str, Any]) -> dict[str, Any]:
    """Drop the generated values that break a cross-key rule against the defaults."""
    merged = {**{n: k.default for n, k in TOPIC_CONFIGS.items()}, **overrides}
    if merged["min.compaction.lag.ms"] > merged["max.compaction.lag.ms"]:
        overrides.pop("min.compaction.lag.ms", None)
        overrides.pop("max.compaction.lag.ms", None)
    for local, total, unlimited in (
        ("local.retention.ms", "retention.ms", merged["retention.ms"] == -1),
        ("local.retention.bytes", "retention.bytes", merged["retention.bytes"] < 0),
    ):
        if not unlimited and merged[local] != -2 and (merged[local] == -1 or merged[local] > merged[total]):
            overrides.pop(local, None)
    return overrides


ANY_OVERRIDES = st.fixed_dictionaries(
    {}, optional={name: valid_values(key) for name, key in TOPIC_CONFIGS.items()}
).map(consistent)


@given(ANY_OVERRIDES)
def test_any_valid_overrides_round_trip_through_their_kafka_strings(overrides: dict[str, Any]) -> None:
    config = LogConfig.from_overrides(overrides)
    defaults = LogConfig.defaults()
    as_strings = config.overrides_vs(defaults)
    assert set(as_strings) <= set(overrides)
    assert all(isinstance(v, str) for v in as_strings.values())
    assert LogConfig.from_overrides(as_strings) == config
    assert LogConfig.from_overrides(config.to_properties()) == config
    assert validate_topic_overrides(as_strings) == as_strings
