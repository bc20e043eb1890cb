"""The OpenAPI 3.1 document of the API, served at ``/v1/openapi.json``.

Written by hand, from one table per operation, because its readers need more
than route metadata could give: the Kafka error codes each operation can
answer with, the two media types of produce and fetch, and the server's own
limits (maximum long-poll wait, fetch size, partitions per topic), which are
taken from the running server's settings so the document is exact for it.
schemathesis fuzzes the server against this document (tests/test_server_fuzz.py)
and a test checks that it names exactly the routes ``app.ROUTES`` serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stratalog import __version__
from stratalog.server.state import Settings
from stratalog.common.limits import INT32_MAX, INT64_MAX

JSON = "application/json"
RECORD_BATCH = "application/vnd.kafka.record-batch"
TOPIC_PATTERN = "^[a-zA-Z0-9._-]+$"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _int(minimum: int | None = None, maximum: int | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    schema.update(extra)
    return schema


def _object(properties: dict[str, Schema], required: list[str] | None = None, *, closed: bool = False,
            **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    schema.update(extra)
    return schema


_ERROR_TEXT = {
    "400": "A malformed request (INVALID_REQUEST, naming the field) or one the engine refuses: "
           "INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_PARTITIONS, INVALID_RECORD, INVALID_TIMESTAMP, "
           "INVALID_REQUIRED_ACKS, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE.",
    "401": "SASL_AUTHENTICATION_FAILED (access control on): no bearer token, or one that is not valid.",
    "403": "TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED (access control on): the token's roles do "
           "not grant this operation's verb on the topic or the cluster.",
    "404": "UNKNOWN_TOPIC_OR_PARTITION.",
    "409": "TOPIC_ALREADY_EXISTS; with replication, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, "
           "INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA: the request's view of the replication state is stale.",
    "413": "MESSAGE_TOO_LARGE: the body exceeds the server's limit (twice the largest max.message.bytes, "
           "plus 64 KiB) and was not read.",
    "415": "INVALID_REQUEST: a body media type this operation does not take.",
    "416": "OFFSET_OUT_OF_RANGE: the offset is outside [log start offset, log end offset].",
    "500": "KAFKA_STORAGE_ERROR: stored data that does not decode (the server's fault, never the request's).",
    "421": "NOT_LEADER_OR_FOLLOWER (replication): this engine does not lead the partition; the message names "
           "its leader and where it is.",
    "503": "BROKER_NOT_AVAILABLE: the engine is still opening its directories, or the server is shutting down; "
           "NOT_ENOUGH_REPLICAS(_AFTER_APPEND) with replication: too few in-sync replicas.",
    "504": "REQUEST_TIMED_OUT (replication, acks=all): the in-sync replicas did not all have the batch within "
           "request.timeout.ms; it may still commit.",
}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"description": _ERROR_TEXT[str(s)], "content": {JSON: {"schema": _ref("Error")}}}
            for s in statuses}


def _ok(schema: Schema, description: str = "OK", status: int = 200) -> dict[str, Any]:
    return {str(status): {"description": description, "content": {JSON: {"schema": schema}}}}


def _json_body(schema: Schema, *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": schema}}}


def _query(name: str, schema: Schema, description: str) -> Schema:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def build_document(settings: Settings, secured: Mapping[tuple[str, str], bool] | None = None) -> dict[str, Any]:
    """The document; ``secured``, when access control is on, says for each (METHOD, path) whether it
    needs a bearer token, and the document then declares the scheme and each operation's need."""
    max_partitions = settings.max_partitions_per_topic
    topic_param = {"name": "topic", "in": "path", "required": True, "schema": _ref("TopicName"),
                   "examples": {"demo": {"value": "demo"}, "compacted": {"value": "compacted"}}}
    # Deleting gets no example: a client trying the examples in order should not delete the topic the
    # other operations' examples use.
    deletable_topic_param = {"name": "topic", "in": "path", "required": True, "schema": _ref("TopicName")}
    partition_param = {"name": "partition", "in": "path", "required": True,
                       "schema": _int(0, INT32_MAX), "example": 0}
    tp_params = [topic_param, partition_param]
    acks = _query("acks", {"type": "string", "enum": ["1", "all", "-1"]},
                  "1 (default): answer once the batch is in the leader's log (page cache). all / -1: answer "
                  "once every in-sync replica has it (a replicated partition: the high watermark passed it; "
                  "504 after request.timeout.ms), or after fsync where this engine holds the only copy.")
    fsync = _query("fsync", {"type": "boolean"}, "true: same as acks=all.")
    compression = _query("compression", {"type": "string", "enum": ["none", "gzip", "snappy", "lz4", "zstd"]},
                         "Codec of the batch built from JSON records (raw batches carry their own).")
    topic_filter = _query("topic", _ref("TopicName"), "Only this topic (default: every topic).")
    isolation = _query("isolation", {"type": "string", "enum": ["read_uncommitted", "read_committed"]},
                       "Kafka's isolation.level. read_uncommitted (default): up to the high watermark. "
                       "read_committed: up to the last stable offset (no open transaction's records).")
    fetch_headers = {
        name: {"description": text, "required": True, "schema": _int(-1, INT64_MAX)}
        for name, text in (
            ("X-High-Watermark", "The partition's high watermark."),
            ("X-Log-Start-Offset", "The partition's log start offset."),
            ("X-Log-End-Offset", "The partition's log end offset."),
            ("X-Next-Offset", "The offset to fetch next: one past the last record served, or the requested "
                              "offset when nothing was served."),
        )
    }
    fetch_headers["X-Last-Stable-Offset"] = {"description": "read_committed only: the last stable offset.",
                                             "required": False, "schema": _int(-1, INT64_MAX)}
    fetch_headers["X-Aborted-Transactions"] = {
        "description": "read_committed only: the aborted transactions the batches meet, as comma-separated "
                       "producerId:firstOffset pairs; a reader skips that producer's batches from firstOffset "
                       "to its ABORT marker.", "required": False, "schema": {"type": "string"}}
    produce_body = {
        "required": True,
        "content": {
            RECORD_BATCH: {"schema": {"type": "string", "format": "binary"}},
            JSON: {"schema": _ref("ProduceRequest")},
        },
        "description": f"Either raw v2 record batches ({RECORD_BATCH}; each appended as Kafka's leader appends a "
                       "producer batch, all or none) or JSON records (built into one batch).",
    }

    paths: dict[str, Any] = {
        "/v1/topics": {
            "get": {"operationId": "listTopics", "summary": "List topics", "tags": ["topics"],
                    "responses": {**_ok(_ref("TopicList")), **_errors(503)}},
            "post": {"operationId": "createTopic", "summary": "Create a topic (CreateTopics)", "tags": ["topics"],
                     "requestBody": _json_body(_ref("CreateTopicRequest")),
                     "responses": {**_ok(_ref("TopicDescription"), "Created", 201),
                                   **_errors(400, 409, 413, 415, 503)}},
        },
        "/v1/topics/{topic}": {
            "get": {"operationId": "describeTopic", "summary": "Describe a topic", "tags": ["topics"],
                    "parameters": [topic_param],
                    "responses": {**_ok(_ref("TopicDescription")), **_errors(400, 404, 503)}},
            "delete": {"operationId": "deleteTopic", "tags": ["topics"], "parameters": [deletable_topic_param],
                       "summary": "Delete a topic: its directories are renamed -delete, removed by the deletion task",
                       "responses": {**_ok(_ref("DeleteTopicResponse")), **_errors(400, 404, 503)}},
        },
        "/v1/topics/{topic}/configs": {
            "parameters": [topic_param],
            "patch": {"operationId": "alterTopicConfigs", "tags": ["topics"],
                      "summary": "Set and delete topic config overrides (IncrementalAlterConfigs)",
                      "requestBody": _json_body(_ref("AlterConfigsRequest")),
                      "responses": {**_ok(_ref("TopicDescription")), **_errors(400, 404, 413, 415, 503)}},
        },
        "/v1/topics/{topic}/partitions": {
            "parameters": [topic_param],
            "post": {"operationId": "createPartitions", "tags": ["topics"],
                     "summary": "Grow the topic to `count` partitions (CreatePartitions)",
                     "requestBody": _json_body(_ref("AddPartitionsRequest")),
                     "responses": {**_ok(_ref("TopicDescription")), **_errors(400, 404, 413, 415, 503)}},
        },
        "/v1/topics/{topic}/records": {
            "parameters": [topic_param],
            "post": {"operationId": "produceToTopic", "tags": ["records"],
                     "summary": "Produce JSON records; each goes to its `partition`, else murmur2(key) mod "
                                "partitions (Kafka's default partitioner), else round-robin",
                     "parameters": [acks, fsync, compression],
                     "requestBody": _json_body(_ref("ProduceRequest")),
                     "responses": {**_ok(_ref("TopicAppendResult")),
                                   **_errors(400, 404, 413, 415, 421, 503, 504)}},
        },
        "/v1/topics/{topic}/partitions/{partition}": {
            "parameters": tp_params,
            "get": {"operationId": "partitionStats", "tags": ["topics"],
                    "summary": "Offsets, size, segments and cleaner state of one partition",
                    "responses": {**_ok(_ref("PartitionStats")), **_errors(400, 404, 503)}},
        },
        "/v1/topics/{topic}/partitions/{partition}/records": {
            "parameters": tp_params,
            "post": {"operationId": "produce", "tags": ["records"],
                     "summary": "Append raw batches or JSON records to one partition",
                     "parameters": [acks, fsync, compression],
                     "requestBody": produce_body,
                     "responses": {"200": {"description": "Appended",
                                           "content": {JSON: {"schema": _ref("AppendResult")}}},
                                   **_errors(400, 404, 413, 415, 421, 503, 504)}},
            "get": {"operationId": "fetch", "tags": ["records"],
                    "summary": "Fetch from an offset, raw batches or JSON records; long-polls at the high watermark",
                    "parameters": [
                        _query("offset", _int(0, INT64_MAX), "First offset (default: the log start offset)."),
                        _query("maxBytes", _int(1, settings.max_fetch_bytes),
                               f"Byte budget, batch-granular; at least one batch is served "
                               f"(default {settings.default_fetch_bytes})."),
                        _query("maxWaitMs", _int(0, settings.max_fetch_wait_ms),
                               "At the high watermark, wait up to this long for an append (default 0)."),
                        _query("format", {"type": "string", "enum": ["json", "binary"]},
                               f"json (default) or binary; without it, Accept: {RECORD_BATCH} selects binary."),
                        isolation,
                    ],
                    "responses": {
                        "200": {"description": "Batches as stored (binary; the first may start below `offset`) "
                                               "or the records at and after `offset` (JSON).",
                                "headers": fetch_headers,
                                "content": {JSON: {"schema": _ref("FetchResponse")},
                                            RECORD_BATCH: {"schema": {"type": "string", "format": "binary"}}}},
                        **_errors(400, 404, 416, 421, 500, 503)}},
        },
        "/v1/topics/{topic}/partitions/{partition}/offsets": {
            "parameters": tp_params,
            "get": {"operationId": "listOffsets", "tags": ["records"],
                    "summary": "ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, "
                               "or the first offset with a timestamp at or after T ms",
                    "parameters": [_query("timestamp", _int(-4, INT64_MAX), "The query (default -1)."), isolation],
                    "responses": {**_ok(_ref("OffsetsResponse")), **_errors(400, 404, 421, 503)}},
        },
        "/v1/topics/{topic}/partitions/{partition}/delete-records": {
            "parameters": tp_params,
            "post": {"operationId": "deleteRecords", "tags": ["records"],
                     "summary": "DeleteRecords: move the log start offset to beforeOffset (-1: the high watermark)",
                     "requestBody": _json_body(_ref("DeleteRecordsRequest")),
                     "responses": {**_ok(_ref("DeleteRecordsResponse")),
                                   **_errors(400, 404, 413, 415, 416, 421, 503)}},
        },
        "/v1/replication/partitions/{topic}/{partition}": {
            "parameters": tp_params,
            "put": {"operationId": "putPartitionState", "tags": ["replication"],
                    "summary": "The controller's LeaderAndIsr for one partition (needs serve --broker-id)",
                    "requestBody": _json_body(_object({
                        "replicas": {"type": "array", "items": _int(0)}, "leader": _int(-1),
                        "leaderEpoch": _int(0), "isr": {"type": "array", "items": _int(0)},
                        "partitionEpoch": _int(0),
                        "endpoints": {"type": "object", "additionalProperties": {"type": "string"}},
                        "fetchEndpoints": {"type": "object", "additionalProperties": {"type": "string"},
                                           "description": "where followers fetch from a broker, if not its "
                                                          "endpoint: kafka://HOST:PORT or kafka+ssl://"}},
                        ["replicas", "leader", "leaderEpoch", "isr", "partitionEpoch"])),
                    "responses": {**_ok(_object({"isLeader": {"type": "boolean"}, "logEndOffset": _int(0),
                                                 "highWatermark": _int(0)})), **_errors(400, 409, 503)}},
        },
        "/v1/replication/partitions/{topic}/{partition}/fetch": {
            "parameters": tp_params,
            "get": {"operationId": "replicaFetch", "tags": ["replication"],
                    "summary": "A follower's fetch: whole batches from fetchOffset, or X-Diverging-Epoch (KIP-320)",
                    "parameters": [_query(name, _int(-1), text) for name, text in (
                        ("replicaId", "The follower's broker id."),
                        ("fetchOffset", "The follower's log end offset."),
                        ("lastFetchedEpoch", "The epoch of the follower's last batch (-1: none)."),
                        ("currentLeaderEpoch", "The leader epoch the follower knows."),
                        ("maxBytes", "Bytes to return at most (a larger first batch is still sent)."),
                        ("maxWaitMs", "How long to wait for new data."),
                        ("minBytes", "Bytes to wait for (replica.fetch.min.bytes, default 1)."))],
                    "responses": {"200": {"description": "Whole batches; X-High-Watermark, X-Log-Start-Offset, "
                                                         "X-Log-End-Offset, X-Diverging-Epoch, X-Out-Of-Range",
                                          "content": {RECORD_BATCH: {"schema": {"type": "string",
                                                                                "format": "binary"}}}},
                                  **_errors(400, 404, 409, 421, 500, 503)}},
        },
        "/v1/replication/fetch": {
            "post": {"operationId": "replicaFetchMany", "tags": ["replication"],
                     "summary": "A follower's fetch of every partition it follows on this leader, in one request",
                     "requestBody": {"required": True, "content": {JSON: {"schema": _object({
                         "replicaId": _int(0), "maxWaitMs": _int(0), "minBytes": _int(1),
                         "maxBytes": _int(0),
                         "partitions": {"type": "array", "items": _object({
                             "topic": _ref("TopicName"), "partition": _int(0), "fetchOffset": _int(0),
                             "lastFetchedEpoch": _int(-1), "currentLeaderEpoch": _int(-1), "maxBytes": _int(0)},
                             ["topic", "partition", "fetchOffset"])}},
                         ["replicaId", "partitions"])}}},
                     "responses": {"200": {"description": "A 4-byte big-endian length, a JSON list with one entry "
                                                          "per partition (highWatermark, logStartOffset, "
                                                          "logEndOffset, size, divergingEpoch, outOfRange; or "
                                                          "error_code and message), then each partition's "
                                                          "whole batches in order",
                                           "content": {"application/vnd.stratalog.replica-fetch": {
                                               "schema": {"type": "string", "format": "binary"}}}},
                                   **_errors(400, 409, 503)}},
        },
        "/v1/maintenance/retention": {
            "post": {"operationId": "runRetention", "tags": ["maintenance"],
                     "summary": "One retention pass now (retention.ms, retention.bytes, log start offset)",
                     "parameters": [topic_filter],
                     "responses": {**_ok(_ref("RetentionResult")), **_errors(400, 404, 503)}},
        },
        "/v1/maintenance/clean": {
            "post": {"operationId": "runCleaner", "tags": ["maintenance"],
                     "summary": "One cleaner pass now over the compacted logs that are due",
                     "parameters": [topic_filter,
                                    _query("force", {"type": "boolean"},
                                           "Clean every log with anything cleanable, ignoring "
                                           "min.cleanable.dirty.ratio.")],
                     "responses": {**_ok(_ref("CleanResult")), **_errors(400, 404, 503)}},
        },
        "/v1/maintenance/checkpoints": {
            "post": {"operationId": "writeCheckpoints", "tags": ["maintenance"],
                     "summary": "Write the recovery-point, log-start-offset, high-watermark and cleaner checkpoints",
                     "responses": {**_ok(_object({"partitions": _int(0)}, ["partitions"])), **_errors(503)}},
        },
        "/v1/maintenance/flush": {
            "post": {"operationId": "flushLogs", "tags": ["maintenance"],
                     "summary": "Flush logs whose flush.ms has passed (all=true: every log with unflushed data)",
                     "parameters": [_query("all", {"type": "boolean"}, "Flush every log.")],
                     "responses": {**_ok(_ref("FlushResult")), **_errors(400, 503)}},
        },
        "/v1/maintenance/deletions": {
            "post": {"operationId": "deleteExpired", "tags": ["maintenance"],
                     "summary": "Remove .deleted segment files past file.delete.delay.ms and -delete directories",
                     "responses": {**_ok(_object({"segmentFiles": _int(0), "directories": _int(0)},
                                                 ["segmentFiles", "directories"])), **_errors(503)}},
        },
        "/v1/status": {
            "get": {"operationId": "status", "tags": ["service"],
                    "summary": "Readiness, data directories (clean shutdown or recovered), task runs",
                    "responses": _ok(_ref("Status"))},
        },
        "/v1/openapi.json": {
            "get": {"operationId": "openapi", "tags": ["service"], "summary": "This document",
                    "responses": _ok({"type": "object"})},
        },
        "/healthz": {
            "get": {"operationId": "healthz", "tags": ["service"], "summary": "The process is alive",
                    "responses": _ok(_object({"status": {"type": "string"}}, ["status"]))},
        },
        "/readyz": {
            "get": {"operationId": "readyz", "tags": ["service"],
                    "summary": "200 once the engine has opened its directories, 503 before and while stopping",
                    "responses": {**_ok(_object({"status": {"type": "string"}}, ["status"])), **_errors(503)}},
        },
        "/metrics": {
            "get": {"operationId": "metrics", "tags": ["service"], "summary": "Prometheus metrics",
                    "responses": {"200": {"description": "Prometheus text format",
                                          "content": {"text/plain": {"schema": {"type": "string"}}}}}},
        },
    }
    components: dict[str, Any] = {"schemas": _schemas(max_partitions)}
    if secured is not None:
        components["securitySchemes"] = {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "A Kubernetes ServiceAccount token or a token of the server's --token-file; 401 "
                           "without a valid one, 403 when its roles do not grant the operation's verb."}}
        for path, item in paths.items():
            for method, operation in item.items():
                if method == "parameters":   # the path's own, not an operation
                    continue
                if secured[(method.upper(), path)]:
                    operation["security"] = [{"bearer": []}]
                    operation["responses"].update(_errors(401, 403))
                else:
                    operation["security"] = []
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "stratalog",
            "version": __version__,
            "description": "Kafka's log storage layer as a service. Errors are "
                           "{\"error_code\": <Kafka error name>, \"message\": ...}; see each operation's "
                           "responses for the statuses. Default listen address: 127.0.0.1:8092.",
        },
        "paths": paths,
        "components": components,
    }


def _schemas(max_partitions: int) -> dict[str, Schema]:
    offset = _int(-1, INT64_MAX)
    nullable_text = {"type": ["string", "null"]}
    b64 = {"type": ["string", "null"], "contentEncoding": "base64",
           "description": "base64 of bytes that are not UTF-8 text"}
    header_value = {"oneOf": [{"type": ["string", "null"]},
                              _object({"b64": {"type": "string", "contentEncoding": "base64"}}, ["b64"],
                                      closed=True)]}
    headers = {"oneOf": [
        {"type": "object", "additionalProperties": header_value},
        {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, header_value],
                                    "minItems": 2, "maxItems": 2}},
        {"type": "null"},
    ]}
    summary = {
        "partition": _int(0, INT32_MAX), "logDir": {"type": "string"}, "logStartOffset": offset,
        "logEndOffset": offset, "highWatermark": offset, "size": _int(0), "segments": _int(1),
    }
    append_result = {"baseOffset": offset, "lastOffset": offset, "logAppendTime": _int(-1),
                     "recordCount": _int(1), "batches": _int(1), "logStartOffset": offset}
    return {
        "Error": _object({"error_code": {"type": "string", "description": "Kafka's error name"},
                          "message": {"type": "string"},
                          "leader": {"type": "object", "description": "with NOT_LEADER_OR_FOLLOWER, when this "
                                     "engine knows the partition's leader: where to send the request instead",
                                     "properties": {"brokerId": {"type": "integer"},
                                                    "url": {"type": ["string", "null"]},
                                                    "leaderEpoch": {"type": ["integer", "null"]}}}},
                         ["error_code", "message"]),
        "TopicName": {"type": "string", "minLength": 1, "maxLength": 249, "pattern": TOPIC_PATTERN,
                      "not": {"enum": [".", ".."]},
                      "description": "Kafka's rule: ASCII letters, digits, '.', '_', '-'; at most 249 characters."},
        "JsonRecord": _object(
            {
                "key": {"description": "UTF-8 text, or null; any other JSON value is stored as its JSON text"},
                "value": {"description": "UTF-8 text, or null (a tombstone); any other JSON value is stored as "
                                         "its JSON text"},
                "key_b64": b64, "value_b64": b64,
                "timestamp": {"type": ["integer", "null"], "minimum": -1, "maximum": INT64_MAX,
                              "description": "CreateTime in ms (default: now)"},
                "headers": headers,
                "partition": {"type": ["integer", "null"], "minimum": 0, "maximum": INT32_MAX,
                              "description": "The record's partition (topic-level produce; on the partition "
                                             "endpoint it must match the path)"},
            },
            closed=True,
            allOf=[{"not": {"required": ["key", "key_b64"]}}, {"not": {"required": ["value", "value_b64"]}}],
        ),
        "ProduceRequest": _object({"records": {"type": "array", "minItems": 1, "items": _ref("JsonRecord")}},
                                  ["records"], closed=True),
        "AppendResult": _object(append_result, list(append_result)),
        "TopicAppendResult": _object({
            "topic": {"type": "string"}, "recordCount": _int(1),
            "partitions": {"type": "array", "items": _object({"partition": _int(0), **append_result},
                                                             ["partition", *append_result])}},
            ["topic", "recordCount", "partitions"]),
        "RecordOut": _object({
            "topic": {"type": "string"}, "partition": _int(0), "offset": _int(0), "timestamp": _int(),
            "timestampType": {"type": "string"}, "key": nullable_text, "value": nullable_text,
            "key_b64": {"type": "string"}, "value_b64": {"type": "string"}, "headers": headers},
            ["topic", "partition", "offset", "timestamp", "timestampType", "headers"]),
        "FetchResponse": _object({
            "topic": {"type": "string"}, "partition": _int(0),
            "records": {"type": "array", "items": _ref("RecordOut")},
            "highWatermark": offset, "logStartOffset": offset, "logEndOffset": offset, "nextOffset": offset,
            "lastStableOffset": offset,
            "abortedTransactions": {"type": "array", "items": _object({"producerId": _int(-1),
                                                                       "firstOffset": offset})}},
            ["topic", "partition", "records", "highWatermark", "logStartOffset", "logEndOffset", "nextOffset"]),
        "OffsetsResponse": _object({"topic": {"type": "string"}, "partition": _int(0), "offset": offset,
                                    "timestamp": _int(), "query": _int()},
                                   ["topic", "partition", "offset", "timestamp"]),
        "DeleteRecordsRequest": _object({"beforeOffset": _int(-1, INT64_MAX)}, ["beforeOffset"], closed=True),
        "DeleteRecordsResponse": _object({"topic": {"type": "string"}, "partition": _int(0),
                                          "lowWatermark": offset, "segments": _int(1)},
                                         ["topic", "partition", "lowWatermark", "segments"]),
        "TopicList": _object({"topics": {"type": "array", "items": _object(
            {"name": {"type": "string"}, "partitionCount": _int(1)}, ["name", "partitionCount"])}}, ["topics"]),
        "ConfigValues": {"type": "object",
                         "additionalProperties": {"type": ["string", "integer", "number", "boolean"]},
                         "description": "Topic settings under Kafka's names, e.g. cleanup.policy=compact"},
        "CreateTopicRequest": _object({"name": _ref("TopicName"), "partitions": _int(1, max_partitions),
                                       "configs": _ref("ConfigValues")}, ["name"], closed=True),
        "AlterConfigsRequest": _object({"set": _ref("ConfigValues"),
                                        "delete": {"type": "array", "items": {"type": "string"}}}, closed=True),
        "AddPartitionsRequest": _object({"count": _int(1, max_partitions)}, ["count"], closed=True),
        "TopicDescription": _object({
            "name": {"type": "string"}, "partitionCount": _int(1),
            "configs": {"type": "object", "additionalProperties": {"type": "string"}},
            "effectiveConfigs": {"type": "object", "additionalProperties": {"type": "string"}},
            "partitions": {"type": "array", "items": _object(summary, list(summary))}},
            ["name", "partitionCount", "configs", "effectiveConfigs", "partitions"]),
        "DeleteTopicResponse": _object({"deleted": {"type": "string"}, "partitions": _int(1),
                                        "renamedTo": {"type": "array", "items": {"type": "string"}}},
                                       ["deleted", "partitions", "renamedTo"]),
        "PartitionStats": _object({
            **summary, "topic": {"type": "string"}, "recoveryPoint": offset, "unflushedMessages": _int(0),
            "compacted": {"type": "boolean"}, "dirtyRatio": {"type": ["number", "null"]},
            "firstDirtyOffset": {"type": ["integer", "null"]}, "lastCleanMs": {"type": ["integer", "null"]},
            "cleanerPasses": _int(0), "uncleanableReason": {"type": ["string", "null"]}},
            [*summary, "topic", "recoveryPoint", "compacted", "dirtyRatio", "lastCleanMs"]),
        "RetentionResult": _object({
            "segmentsDeleted": _int(0),
            "deletions": {"type": "array", "items": _object({
                "topic": {"type": "string"}, "partition": _int(0), "baseOffset": _int(0), "size": _int(0),
                "reason": {"type": "string"}, "detail": {"type": "string"},
                "logStartOffset": {"type": ["integer", "null"]}},
                ["topic", "partition", "baseOffset", "size", "reason"])}},
            ["segmentsDeleted", "deletions"]),
        "CleanResult": _object({
            "logsCleaned": _int(0),
            "reports": {"type": "array", "items": _object({
                "topic": {"type": "string"}, "partition": _int(0), "firstDirtyOffset": _int(0),
                "cleanedUpTo": _int(0), "bytesRead": _int(0), "bytesWritten": _int(0), "recordsKept": _int(0),
                "recordsRemoved": _int(0), "dirtyRatioBefore": {"type": "number"},
                "dirtyRatioAfter": {"type": "number"}, "sizeBefore": _int(0), "sizeAfter": _int(0),
                "segmentsBefore": _int(0), "segmentsAfter": _int(0), "seconds": {"type": "number"},
                "MBps": {"type": "number"}, "retentionDeletions": {"type": "array", "items": _int(0)}},
                ["topic", "partition", "cleanedUpTo", "bytesRead", "bytesWritten", "recordsRemoved"])}},
            ["logsCleaned", "reports"]),
        "FlushResult": _object({"flushed": {"type": "array", "items": _object(
            {"topic": {"type": "string"}, "partition": _int(0)}, ["topic", "partition"])}, "count": _int(0)},
            ["flushed", "count"]),
        "Status": _object({
            "version": {"type": "string"}, "ready": {"type": "boolean"}, "started": {"type": "boolean"},
            "draining": {"type": "boolean"}, "schedule": {"type": "boolean"},
            "limits": _object({"maxFetchWaitMs": _int(0), "maxFetchBytes": _int(1),
                               "maxPartitionsPerTopic": _int(1)}),
            "tasks": {"type": "object", "additionalProperties": _object(
                {"runs": _int(0), "lastRunMs": {"type": ["integer", "null"]},
                 "lastError": {"type": ["string", "null"]}})},
            "dataDirs": {"type": "array", "items": _object(
                {"path": {"type": "string"}, "hadCleanShutdown": {"type": "boolean"}, "partitions": _int(0)},
                ["path"])},
            "partitions": _int(0),
            "recovery": _object({"recoveredSegments": _int(0), "partitions": {"type": "array"}},
                                ["recoveredSegments", "partitions"])},
            ["version", "ready", "schedule", "dataDirs"]),
    }
