"""Scale: 200 Topics × 3 partitions × 3 replicas over three agents converge, and a quiet cluster costs no writes.

Every partition is replicated: each agent holds 600 replicas, leads 200 and follows 400 (one
fetcher per leader, fetching all its partitions in one request). The controller and the agents
run as real processes with their default intervals
(status written at most every 10 s per Topic when figures move, every 300 s for small
drift). The figures (API writes while converging, and per minute once quiet) are printed
for the record; the assertion is on behaviour: everything converges, and once nothing
changes the write counters stay flat.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import KubeCluster
from .roles import (Agent, Operator, api_writes, conflicts_total, kubectl_json, logdir_manifests, wait_for,
                    writes_total)

NS = "scale"
TOPICS = 200
PARTITIONS = 3
REPLICAS = 3
LOGDIRS = ("dir-a", "dir-b", "dir-c")
QUIET_SECONDS = 60.0
STATUS_TICK_SECONDS = 10.0   # the agents' status timer (min(--status-min-interval, 10 s))


def _manifests() -> str:
    docs = logdir_manifests(LOGDIRS)
    docs += [f"apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {{name: t{i:03d}}}\n"
             f"spec: {{partitions: {PARTITIONS}, replicas: {REPLICAS}}}\n" for i in range(TOPICS)]
    return "---\n".join(docs)


@pytest.fixture(scope="module")
def cluster(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[KubeCluster, Operator, dict[str, Agent]]]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    root = tmp_path_factory.mktemp("scale")
    operator = Operator(kube_cluster.env, NS, root / "operator.log").start()
    agents = {n: Agent(kube_cluster.env, NS, n, [root / n / "data-0"], root / f"{n}.log").start()
              for n in LOGDIRS}
    try:
        yield kube_cluster, operator, agents
    finally:
        for role in (*agents.values(), operator):
            role.stop()


def _converged(cluster: KubeCluster) -> bool:
    items: list[dict[str, Any]] = kubectl_json(cluster, "-n", NS, "get", "topics")["items"]
    if len(items) != TOPICS:
        return False
    for topic in items:
        status = topic.get("status") or {}
        assignment = status.get("assignment") or []
        if len(assignment) != PARTITIONS:
            return False
        reported = {(logdir, int(p)) for logdir, entry in (status.get("logDirs") or {}).items()
                    for p in (entry.get("partitions") or {})}
        if reported != {(d, a["partition"]) for a in assignment for d in a["logDirs"]}:
            return False
        records = status.get("partitions") or []
        if len(records) != PARTITIONS or any(r["leader"] is None or len(r["isr"]) != REPLICAS for r in records):
            return False
        placed = [c for c in status.get("conditions") or [] if c["type"] == "PartitionsPlaced"]
        if not placed or placed[0]["status"] != "True":   # the controller has gathered the reports
            return False
    # Each LogDir's own report counts its partitions too; it is rate-limited apart from the Topics'
    # reports, so it can trail them by one status interval.
    logdirs: list[dict[str, Any]] = kubectl_json(cluster, "-n", NS, "get", "logdirs")["items"]
    return all(sum(v.get("partitions", 0) for v in (d.get("status") or {}).get("volumes") or [])
               == TOPICS * PARTITIONS for d in logdirs)


def test_two_hundred_topics_converge_and_a_quiet_cluster_writes_nothing(
        cluster: tuple[KubeCluster, Operator, dict[str, Agent]]) -> None:
    kube, operator, agents = cluster
    roles = [operator, *agents.values()]
    logs = [r.log_path for r in roles]

    def conflicts() -> dict[str, float]:
        return {"operator": conflicts_total(operator.metrics(), "stratalog_operator"),
                **{n: conflicts_total(a.metrics(), "stratalog_agent") for n, a in agents.items()}}

    def labelled_writes() -> dict[str, float]:
        """Every role's write counters by verb and kind (Leases aside), to name a write at rest."""
        pages = [("operator", operator.metrics(), "stratalog_operator"),
                 *((n, a.metrics(), "stratalog_agent") for n, a in agents.items())]
        return {f"{role} {dict(labels)}": value for role, text, prefix in pages
                for (_, labels), value in api_writes(text, prefix).items()}

    def writes() -> dict[str, float]:
        return {"operator": writes_total(operator.metrics(), "stratalog_operator"),
                **{n: writes_total(a.metrics(), "stratalog_agent") for n, a in agents.items()}}

    start, before = time.monotonic(), writes()
    kube.kubectl_run("-n", NS, "apply", "-f", "-", input=_manifests(), timeout=300)
    wait_for(f"{TOPICS} Topics × {PARTITIONS} partitions to be assigned, created and reported",
             lambda: _converged(kube), timeout=900, interval=2.0, logs=logs)
    converge_s = time.monotonic() - start
    for name, agent in agents.items():
        held = [p for p in agent.data_dirs[0].iterdir() if p.is_dir()]
        assert len(held) == TOPICS * PARTITIONS   # every agent has a replica of every partition
        figures = agent.metrics()
        assert f"stratalog_replica_partition_count {float(TOPICS * PARTITIONS)}" in figures
        assert f"stratalog_replica_leader_count {float(TOPICS)}" in figures   # preferred leaders, spread evenly
    settled = writes()
    # Let the last status writes of the convergence drain (no write over more than one status
    # tick of the agents, STATUS_TICK_SECONDS), then measure a quiet window.
    wait_for("the write counters to settle", lambda: (
        a := writes(), time.sleep(STATUS_TICK_SECONDS + 2), writes() == a)[-1], timeout=180, logs=logs)
    quiet_start, labelled_start = writes(), labelled_writes()
    time.sleep(QUIET_SECONDS)
    quiet_end, labelled_end = writes(), labelled_writes()
    converging = {k: settled[k] - before[k] for k in settled}
    refused = conflicts()   # 409s: compare-and-swaps of partition records that lost and were retried
    quiet_per_min = {k: (quiet_end[k] - quiet_start[k]) * 60 / QUIET_SECONDS for k in quiet_end}
    figures = {"topics": TOPICS, "partitions": TOPICS * PARTITIONS, "converge_seconds": round(converge_s, 1),
               "writes_while_converging": converging, "conflicts_while_converging": refused,
               "writes_per_minute_when_quiet": quiet_per_min}
    print("\nSCALE " + json.dumps(figures))
    made = {k: v - labelled_start.get(k, 0) for k, v in labelled_end.items() if v != labelled_start.get(k, 0)}
    assert all(v == 0 for v in quiet_per_min.values()), (quiet_per_min, made)   # which writes, if any
    # No storm of 409s: a lost compare-and-swap is the exception, not the rule.
    assert sum(refused.values()) <= 0.1 * sum(converging.values()), (refused, converging)
    assert all(r.alive() for r in roles)
