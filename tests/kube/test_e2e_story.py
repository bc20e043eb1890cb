"""The whole story on a real kube-apiserver: controller and two agents as local processes.

What a user sees after ``kubectl apply`` of two LogDirs and two Topics: the partitions
appear on the LogDirs the assignment names; records go in and come out through an
agent's API; with small intervals, retention deletes expired segments and the Topic's
status and events say so; a compacted Topic's duplicates disappear and its dirty ratio
drops; checkpoint files advance; config changes apply live; an agent killed with SIGKILL
comes back with its data and its timers; deleting a Topic deletes (or, with Retain,
keeps) its partition directories.

The agents are processes on temporary directories rather than pods (there is no kubelet
in the test bed); they are started with the same command line the StatefulSet runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from .conftest import KubeCluster
from .roles import Agent, Operator, kubectl_json, wait_for

NS = "story"
FAST = ["--config", "log.retention.check.interval.ms=500",
        "--config", "log.cleaner.backoff.ms=500",
        "--config", "log.flush.offset.checkpoint.interval.ms=500",
        "--config", "log.flush.start.offset.checkpoint.interval.ms=500",
        "--config", "log.segment.delete.delay.ms=0",
        "--config", "log.initial.task.delay.ms=0",
        "--status-min-interval", "0.5", "--log-level", "DEBUG"]

LOGDIRS = """
apiVersion: stratalog.io/v1alpha1
kind: LogDir
metadata: {name: dir-a, labels: {stratalog.io/pool: story}}
spec:
  volumes: [{name: data-0, size: 1Gi}]
  topicDefaults: {segment.bytes: 1024, file.delete.delay.ms: 0}
---
apiVersion: stratalog.io/v1alpha1
kind: LogDir
metadata: {name: dir-b, labels: {stratalog.io/pool: story}}
spec:
  volumes: [{name: data-0, size: 1Gi}]
  topicDefaults: {segment.bytes: 1024, file.delete.delay.ms: 0}
"""

TOPICS = """
apiVersion: stratalog.io/v1alpha1
kind: Topic
metadata: {name: events}
spec:
  partitions: 4
  logDirSelector: {matchLabels: {stratalog.io/pool: story}}
  config: {cleanup.policy: [delete], retention.ms: 86400000}
  deletionPolicy: Delete
---
apiVersion: stratalog.io/v1alpha1
kind: Topic
metadata: {name: profiles}
spec:
  topicName: customer.profiles
  partitions: 2
  logDirSelector: {matchLabels: {stratalog.io/pool: story}}
  config: {cleanup.policy: [compact], min.cleanable.dirty.ratio: 1.0, min.compaction.lag.ms: 0,
           delete.retention.ms: 0, segment.bytes: 1024}
  deletionPolicy: Retain
"""


class Story:
    def __init__(self, cluster: KubeCluster, root: Path) -> None:
        self.cluster = cluster
        self.root = root
        self.operator = Operator(cluster.env, NS, root / "operator.log")
        # The agents' volumes are directories on the machine's own disk, which a shared machine may have
        # filled past the default 90% without this story being about that: DiskPressure under 1% free.
        self.agents = {name: Agent(cluster.env, NS, name, [root / name / "data-0"], root / f"{name}.log", *FAST,
                                   "--disk-pressure-free-ratio", "0.01")
                       for name in ("dir-a", "dir-b")}

    @property
    def logs(self) -> list[Path]:
        return [self.operator.log_path, *(a.log_path for a in self.agents.values())]

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.cluster.kubectl_run("-n", NS, *args, input=input).stdout

    def topic(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = kubectl_json(self.cluster, "-n", NS, "get", "topic", name)
        return result

    def partition_status(self, topic: str, logdir: str, partition: int) -> dict[str, Any] | None:
        status = self.topic(topic).get("status") or {}
        entry = ((status.get("logDirs") or {}).get(logdir) or {}).get("partitions") or {}
        found: dict[str, Any] | None = entry.get(str(partition))
        return found

    def status_when(self, what: str, topic: str, logdir: str, partition: int, ok: Any,
                    timeout: float = 90.0) -> dict[str, Any]:
        """Wait until the partition's figures in the Topic status satisfy ``ok``; the last seen are in the error."""
        seen: list[Any] = [None]

        def check() -> dict[str, Any] | None:
            seen[0] = self.partition_status(topic, logdir, partition)
            return seen[0] if seen[0] is not None and ok(seen[0]) else None
        try:
            result: dict[str, Any] = self.wait(what, check, timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}\nlast status of {topic}-{partition} on {logdir}: {seen[0]}") from None
        return result

    def owner(self, topic: str, partition: int) -> Agent:
        assignment = {a["partition"]: a["logDirs"] for a in self.topic(topic)["status"]["assignment"]}
        return self.agents[assignment[partition][0]]

    def events(self, reason: str, name: str) -> list[dict[str, Any]]:
        items = kubectl_json(self.cluster, "-n", NS, "get", "events")["items"]
        return [e for e in items if e.get("reason") == reason and e["involvedObject"]["name"] == name]

    def wait(self, what: str, check: Any, timeout: float = 90.0) -> Any:
        return wait_for(what, check, timeout=timeout, logs=self.logs)


@pytest.fixture(scope="module")
def story(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    s = Story(kube_cluster, tmp_path_factory.mktemp("story"))
    s.operator.start()
    for agent in s.agents.values():
        agent.start()
    try:
        yield s
    finally:
        for role in (*s.agents.values(), s.operator):
            role.stop()


def _checkpoint(path: Path) -> dict[str, int]:
    lines = path.read_text().split("\n")
    entries = {}
    for line in lines[2:]:
        if line.strip():
            topic, partition, offset = line.split()
            entries[f"{topic}-{partition}"] = int(offset)
    return entries


def test_topics_are_created_on_the_logdirs_their_assignment_names(story: Story) -> None:
    story.kubectl("apply", "-f", "-", input=LOGDIRS)
    story.kubectl("apply", "-f", "-", input=TOPICS)
    assignment = story.wait("the events assignment",
                            lambda: story.topic("events").get("status", {}).get("assignment"))
    assert {a["partition"]: a["logDirs"] for a in assignment} == {0: ["dir-a"], 1: ["dir-b"], 2: ["dir-a"],
                                                                 3: ["dir-b"]}
    for name, agent in story.agents.items():
        mine = [a["partition"] for a in assignment if name in a["logDirs"]]
        data = agent.data_dirs[0]
        story.wait(f"partitions {mine} of events on {name}",
                   lambda: all((data / f"events-{p}").is_dir() for p in mine))
        assert sorted(p.name for p in data.iterdir() if p.name.startswith("events-")) == \
            [f"events-{p}" for p in mine]
        story.wait(f"customer.profiles on {name}",
                   lambda: any(p.name.startswith("customer.profiles-") for p in data.iterdir()))
    topic = story.wait("both agents' finalizers on the Topic", lambda: (
        t := story.topic("events"),
        {"stratalog.io/agent-dir-a", "stratalog.io/agent-dir-b"} <= set(t["metadata"].get("finalizers") or []))[1])
    assert topic
    # The controller gathers the agents' reports: every assigned partition is held.
    placed = story.wait("PartitionsPlaced=True on events", lambda: next(
        (c for c in story.topic("events").get("status", {}).get("conditions", [])
         if c["type"] == "PartitionsPlaced" and c["status"] == "True"), None))
    assert placed["reason"] == "AllPlaced" and "all 4 partition replicas" in placed["message"]
    created = story.events("PartitionsCreated", "events")
    assert {e["message"].split(":")[0] for e in created} == {"LogDir dir-a", "LogDir dir-b"}


def test_records_go_in_and_come_out_through_the_agents_api(story: Story) -> None:
    for partition in range(4):
        agent = story.owner("events", partition)
        # Placed is not yet led: the agent leads once the controller's record names it (a moment
        # later on a loaded machine), and answers 421 until then.
        story.wait(f"{agent.logdir} leading events-{partition}", lambda: requests.get(
            f"{agent.base}/v1/topics/events/partitions/{partition}/offsets", params={"timestamp": -1},
            timeout=10).status_code == 200)
        values = [f"p{partition}-v{i}-" + "x" * 100 for i in range(40)]
        for chunk in range(8):   # eight batches of ~600 bytes: several 1 KiB segments
            result = agent.produce("events", partition, [{"key": f"k{i}", "value": values[i]}
                                                         for i in range(chunk * 5, chunk * 5 + 5)])
            assert result["baseOffset"] == chunk * 5 and result["lastOffset"] == chunk * 5 + 4
        records = agent.consume("events", partition)
        assert [r["value"] for r in records] == values
    # Each agent holds only its own partitions: the other one says so.
    other = story.agents["dir-b"] if story.owner("events", 0).logdir == "dir-a" else story.agents["dir-a"]
    refused = requests.get(f"{other.base}/v1/topics/events/partitions/0/records", timeout=10)
    assert refused.status_code == 404 and "events-0" in refused.text
    # Nor can it pick partitions for a topic it holds only some of: it says where to go instead.
    topic_level = requests.post(f"{other.base}/v1/topics/events/records", json={"records": [{"value": "x"}]},
                                timeout=10)
    assert topic_level.status_code == 409 and "holds partitions [1, 3] of topic 'events'" in topic_level.text
    status = story.status_when("figures of events-0 in the Topic status", "events", "dir-a", 0,
                               lambda s: s["logEndOffset"] == 40)
    assert status["logStartOffset"] == 0 and status["segments"] > 1 and status["sizeBytes"] > 0


def test_checkpoint_files_on_disk_advance(story: Story) -> None:
    data = story.agents["dir-a"].data_dirs[0]
    recovery = story.wait("recovery points of events-0 above 0", lambda: (
        c := _checkpoint(data / "recovery-point-offset-checkpoint")).get("events-0", 0) > 0 and c)
    assert recovery["events-0"] > 0


def test_the_logdir_status_joins_the_controllers_claims_and_the_agents_usage_and_health(story: Story) -> None:
    def reported() -> dict[str, Any] | None:
        status = kubectl_json(story.cluster, "-n", NS, "get", "logdir", "dir-a").get("status") or {}
        volumes = status.get("volumes") or []
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        done = volumes and "usedBytes" in volumes[0] and "CheckpointStale" in conditions and \
            conditions["CheckpointStale"]["reason"] == "CheckpointsCurrent" and \
            conditions["CheckpointStale"]["message"] != "no checkpoint written yet"
        return status if done else None
    status = story.wait("the agent's usage and health in the LogDir status", reported)
    [volume] = status["volumes"]
    # One entry, two writers: the claim from the controller, the figures from the agent.
    assert volume["name"] == "data-0" and volume["claimName"] == "dir-a-data-0"
    assert volume["capacityBytes"] > 0 and volume["partitions"] == 3   # events-0, events-2, profiles-0
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["DiskPressure"]["status"] == "False", conditions["DiskPressure"]["message"]
    assert conditions["CheckpointStale"]["status"] == "False"
    assert conditions["RetentionHealthy"]["status"] == "True"
    assert conditions["Ready"]["reason"] == "AgentNotReady"   # the controller's: no pod runs in the test bed


def test_a_retention_change_applies_live_and_retention_deletes_expired_segments(story: Story) -> None:
    before = story.partition_status("events", "dir-a", 0)
    assert before is not None and before["logStartOffset"] == 0   # retention.ms is a day: nothing expired
    story.kubectl("patch", "topic", "events", "--type", "merge", "-p",
                  json.dumps({"spec": {"config": {"retention.ms": 1000}}}))
    for partition, logdir in ((0, "dir-a"), (1, "dir-b")):
        after = story.status_when(f"retention to delete segments of events-{partition}", "events", logdir,
                                  partition, lambda s: s["logStartOffset"] > 0)
        assert after.get("lastRetentionTime")
    deleted = story.wait("SegmentsDeleted events", lambda: story.events("SegmentsDeleted", "events"))
    assert any("LogDir dir-a" in e["message"] for e in deleted)
    # The recovery-point checkpoint keeps being rewritten, and never points below the new log start.
    start = story.partition_status("events", "dir-a", 0)["logStartOffset"]
    story.wait("the recovery point of events-0 to reach the log start", lambda: _checkpoint(
        story.agents["dir-a"].data_dirs[0] / "recovery-point-offset-checkpoint").get("events-0", 0) >= start)
    # The config file in the partition directory says so too: the change reached the engine.
    props = (story.agents["dir-a"].data_dirs[0] / "events-0" / "stratalog-topic.properties").read_text()
    assert "retention.ms=1000" in props


def test_a_compacted_topic_loses_its_duplicates_and_its_dirty_ratio_drops(story: Story) -> None:
    agent = story.owner("profiles", 0)
    keys = [f"user-{i}" for i in range(5)]
    for round_ in range(30):
        agent.produce("customer.profiles", 0, [{"key": k, "value": f"{k}@{round_}"} for k in keys])
    for _ in range(2):   # rolls the last segment of keyed records, so the cleaner may take it
        agent.produce("customer.profiles", 0, [{"key": "filler", "value": "x" * 900}])
    logdir = agent.logdir
    # At min.cleanable.dirty.ratio 1.0 the cleaner never starts (a ratio must exceed it).
    dirty = story.status_when("a high dirty ratio in the status", "profiles", logdir, 0,
                              lambda s: s.get("dirtyRatio", 0) >= 0.5)
    story.kubectl("patch", "topic", "profiles", "--type", "merge", "-p",
                  json.dumps({"spec": {"config": {"min.cleanable.dirty.ratio": 0.01}}}))
    clean = story.status_when("the dirty ratio to drop after cleaning", "profiles", logdir, 0,
                              lambda s: s.get("lastCleanTime") and s["dirtyRatio"] < 0.5)
    assert clean["dirtyRatio"] < dirty["dirtyRatio"]
    records = agent.consume("customer.profiles", 0)
    latest = {r["key"]: r["value"] for r in records if r["key"] in keys}
    assert latest == {k: f"{k}@29" for k in keys}
    assert sum(1 for r in records if r["key"] in keys) < 30 * len(keys)   # duplicates are gone
    cleaned = story.wait("a Cleaned event", lambda: story.events("Cleaned", "profiles"))
    assert "dirty ratio" in cleaned[0]["message"]


def test_an_agent_killed_with_sigkill_recovers_its_data_and_resumes_its_timers(story: Story) -> None:
    agent = story.owner("profiles", 1)
    written = [{"key": f"account-{i}", "value": f"balance-{i}"} for i in range(20)]
    agent.produce("customer.profiles", 1, written)
    before = agent.consume("customer.profiles", 1)
    agent.kill()
    assert not (agent.data_dirs[0] / ".kafka_cleanshutdown").exists()
    agent.start()
    after = agent.consume("customer.profiles", 1)
    assert [(r["offset"], r["key"], r["value"]) for r in after] == \
        [(r["offset"], r["key"], r["value"]) for r in before]
    # Timers resumed: new records on a 1 s retention expire, and retention deletes their segments.
    partition = next(p for p in range(4) if story.owner("events", p) is agent)
    for _ in range(5):
        result = agent.produce("events", partition, [{"value": "x" * 200} for _ in range(3)])
    end = result["lastOffset"] + 1
    story.status_when("retention after the restart", "events", agent.logdir, partition,
                      lambda s: s["logStartOffset"] >= end - 5, timeout=120)


def test_deleting_topics_deletes_or_retains_their_partition_directories(story: Story) -> None:
    a, b = (story.agents[n].data_dirs[0] for n in ("dir-a", "dir-b"))
    story.kubectl("delete", "topic", "events", "--wait=false")
    story.kubectl("delete", "topic", "profiles", "--wait=false")
    story.wait("both Topics to be gone", lambda: not json.loads(
        story.kubectl("get", "topics", "-o", "json"))["items"])
    story.wait("the events partition directories to be removed", lambda: not any(
        p.name.startswith("events-") for p in itertools.chain(a.iterdir(), b.iterdir())))
    kept = [p.name for p in itertools.chain(a.iterdir(), b.iterdir()) if p.name.startswith("customer.profiles-")]
    assert sorted(kept) == ["customer.profiles-0", "customer.profiles-1"]
    assert story.events("PartitionsDeleted", "events") and story.events("DataRetained", "profiles")
