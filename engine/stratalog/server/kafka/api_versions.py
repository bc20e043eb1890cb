"""ApiVersions: the API versions this listener implements in full, and nothing more.

A client picks, per API, the highest version both sides know; a version listed here must
therefore be served completely. Kafka 4 dropped Produce below 3 and Fetch below 4 (KIP-896);
Fetch stops at 12 because 13 names topics by id, which this engine does not keep yet.
"""

from __future__ import annotations

from typing import Any


API_VERSIONS = 18
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
SASL_HANDSHAKE = 17
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DESCRIBE_CONFIGS = 32
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
SASL_AUTHENTICATE = 36
DESCRIBE_CLUSTER = 60

SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    METADATA: (1, 12),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),   # Kafka 4 dropped 0-1 (KIP-896)
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 4),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 5),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DESCRIBE_CONFIGS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 1),
    API_VERSIONS: (0, 3),
}

# Offered only when access control is on (Kafka lists them on SASL listeners only). Handshake
# v0 (raw SASL tokens after it, no Kafka framing) went in Kafka 4 (KIP-896).
SASL: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

UNSUPPORTED_VERSION = 35


def supported(api_key: int, version: int, *, sasl: bool = False) -> bool:
    bounds = SUPPORTED.get(api_key) or (SASL.get(api_key) if sasl else None)
    return bounds is not None and bounds[0] <= version <= bounds[1]


def api_versions_response(error_code: int = 0, *, sasl: bool = False) -> dict[str, Any]:
    offered = {**SUPPORTED, **(SASL if sasl else {})}
    return {"error_code": error_code, "throttle_time": 0,
            "api_keys": [{"api_key": key, "min_version": low, "max_version": high}
                         for key, (low, high) in sorted(offered.items())]}
