"""Which transport a follower reaches its leader by, from the leader's endpoint.

``http://`` and ``https://`` endpoints are the leader's HTTP API (``POST /v1/replication/fetch``);
``kafka://`` and ``kafka+ssl://`` its Kafka listener (a Fetch with a replica id, as Kafka's own
followers fetch). The controller's partition state names each replica's endpoint; both ends
carry the same batches and marks, and the Kafka listener answers them at a fraction of HTTP's
per-request cost, which every ``acks=all`` produce pays twice.
"""

from __future__ import annotations

from stratalog.broker.fetcher import LeaderSessionClient
from stratalog.server.credentials import NO_CREDENTIALS, Credentials
from stratalog.server.kafka.leader_session import KafkaLeaderSession, is_kafka_endpoint
from stratalog.server.replication import LeaderSession


def leader_session(endpoint: str, credentials: Credentials = NO_CREDENTIALS) -> LeaderSessionClient:
    if is_kafka_endpoint(endpoint):
        return KafkaLeaderSession(endpoint, credentials)
    return LeaderSession(endpoint, credentials)
