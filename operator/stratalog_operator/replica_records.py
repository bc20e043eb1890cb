"""Partition records as the engine sees them, and AlterPartition as a pure rule.

The Topic's status names replicas by LogDir (``election.PartitionRecord``); the engine counts
them as Kafka does, by integer broker id. Each LogDir's id is derived from its name, so every
agent and the controller agree on it without another object to keep: a LogDir's name is unique
in its namespace and immutable, which is all Kafka asks of ``node.id``. Ids live only in memory
(nothing on disk records them), so the mapping could change in a later version without a
migration. Two names of one namespace that hash alike are refused where they meet
(``broker_ids``), never silently merged.

``alter_isr`` is the check behind Kafka's AlterPartition: the leader's proposal counts only if
it was made against the record as it is now (same leader, leader epoch and partition epoch), and
a replica may join the ISR only while its agent holds a live Lease (KIP-903: a fenced broker is
not eligible). The caller performs the write by compare-and-swap on ``resourceVersion``.
"""

from __future__ import annotations

import urllib.parse
import zlib
from collections.abc import Iterable, Mapping, Set
from dataclasses import replace
from typing import Any

from stratalog.broker.replica_state import PartitionState
from stratalog.common.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidUpdateVersionError,
)

from .election import PartitionRecord
from .leases import (
    ADVERTISED_ANNOTATION,
    KAFKA_ADVERTISED_ANNOTATION,
    KAFKA_REPLICA_FETCH_ANNOTATION,
    parse_host_port,
)
from .names import LABEL_LOGDIR

__all__ = ["broker_id", "broker_ids", "engine_state", "alter_isr", "advertised_urls", "replication_endpoints"]


def broker_id(logdir: str) -> int:
    """The broker id of a LogDir's engine: a 31-bit hash of its name (a Kafka node id is an int32 ≥ 0)."""
    return zlib.crc32(logdir.encode()) & 0x7FFFFFFF


def broker_ids(logdirs: Iterable[str]) -> dict[str, int]:
    """Ids of several LogDirs; a ValueError naming both when two of them collide."""
    ids: dict[str, int] = {}
    seen: dict[int, str] = {}
    for name in logdirs:
        n = broker_id(name)
        if seen.setdefault(n, name) != name:
            raise ValueError(f"LogDirs {seen[n]!r} and {name!r} hash to the same broker id {n}; rename one")
        ids[name] = n
    return ids


def engine_state(record: PartitionRecord) -> PartitionState:
    ids = broker_ids(record.replicas)
    return PartitionState(tuple(ids[r] for r in record.replicas),
                          -1 if record.leader is None else ids[record.leader], record.leader_epoch,
                          tuple(ids[r] for r in record.isr), record.partition_epoch)


def alter_isr(record: PartitionRecord, leader: int, leader_epoch: int, isr: Iterable[int], partition_epoch: int,
              alive: Set[str]) -> PartitionRecord:
    """The record after the leader's proposed ISR, or the error Kafka's controller answers with."""
    ids = broker_ids(record.replicas)
    names = {n: name for name, n in ids.items()}
    proposer = names.get(leader, f"broker {leader}")
    if record.leader != proposer or record.leader_epoch != leader_epoch:
        raise FencedLeaderEpochError(
            f"partition {record.partition}: ISR change from {proposer} at leader epoch {leader_epoch}, but the "
            f"leader is {record.leader or 'none'} at epoch {record.leader_epoch}")
    if record.partition_epoch != partition_epoch:
        raise InvalidUpdateVersionError(
            f"partition {record.partition}: ISR change proposed against partition epoch {partition_epoch}, the "
            f"current one is {record.partition_epoch}")
    wanted = set(isr)
    unknown = wanted - set(names)
    if unknown or leader not in wanted:
        raise InvalidUpdateVersionError(
            f"partition {record.partition}: ISR {sorted(wanted)} must hold the leader and only its replicas "
            f"{list(record.replicas)}")
    joining = {names[n] for n in wanted} - set(record.isr)
    ineligible = sorted(joining - set(alive))
    if ineligible:
        raise IneligibleReplicaError(f"partition {record.partition}: {', '.join(ineligible)} hold no live Lease; "
                                     "they cannot join the ISR")
    new_isr = tuple(r for r in record.replicas if ids[r] in wanted)
    return replace(record, isr=new_isr, partition_epoch=record.partition_epoch + 1)


def advertised_urls(leases: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Where each LogDir's engine can be reached, as its agent advertises it on its Lease."""
    out = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        logdir = (meta.get("labels") or {}).get(LABEL_LOGDIR)
        url = (meta.get("annotations") or {}).get(ADVERTISED_ANNOTATION)
        if logdir and url:
            out[logdir] = url
    return out


def replication_endpoints(leases: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Where followers fetch from a LogDir's engine, for those that say they serve followers on
    their Kafka listener: ``kafka://HOST:PORT``, as Kafka's followers fetch, at a fraction of HTTP's
    cost per round (the others are fetched from at their API). An agent serves both listeners
    with one certificate, so an https API means a TLS Kafka listener (``kafka+ssl://``). An
    address that does not make a URL is left out (its API still serves)."""
    apis = advertised_urls(leases)
    out = {}
    for lease in leases:
        meta = lease.get("metadata") or {}
        logdir = (meta.get("labels") or {}).get(LABEL_LOGDIR)
        annotations = meta.get("annotations") or {}
        address = parse_host_port(str(annotations.get(KAFKA_ADVERTISED_ANNOTATION) or ""))
        if logdir not in apis or address is None or annotations.get(KAFKA_REPLICA_FETCH_ANNOTATION) != "true":
            continue
        host, port = address
        scheme = "kafka+ssl" if apis[logdir].startswith("https:") else "kafka"
        url = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        parsed = urllib.parse.urlsplit(url)
        if parsed.hostname == host.lower() and parsed.port == port and not parsed.path and not parsed.query:
            out[logdir] = url
    return out
