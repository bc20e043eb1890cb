"""Typed errors of the engine, each carrying Kafka's error name as a stable code.

Every failure a caller can cause (bad bytes, bad names, bad configs, a held
directory) surfaces as one of these, so the CLI, the HTTP API and the operator
can report it uniformly: ``code`` is the Kafka error name where one fits, and
the message names what was wrong and where.
"""

from __future__ import annotations


class StratalogError(Exception):
    """Base of every error the engine raises on purpose."""

    code: str = "UNKNOWN_SERVER_ERROR"

    def details(self) -> dict[str, object]:
        """Fields a transport adds to the error's answer beside its code and message."""
        return {}


class CorruptRecordError(StratalogError):
    """Bytes that do not decode as a valid record batch.

    ``position`` is the byte offset (within the buffer or file being decoded)
    where the problem was found; ``reason`` says what was wrong there.
    """

    code = "CORRUPT_MESSAGE"

    def __init__(self, position: int, reason: str, *, source: str | None = None) -> None:
        self.position = position
        self.reason = reason
        self.source = source
        where = f"{source} at byte {position}" if source else f"byte {position}"
        super().__init__(f"corrupt record batch at {where}: {reason}")


class InvalidRecordError(StratalogError):
    """A well-formed batch whose records break a topic rule (e.g. missing key on a compacted topic)."""

    code = "INVALID_RECORD"


class InvalidTimestampError(StratalogError):
    code = "INVALID_TIMESTAMP"


class InvalidTxnStateError(StratalogError):
    """A transactional batch where no transaction coordinator added the partition to a transaction."""

    code = "INVALID_TXN_STATE"


class OutOfOrderSequenceError(StratalogError):
    """An idempotent producer's batch whose first sequence does not follow its last one here."""

    code = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StratalogError):
    """An idempotent producer's batch from an epoch older than one already written (a fenced producer)."""

    code = "INVALID_PRODUCER_EPOCH"


class RecordTooLargeError(StratalogError):
    """A batch larger than ``max.message.bytes``."""

    code = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StratalogError):
    """An append larger than ``segment.bytes``: it could never fit in a segment."""

    code = "RECORD_LIST_TOO_LARGE"


class InvalidTopicError(StratalogError):
    code = "INVALID_TOPIC_EXCEPTION"


class TopicExistsError(StratalogError):
    code = "TOPIC_ALREADY_EXISTS"


class UnknownTopicOrPartitionError(StratalogError):
    code = "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidPartitionsError(StratalogError):
    code = "INVALID_PARTITIONS"


class InvalidConfigError(StratalogError):
    code = "INVALID_CONFIG"


class OffsetOutOfRangeError(StratalogError):
    code = "OFFSET_OUT_OF_RANGE"


class LogDirLockedError(StratalogError):
    """Another process holds the ``.lock`` of a data directory."""

    code = "KAFKA_STORAGE_ERROR"


class LogDirError(StratalogError):
    """A data directory that cannot be used (unreadable, not a directory, bad meta.properties)."""

    code = "KAFKA_STORAGE_ERROR"


class CorruptIndexError(StratalogError):
    code = "CORRUPT_MESSAGE"


class CheckpointError(StratalogError):
    """A checkpoint file whose text does not follow Kafka's format."""

    code = "KAFKA_STORAGE_ERROR"


class InvalidRequiredAcksError(StratalogError):
    code = "INVALID_REQUIRED_ACKS"


class StoredBatchError(StratalogError):
    """Stored bytes that do not decode when served: the disk's fault, never the request's."""

    code = "KAFKA_STORAGE_ERROR"


class KafkaStorageError(StratalogError):
    """A partition whose log directory went offline after an I/O error (Kafka's ``KafkaStorageException``).

    Nothing more is written to that directory until the engine restarts; the message names the
    directory, the operation that failed and the operating system's error.
    """

    code = "KAFKA_STORAGE_ERROR"


# -- replication (Kafka's names) ----------------------------------------------------------------
class NotLeaderOrFollowerError(StratalogError):
    """This replica is not the partition's leader (produce) or not a replica at all.

    When this engine knows who leads, the answer says so (``leader``: broker id, address, epoch),
    as Kafka's produce and fetch responses carry ``CurrentLeader`` (KIP-951), so a client goes
    there without a metadata round trip.
    """

    code = "NOT_LEADER_OR_FOLLOWER"

    def __init__(self, message: str, *, leader_id: int | None = None, leader_url: str | None = None,
                 leader_epoch: int | None = None) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_url = leader_url
        self.leader_epoch = leader_epoch

    def details(self) -> dict[str, object]:
        if self.leader_id is None:
            return {}
        return {"leader": {"brokerId": self.leader_id, "url": self.leader_url, "leaderEpoch": self.leader_epoch}}


class FencedLeaderEpochError(StratalogError):
    """The request's leader epoch is older than this replica's: its sender missed a leader change."""

    code = "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(StratalogError):
    """The request's leader epoch is newer than this replica's: this replica has not heard of it yet."""

    code = "UNKNOWN_LEADER_EPOCH"


class NotEnoughReplicasError(StratalogError):
    """acks=all with fewer in-sync replicas than ``min.insync.replicas``: refused before the append."""

    code = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(StratalogError):
    """Appended, but the ISR shrank below ``min.insync.replicas`` before the high watermark passed it."""

    code = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class InvalidUpdateVersionError(StratalogError):
    """An ISR change proposed against a partition epoch that is no longer current (AlterPartition)."""

    code = "INVALID_UPDATE_VERSION"


class RequestTimedOutError(StratalogError):
    code = "REQUEST_TIMED_OUT"


class IneligibleReplicaError(StratalogError):
    """An ISR addition of a replica the controller has fenced (KIP-841): it must register again first."""

    code = "INELIGIBLE_REPLICA"


# -- access control (Kafka's names) ------------------------------------------------------------
class AuthenticationFailedError(StratalogError):
    """No credential, or one the authenticator does not accept (HTTP 401, Kafka's SASL failure)."""

    code = "SASL_AUTHENTICATION_FAILED"


class TopicAuthorizationFailedError(StratalogError):
    """An authenticated principal lacks the verb this request needs on a topic."""

    code = "TOPIC_AUTHORIZATION_FAILED"

    def __init__(self, message: str, *, verb: str, resource: str) -> None:
        super().__init__(message)
        self.verb = verb
        self.resource = resource

    def details(self) -> dict[str, object]:
        return {"verb": self.verb, "resource": self.resource}


class ClusterAuthorizationFailedError(TopicAuthorizationFailedError):
    """The same, for a request that concerns every topic (maintenance, creating topics)."""

    code = "CLUSTER_AUTHORIZATION_FAILED"


def error_for_code(code: str) -> type[StratalogError]:
    """The engine's error class for a Kafka error name a peer answered with (the last defined where
    several share a name; StratalogError for a name the engine has no class of), so that a
    follower or a client acts on a remote error as on a local one."""
    return _BY_CODE.get(code, StratalogError)


_BY_CODE: dict[str, type[StratalogError]] = {
    cls.code: cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, StratalogError) and cls is not StratalogError
}
