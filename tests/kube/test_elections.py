"""The controller elects through the API server: partition records in the Topic's status, moved when a
LogDir agent's Lease lapses.

Three LogDirs, each with a real agent process keeping a 3 s Lease; a Topic of 2 partitions × 3
replicas. The controller writes each partition's record from the assignment (the preferred
replica leads epoch 0, all in sync); SIGKILL of an agent makes its Lease lapse, and the controller
moves the leadership it held to the next ISR member and takes it out of every ISR.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import KubeCluster
from .roles import Agent, Operator, kubectl_json, logdir_manifests, wait_for

NS = "elections"
LOGDIRS = ("dir-a", "dir-b", "dir-c")


def _manifests() -> str:
    docs = logdir_manifests(LOGDIRS)
    docs.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {name: events}\n"
                "spec: {partitions: 2, replicas: 3}\n")
    return "---\n".join(docs)


@pytest.fixture(scope="module")
def cluster(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[KubeCluster, Operator, dict[str, Agent]]]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    root = tmp_path_factory.mktemp("elections")
    operator = Operator(kube_cluster.env, NS, root / "operator.log").start()
    agents = {n: Agent(kube_cluster.env, NS, n, [root / n / "data-0"], root / f"{n}.log",
                       "--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500").start()
              for n in LOGDIRS}
    kube_cluster.kubectl_run("-n", NS, "apply", "-f", "-", input=_manifests())
    try:
        yield kube_cluster, operator, agents
    finally:
        for role in (*agents.values(), operator):
            role.stop()


def records(cluster: KubeCluster) -> dict[int, dict[str, Any]]:
    topic = kubectl_json(cluster, "-n", NS, "get", "topic", "events")
    return {r["partition"]: r for r in (topic.get("status") or {}).get("partitions") or []}


def test_each_partition_gets_a_record_from_its_assignment(cluster):
    kube, operator, agents = cluster
    logs = [operator.log_path, *(a.log_path for a in agents.values())]
    found = wait_for("the partition records", lambda: (r := records(kube)) and len(r) == 2 and r, logs=logs)
    assert found[0] == {"partition": 0, "replicas": ["dir-a", "dir-b", "dir-c"], "leader": "dir-a",
                        "leaderEpoch": 0, "isr": ["dir-a", "dir-b", "dir-c"], "partitionEpoch": 0}
    assert found[1]["leader"] == "dir-b" and found[1]["replicas"] == ["dir-b", "dir-c", "dir-a"]
    status = kubectl_json(kube, "-n", NS, "get", "topic", "events")["status"]
    assert (status["underReplicatedPartitions"], status["offlinePartitions"]) == (0, 0)


def test_a_lost_agent_hands_its_leadership_to_the_next_isr_member_and_leaves_every_isr(cluster):
    kube, operator, agents = cluster
    logs = [operator.log_path, *(a.log_path for a in agents.values())]
    wait_for("the partition records", lambda: len(records(kube)) == 2, logs=logs)
    agents["dir-a"].kill()

    def moved() -> dict[int, dict[str, Any]] | None:
        r = records(kube)
        return r if r[0]["leader"] != "dir-a" and "dir-a" not in r[1]["isr"] else None

    after = wait_for("dir-a's leadership and ISR places to move", moved, timeout=60, logs=logs)
    assert (after[0]["leader"], after[0]["isr"], after[0]["leaderEpoch"], after[0]["partitionEpoch"]) == \
        ("dir-b", ["dir-b", "dir-c"], 1, 1)
    assert (after[1]["leader"], after[1]["isr"], after[1]["leaderEpoch"], after[1]["partitionEpoch"]) == \
        ("dir-b", ["dir-b", "dir-c"], 0, 1)
    assert 'stratalog_operator_partition_elections_total{reason="LeaderLost"} 1.0' in operator.metrics()
    status = kubectl_json(kube, "-n", NS, "get", "topic", "events")["status"]
    assert (status["underReplicatedPartitions"], status["offlinePartitions"]) == (2, 0)
    table = kube.kubectl_run("-n", NS, "get", "topic", "events", "-o", "wide").stdout.split("\n")
    assert "UNDER-REPLICATED" in table[0] and "OFFLINE" in table[0], table
    events = wait_for("the election events", lambda: {
        (e["reason"], e["message"]) for e in kubectl_json(kube, "-n", NS, "get", "events")["items"]
        if e["involvedObject"]["name"] == "events" and e["reason"] in ("LeaderLost", "IsrShrink")} or None, logs=logs)
    assert ("LeaderLost", "partition 0: leader dir-a → dir-b (leader epoch 1), ISR [dir-b, dir-c]") in events
    assert ("IsrShrink", "partition 1: leader dir-b → dir-b (leader epoch 0), ISR [dir-b, dir-c]") in events
