"""The engine-level (broker) settings, under Kafka's names: the log layer's, replication's, idempotent
producers' and consumer groups', and the broker defaults of topic settings (Kafka's server synonyms).

Declared once, as data, beside ``topic_keys``: a broker key that feeds a topic key takes that
key's type and rules, so the two never disagree about what a value may be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stratalog.common.config.key import DOUBLE_MAX, ConfigKey, ConfigType, ConfigValue, index
from stratalog.common.config.topic_keys import TOPIC_CONFIGS
from stratalog.common.limits import INT64_MAX

_L = ConfigType.LONG
_I = ConfigType.INT
_D = ConfigType.DOUBLE
_B = ConfigType.BOOLEAN


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
ENGINE_CONFIGS: Mapping[str, ConfigKey] = index(
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
