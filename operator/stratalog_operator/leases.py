"""Agents' liveness as ``coordination.k8s.io`` Leases, without I/O (Kafka's broker heartbeats and sessions).

Each LogDir's agent holds a Lease named after its LogDir and renews it every
``broker.heartbeat.interval.ms``; it is alive for the controller while the last renewal is
younger than the Lease's duration (``broker.session.timeout.ms``, rounded up to whole seconds as
the Lease API takes them). The agent also advertises there where its engine can be reached (its
HTTP API, and its Kafka listener as ``host:port``), so followers find their leader and Kafka
clients every broker without another object (Kafka's broker registration carries its listeners).

A Lease alone does not fence: an agent that was paused past its Lease may wake up still
believing it leads. So the agent measures its own Lease on its own monotonic clock, from the
moment it *sent* its last successful renewal, and stops acknowledging as soon as that is older
than the Lease's duration (``AgentLease.may_lead``) — never later than the controller can have
declared it dead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from stratalog.common.addresses import split_host_port

from .names import LABEL_COMPONENT, LABEL_LOGDIR, LABEL_MANAGED_BY

__all__ = ["ADVERTISED_ANNOTATION", "KAFKA_ADVERTISED_ANNOTATION", "KAFKA_REPLICA_FETCH_ANNOTATION",
           "SHUTTING_DOWN_ANNOTATION", "REJOINING_ANNOTATION",
           "AGENT_LEASE_SELECTOR",
           "shutting_down", "rejoining", "lease_name", "lease_body", "renewal", "expired", "alive_logdirs",
           "duration_seconds", "micro_time", "kafka_addresses",
           "parse_host_port"]

ADVERTISED_ANNOTATION = "stratalog.io/advertised-url"
KAFKA_ADVERTISED_ANNOTATION = "stratalog.io/kafka-advertised"   # host:port of the agent's Kafka listener
# Said beside it by agents whose listener answers followers' Fetch (replica id >= 0). Agents of
# earlier versions advertise the listener without it; during a rolling upgrade their followers
# keep fetching from them over HTTP.
KAFKA_REPLICA_FETCH_ANNOTATION = "stratalog.io/kafka-replica-fetch"
# Set by an agent that is shutting down (Kafka's ControlledShutdown request): the controller moves
# its leaderships to in-sync followers first, and it may not join an ISR meanwhile (KIP-841).
SHUTTING_DOWN_ANNOTATION = "stratalog.io/controlled-shutdown"
# Set by an agent that has just started (possibly after a crash that lost its unflushed tail,
# within its session, so its Lease never lapsed): the controller moves its leaderships and ISR
# places away as for a shutdown, so it never leads again at a leader epoch it held before the
# restart (followers would truncate acknowledged records to its shorter log). It clears the mark
# once the records show nothing left; then it rejoins as a follower (Kafka fences a re-registered
# broker with a new broker epoch, KIP-903).
REJOINING_ANNOTATION = "stratalog.io/rejoining"
LEASE_COMPONENT = "agent-lease"
AGENT_LEASE_SELECTOR = f"{LABEL_COMPONENT}={LEASE_COMPONENT}"


def lease_name(logdir: str) -> str:
    return f"stratalog-agent-{logdir}"[:253]


def duration_seconds(session_timeout_ms: int) -> int:
    """The Lease API counts whole seconds: round up, so the Lease is never shorter than the session."""
    return max(1, math.ceil(session_timeout_ms / 1000))


def micro_time(when: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, in UTC."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def lease_body(logdir: str, namespace: str, holder: str, session_timeout_ms: int, now: datetime,
               advertised_url: str | None, *, rejoining: bool = False,
               kafka_advertised: str | None = None) -> dict[str, Any]:
    annotations = {ADVERTISED_ANNOTATION: advertised_url} if advertised_url else {}
    if kafka_advertised:
        annotations[KAFKA_ADVERTISED_ANNOTATION] = kafka_advertised
        annotations[KAFKA_REPLICA_FETCH_ANNOTATION] = "true"
    if rejoining:
        annotations[REJOINING_ANNOTATION] = "true"
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease_name(logdir), "namespace": namespace, "annotations": annotations,
                     "labels": {LABEL_LOGDIR: logdir, LABEL_COMPONENT: LEASE_COMPONENT,
                                LABEL_MANAGED_BY: "stratalog-agent"}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_seconds(session_timeout_ms),
                 "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0},
    }


def renewal(holder: str, session_timeout_ms: int, now: datetime, advertised_url: str | None, *,
            leaving: bool = False, rejoining: bool = False, kafka_advertised: str | None = None) -> dict[str, Any]:
    """The merge patch of one renewal (it also takes the Lease over from a previous holder, and
    clears the marks a previous process of this agent may have left)."""
    annotations: dict[str, Any] = {SHUTTING_DOWN_ANNOTATION: "true" if leaving else None,
                                   REJOINING_ANNOTATION: "true" if rejoining else None}
    if advertised_url:
        annotations[ADVERTISED_ANNOTATION] = advertised_url
    # Said with every renewal, and cleared when no longer given (an agent restarted without a listener).
    annotations[KAFKA_ADVERTISED_ANNOTATION] = kafka_advertised or None
    annotations[KAFKA_REPLICA_FETCH_ANNOTATION] = "true" if kafka_advertised else None
    return {"metadata": {"annotations": annotations},
            "spec": {"holderIdentity": holder, "renewTime": micro_time(now),
                     "leaseDurationSeconds": duration_seconds(session_timeout_ms)}}


def expired(lease: Mapping[str, Any], now: datetime) -> bool:
    """Whether the holder's last renewal is older than the Lease's duration (or it never renewed)."""
    spec = lease.get("spec") or {}
    renewed, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not renewed or not isinstance(duration, int):
        return True
    return _parse_time(renewed) + timedelta(seconds=duration) < now


def alive_logdirs(leases: Iterable[Mapping[str, Any]], now: datetime) -> set[str]:
    """The LogDirs whose agent's Lease is current."""
    alive = set()
    for lease in leases:
        logdir = ((lease.get("metadata") or {}).get("labels") or {}).get(LABEL_LOGDIR)
        if logdir and not expired(lease, now):
            alive.add(logdir)
    return alive


def shutting_down(leases: Iterable[Mapping[str, Any]]) -> set[str]:
    """The LogDirs whose agents are in a controlled shutdown."""
    return _marked(leases, SHUTTING_DOWN_ANNOTATION)


def rejoining(leases: Iterable[Mapping[str, Any]]) -> set[str]:
    """The LogDirs whose agents have restarted and wait for their old leaderships to be moved."""
    return _marked(leases, REJOINING_ANNOTATION)


def _marked(leases: Iterable[Mapping[str, Any]], annotation: str) -> set[str]:
    out = set()
    for lease in leases:
        meta = lease.get("metadata") or {}
        logdir = (meta.get("labels") or {}).get(LABEL_LOGDIR)
        if logdir and (meta.get("annotations") or {}).get(annotation) == "true":
            out.add(logdir)
    return out


def kafka_addresses(leases: Iterable[Mapping[str, Any]], now: datetime) -> dict[str, tuple[str, int]]:
    """The Kafka listener (host, port) of each LogDir whose agent's Lease is current and names one.

    A malformed address is left out: that agent is then listed to no client, as a Kafka broker
    without the listener is not.
    """
    out = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        logdir = (meta.get("labels") or {}).get(LABEL_LOGDIR)
        address = parse_host_port(str((meta.get("annotations") or {}).get(KAFKA_ADVERTISED_ANNOTATION) or ""))
        if logdir and address is not None and not expired(lease, now):
            out[logdir] = address
    return out


def parse_host_port(text: str) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` too) as a pair; None when it is not one."""
    address = split_host_port(text)
    if address is None or not address[0] or not address[1]:
        return None
    return address
