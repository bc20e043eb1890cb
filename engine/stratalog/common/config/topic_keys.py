"""The topic-level settings (Kafka's ``LogConfig``) and the broker keys that supply their defaults.

Declared once, as data, so that the engine, the HTTP API and the operator's CRDs validate and
describe a topic's settings alike. Defaults and ranges are Kafka 4.x's, with the deliberate
exceptions noted at each key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from stratalog.common.config.key import ConfigKey, ConfigType, index
from stratalog.common.limits import INT64_MAX

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
TOPIC_CONFIGS: Mapping[str, ConfigKey] = index(
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
NEGATIVE_MEANS_UNLIMITED = frozenset({"retention.ms"})
