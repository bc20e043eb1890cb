"""The controller (``stratalog operator``) as a real process against a real kube-apiserver.

Each test gets a fresh namespace and its own controller watching only that namespace. The
test bed has no controller-manager, scheduler or kubelet: agent pods never run (LogDirs stay
Ready=False/AgentNotReady), nothing garbage-collects owned objects, and no PV controller
binds claims; where a test needs a bound claim it plays the PV controller itself, and says so.

Every wait polls against a deadline; no assertion depends on how fast anything happens.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stratalog_operator.properties import digest

from .conftest import REPO, KubeCluster
from .roles import Samples, free_port, samples

STRATALOG = Path(sys.executable).with_name("stratalog")
EXAMPLES = REPO / "examples"
CRD_NAMES = ["logdirs.stratalog.io", "topics.stratalog.io"]
API_VERSION = "stratalog.io/v1alpha1"
MANAGED_BY = "app.kubernetes.io/managed-by=stratalog-operator"
FINALIZER = "stratalog.io/controller"
IMAGE = "registry.test/stratalog:under-test"
AGENT_ACCOUNT = "agents-under-test"
WAIT = 60.0          # generous deadline of every wait: the polls return as soon as the state is there

Json = dict[str, Any]


# -- waiting -------------------------------------------------------------------------------

def wait_until(what: str, probe: Callable[[], Any], ok: Callable[[Any], object] = bool, *,
               timeout: float = WAIT, interval: float = 0.2) -> Any:
    """Poll ``probe`` until ``ok(value)``; on the deadline fail with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last seen:\n"
                        f"{json.dumps(value, indent=1, default=str)[:4000]}", pytrace=False)
        time.sleep(interval)


def cond(obj: Json | None, type_: str) -> Json:
    """The condition ``type_`` of ``obj``'s status ({} when absent)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def brief(c: Json) -> tuple[str, str, str]:
    return c.get("status", ""), c.get("reason", ""), c.get("message", "")


# -- the namespace under test --------------------------------------------------------------

class Bed:
    """kubectl bound to one namespace, speaking JSON."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.k = cluster
        self.ns = namespace

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.k.kubectl_run("-n", self.ns, *args, input=input, check=check)

    def apply(self, *objects: Json) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))

    def apply_file(self, path: Path) -> None:
        self.kubectl("apply", "-f", str(path))

    def get(self, kind: str, name: str) -> Json | None:
        out = self.kubectl("get", kind, name, "-o", "json", "--ignore-not-found").stdout
        return json.loads(out) if out.strip() else None

    def objects(self, kind: str, selector: str | None = None) -> list[Json]:
        args = ["get", kind, "-o", "json"] + (["-l", selector] if selector else [])
        items: list[Json] = json.loads(self.kubectl(*args).stdout)["items"]
        return items

    def names(self, kind: str, selector: str | None = None) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.objects(kind, selector))

    def patch(self, kind: str, name: str, patch: Any, *, type: str = "merge", subresource: str | None = None) -> None:
        extra = [f"--subresource={subresource}"] if subresource else []
        self.kubectl("patch", kind, name, f"--type={type}", "-p", json.dumps(patch), *extra)

    def annotate(self, kind: str, name: str, *pairs: str) -> None:
        self.kubectl("annotate", "--overwrite", kind, name, *pairs)

    def delete(self, kind: str, name: str) -> None:
        self.kubectl("delete", kind, name, "--wait=false")

    def events(self, name: str, reason: str | None = None, kind: str | None = None) -> list[Json]:
        items = self.objects("events")
        return [e for e in items if e["involvedObject"].get("name") == name
                and (reason is None or e.get("reason") == reason)
                and (kind is None or e["involvedObject"].get("kind") == kind)]

    def wait_event(self, name: str, reason: str, kind: str, message: str | Callable[[str], bool]) -> Json:
        def matching(events: list[Json]) -> Json | None:
            for e in events:
                if (e.get("message") == message) if isinstance(message, str) else message(e.get("message", "")):
                    return e
            return None
        events = wait_until(f"{reason} event on {kind} {name}", lambda: self.events(name, reason, kind),
                            lambda es: matching(es) is not None)
        found = matching(events)
        assert found is not None
        return found

    def gone(self, kind: str, name: str) -> None:
        wait_until(f"{kind} {name} to be gone", lambda: self.get(kind, name), lambda o: o is None)


def logdir(name: str, *volumes: Json, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
           **spec: Any) -> Json:
    meta: Json = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": "LogDir", "metadata": meta,
            "spec": {"volumes": list(volumes) or [{"name": "data", "size": "1Gi"}], **spec}}


def topic(name: str, partitions: int, replicas: int = 1, *, annotations: dict[str, str] | None = None,
          **spec: Any) -> Json:
    meta: Json = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": "Topic", "metadata": meta,
            "spec": {"partitions": partitions, "replicas": replicas, **spec}}


def owner(obj: Json) -> Json:
    return {"apiVersion": API_VERSION, "kind": "LogDir", "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def assignment(obj: Json | None) -> dict[int, list[str]]:
    return {e["partition"]: e["logDirs"] for e in ((obj or {}).get("status") or {}).get("assignment") or []}


# -- the controller as a process -----------------------------------------------------------

class Operator:
    """``stratalog operator --namespace NS`` as a subprocess, with its /metrics."""

    def __init__(self, cluster: KubeCluster, namespace: str, logs: Path) -> None:
        self.k, self.ns, self.logs = cluster, namespace, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.runs = 0

    @property
    def log_path(self) -> Path:
        return self.logs / f"operator-{self.runs}.log"

    def start(self) -> None:
        assert self.proc is None
        self.runs += 1
        self.port = free_port()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(STRATALOG), "operator", "--namespace", self.ns, "--metrics-listen", f"127.0.0.1:{self.port}",
                 "--image", IMAGE, "--agent-service-account", AGENT_ACCOUNT],
                env=self.k.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def healthz() -> int:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"stratalog operator exited with {self.proc.returncode}:\n{self.log()}", pytrace=False)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                    return int(r.status)
            except (urllib.error.URLError, OSError):
                return 0
        wait_until("the controller's /healthz to answer 200", healthz, lambda s: s == 200, interval=0.1)

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind, as when the node dies."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def log(self) -> str:
        return "\n".join(f"--- run {n}\n" + (self.logs / f"operator-{n}.log").read_text(errors="replace")
                         for n in range(1, self.runs + 1))

    def samples(self) -> Samples:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return samples(r.read().decode())

    def writes(self) -> float:
        return sum(v for (name, _), v in self.samples().items() if name == "stratalog_operator_api_writes_total")

    def reconciles(self, kind: str, result: str) -> float:
        key = ("stratalog_operator_reconciles_total", (("kind", kind), ("result", result)))
        return self.samples().get(key, 0.0)

    def settle(self) -> float:
        """Wait until neither writes nor reconciles move for three seconds; returns the write count."""
        def counters() -> dict[Any, float]:
            return {k: v for k, v in self.samples().items()
                    if k[0] in ("stratalog_operator_api_writes_total", "stratalog_operator_reconciles_total")}
        previous = [counters()]
        streak = [0]

        def quiet() -> bool:
            # Three quiet seconds in a row: under load (CI's full suite) a single quiet second
            # was once a lull between the last setup writes.
            now = counters()
            streak[0] = streak[0] + 1 if now == previous[0] else 0
            previous[0] = now
            return streak[0] >= 3
        wait_until("the controller to go quiet", quiet, interval=1.0)
        return self.writes()


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(kube_cluster: KubeCluster) -> KubeCluster:
    kube_cluster.kubectl_run("apply", "-f", str(REPO / "crds"))
    kube_cluster.kubectl_run("wait", "--for", "condition=Established", "--timeout=60s",
                             *(f"crd/{n}" for n in CRD_NAMES))
    return kube_cluster


_namespaces = itertools.count(1)


@pytest.fixture
def bed(cluster: KubeCluster, request: pytest.FixtureRequest) -> Bed:
    """A fresh namespace per test (namespaces never finish deleting here, so they are left)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_")).strip("-")
    name = f"ctl{next(_namespaces)}-{base}"[:63].rstrip("-")
    cluster.kubectl_run("create", "namespace", name)
    return Bed(cluster, name)


@pytest.fixture
def operator(bed: Bed, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Operator]:
    """The controller for the test's namespace, up and healthy; its log is shown when the test fails."""
    failed_before = request.session.testsfailed
    op = Operator(bed.k, bed.ns, tmp_path)
    op.start()
    try:
        yield op
    finally:
        op.stop()
        if request.session.testsfailed > failed_before:
            # Shown under the failure as "Captured stratalog operator log teardown".
            request.node.add_report_section("teardown", "stratalog operator log", op.log())


# -- a LogDir and what it owns ---------------------------------------------------------------

def _ready_logdir(bed: Bed, name: str, generation: int = 1) -> Json:
    found: Json = wait_until(
        f"LogDir {name} reconciled (generation {generation})", lambda: bed.get("logdir", name),
        lambda o: o is not None and (o.get("status") or {}).get("observedGeneration") == generation
        and FINALIZER in (o["metadata"].get("finalizers") or []))
    return found


def test_logdir_owns_claims_configmap_service_and_statefulset(bed: Bed, operator: Operator) -> None:
    bed.apply_file(EXAMPLES / "logdir-two-volumes.yaml")     # dir-a: two 10Gi volumes, deleteClaim: false
    bed.apply(logdir("dir-b", {"name": "wal", "size": "2Gi", "storageClassName": "standard",
                               "accessModes": ["ReadWriteOncePod"]}, deleteClaim=True))
    a, b = _ready_logdir(bed, "dir-a"), _ready_logdir(bed, "dir-b")
    labels = {"app.kubernetes.io/name": "stratalog", "app.kubernetes.io/instance": "dir-a",
              "app.kubernetes.io/component": "agent", "app.kubernetes.io/managed-by": "stratalog-operator",
              "stratalog.io/logdir": "dir-a"}
    selector = {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                                       "app.kubernetes.io/component")}

    # The LogDir: our finalizer, and a status that says the agent is not there (no kubelet here).
    assert a["metadata"]["finalizers"] == [FINALIZER]
    status = a["status"]
    assert status["observedGeneration"] == 1
    assert brief(cond(a, "Ready")) == ("False", "AgentNotReady",
                                       "waiting for agent pod dir-a-0 to become ready (0/1 ready)")
    assert brief(cond(a, "StorageResizing")) == ("False", "NotResizing", "every claim has its size")
    assert brief(cond(a, "ReconciliationPaused")) == ("False", "NotPaused", "")
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    assert status["volumes"] == [{"name": "data-0", "claimName": "dir-a-data-0"},
                                 {"name": "data-1", "claimName": "dir-a-data-1"}]   # unbound: no capacity yet

    # One claim per volume; without deleteClaim no owner reference, so the data outlives the LogDir.
    claims = {c["metadata"]["name"]: c for c in bed.objects("pvc", "stratalog.io/logdir=dir-a")}
    assert sorted(claims) == ["dir-a-data-0", "dir-a-data-1"]
    for volume, claim in (("data-0", claims["dir-a-data-0"]), ("data-1", claims["dir-a-data-1"])):
        assert claim["metadata"]["labels"] == {**labels, "stratalog.io/logdir-volume": volume}
        assert "ownerReferences" not in claim["metadata"]
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert claim["spec"]["resources"] == {"requests": {"storage": "10Gi"}}
        assert "storageClassName" not in claim["spec"]
    [wal] = bed.objects("pvc", "stratalog.io/logdir=dir-b")
    assert wal["metadata"]["name"] == "dir-b-wal"
    assert wal["metadata"]["ownerReferences"] == [owner(b)]          # deleteClaim: true
    assert wal["spec"]["storageClassName"] == "standard"
    assert wal["spec"]["accessModes"] == ["ReadWriteOncePod"]
    assert wal["spec"]["resources"] == {"requests": {"storage": "2Gi"}}

    # Everything else is owned by (and controlled by) the LogDir.
    cm = bed.get("configmap", "dir-a-engine")
    assert cm is not None
    assert cm["metadata"]["labels"] == labels
    assert cm["metadata"]["ownerReferences"] == [owner(a)]
    properties = ("log.cleaner.threads=2\nlog.retention.check.interval.ms=60000\n"
                  "num.recovery.threads.per.data.dir=2\n")
    assert cm["data"] == {"engine.properties": properties}

    svc = bed.get("service", "dir-a")
    assert svc is not None
    assert svc["metadata"]["labels"] == labels
    assert svc["metadata"]["ownerReferences"] == [owner(a)]
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8092, "targetPort": "http", "protocol": "TCP"},
                                    {"name": "kafka", "port": 9092, "targetPort": "kafka", "protocol": "TCP"}]

    sts = bed.get("statefulset", "dir-a")
    assert sts is not None
    assert sts["metadata"]["labels"] == labels
    assert sts["metadata"]["ownerReferences"] == [owner(a)]
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["serviceName"] == "dir-a"
    assert sts["spec"]["selector"] == {"matchLabels": selector}
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"] == labels
    assert template["metadata"]["annotations"] == {"stratalog.io/config-hash": digest(properties)}
    pod = template["spec"]
    assert pod["serviceAccountName"] == AGENT_ACCOUNT
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                      "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["volumes"] == [
        {"name": "data-data-0", "persistentVolumeClaim": {"claimName": "dir-a-data-0"}},
        {"name": "data-data-1", "persistentVolumeClaim": {"claimName": "dir-a-data-1"}},
        {"name": "engine-config", "configMap": {"name": "dir-a-engine", "defaultMode": 420}},
        {"name": "tmp", "emptyDir": {}},
        # By default the agent checks tokens and RBAC, and presents a token of its own to other agents.
        {"name": "replication-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": "stratalog", "expirationSeconds": 3600, "path": "token"}}], "defaultMode": 420}},
    ]
    [agent] = pod["containers"]
    assert agent["image"] == IMAGE
    assert agent["command"] == [
        "stratalog", "agent", "--logdir", "dir-a", "--namespace", bed.ns, "--listen", "0.0.0.0:8092",
        "--config-file", "/etc/stratalog/engine.properties",
        "--advertise", f"http://dir-a.{bed.ns}.svc:8092",   # its Service: where followers and clients find it
        "--kafka-listen", "0.0.0.0:9092", "--kafka-advertise", f"dir-a.{bed.ns}.svc:9092",   # Kafka clients too
        "--data-dir", "/var/lib/stratalog/data-0", "--data-dir", "/var/lib/stratalog/data-1",
        "--authentication", "kubernetes", "--token-audience", "stratalog",
        "--replication-token-file", "/var/run/stratalog/token/token"]
    assert agent["ports"] == [{"name": "http", "containerPort": 8092, "protocol": "TCP"},
                              {"name": "kafka", "containerPort": 9092, "protocol": "TCP"}]
    assert agent["resources"] == {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
    assert agent["securityContext"] == {
        "runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert agent["volumeMounts"] == [
        {"name": "data-data-0", "mountPath": "/var/lib/stratalog/data-0"},
        {"name": "data-data-1", "mountPath": "/var/lib/stratalog/data-1"},
        {"name": "engine-config", "mountPath": "/etc/stratalog", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "replication-token", "mountPath": "/var/run/stratalog/token", "readOnly": True},
    ]

    # Nothing else carries our labels, and each creation was announced on the LogDir.
    assert bed.names("pvc,statefulset,service,configmap", MANAGED_BY) == [
        "dir-a", "dir-a", "dir-a-data-0", "dir-a-data-1", "dir-a-engine", "dir-b", "dir-b", "dir-b-engine", "dir-b-wal"]
    for message in ("created PersistentVolumeClaim dir-a-data-0 (10Gi)",
                    "created PersistentVolumeClaim dir-a-data-1 (10Gi)",
                    "created ConfigMap dir-a-engine", "created Service dir-a", "created StatefulSet dir-a"):
        bed.wait_event("dir-a", "Created", "LogDir", message)


# -- Topics: assignment ----------------------------------------------------------------------

def _topic_status(bed: Bed, name: str, generation: int = 1, ready: str | None = None,
                  message: Callable[[str], bool] | None = None) -> Json:
    def done(o: Json | None) -> bool:
        if o is None or (o.get("status") or {}).get("observedGeneration") != generation:
            return False
        c = cond(o, "Ready")
        return (ready is None or c.get("status") == ready) and (message is None or message(c.get("message", "")))
    found: Json = wait_until(f"Topic {name} reconciled (generation {generation}, Ready={ready})",
                             lambda: bed.get("topic", name), done)
    return found


def test_topic_assignment_follows_the_rule_and_never_moves(bed: Bed, operator: Operator) -> None:
    bed.apply(*(logdir(n) for n in ("dir-b", "dir-c", "dir-d")))
    for n in ("dir-b", "dir-c", "dir-d"):
        _ready_logdir(bed, n)                 # the controller knows all three before the Topic exists
    bed.apply(topic("orders", partitions=6, replicas=2))

    # Seed 004's worked example: partition i on sorted LogDir i mod 3, replica j on (i + j) mod 3.
    t = _topic_status(bed, "orders", ready="True")
    worked = {0: ["dir-b", "dir-c"], 1: ["dir-c", "dir-d"], 2: ["dir-d", "dir-b"],
              3: ["dir-b", "dir-c"], 4: ["dir-c", "dir-d"], 5: ["dir-d", "dir-b"]}
    assert assignment(t) == worked
    assert t["status"]["topicName"] == "orders"
    assert brief(cond(t, "Ready")) == ("True", "Assigned", "6 partitions × 2 replicas on 3 LogDirs")
    assert brief(cond(t, "ResourceConflict")) == ("False", "NoConflict", "")
    bed.wait_event("orders", "Assigned", "Topic", "assigned 6 partitions")

    # More partitions: the old six stay; the new ones follow the rule.
    bed.patch("topic", "orders", {"spec": {"partitions": 8}})
    t = _topic_status(bed, "orders", generation=2, ready="True")
    assert assignment(t) == {**worked, 6: ["dir-b", "dir-c"], 7: ["dir-c", "dir-d"]}
    grown = assignment(t)
    bed.wait_event("orders", "Assigned", "Topic", "assigned 8 partitions (had 6)")

    # A new LogDir, sorting first (the rule over four LogDirs differs everywhere): nothing moves.
    bed.apply(logdir("dir-a"))
    t = _topic_status(bed, "orders", generation=2, ready="True", message=lambda m: m.endswith("on 4 LogDirs"))
    assert assignment(t) == grown

    # Partitions added now use it: 8 and 9 by the rule over [a, b, c, d].
    bed.patch("topic", "orders", {"spec": {"partitions": 10}})
    t = _topic_status(bed, "orders", generation=3, ready="True")
    assert assignment(t) == {**grown, 8: ["dir-a", "dir-b"], 9: ["dir-b", "dir-c"]}


def test_topic_selects_logdirs_by_label(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("fast-1", labels={"pool": "fast"}), logdir("fast-2", labels={"pool": "fast"}),
              logdir("slow-1", labels={"pool": "slow"}))
    for n in ("fast-1", "fast-2", "slow-1"):
        _ready_logdir(bed, n)
    bed.apply(topic("hot", partitions=3, logDirSelector={"matchLabels": {"pool": "fast"}}))
    t = _topic_status(bed, "hot", ready="True")
    assert assignment(t) == {0: ["fast-1"], 1: ["fast-2"], 2: ["fast-1"]}

    # fast-2 leaves the pool: only its partition is placed again, over what is left.
    bed.kubectl("label", "--overwrite", "logdir", "fast-2", "pool=slow")
    t = wait_until("partition 1 re-placed", lambda: bed.get("topic", "hot"),
                   lambda o: assignment(o).get(1) == ["fast-1"])
    assert assignment(t) == {0: ["fast-1"], 1: ["fast-1"], 2: ["fast-1"]}
    bed.wait_event("hot", "Assigned", "Topic", lambda m: "re-placed [1]" in m)


def test_more_replicas_than_logdirs_is_not_ready_until_one_is_added(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-a"), logdir("dir-b"))
    _ready_logdir(bed, "dir-a")
    _ready_logdir(bed, "dir-b")
    bed.apply(topic("wide", partitions=2, replicas=3))

    t = _topic_status(bed, "wide", ready="False")
    message = "3 replicas need 3 LogDirs but only 2 LogDirs are selected (dir-a, dir-b)"
    assert brief(cond(t, "Ready")) == ("False", "InsufficientLogDirs", message)
    assert assignment(t) == {}
    bed.wait_event("wide", "InsufficientLogDirs", "Topic", message)

    bed.apply(logdir("dir-c"))
    t = _topic_status(bed, "wide", ready="True")
    assert brief(cond(t, "Ready")) == ("True", "Assigned", "2 partitions × 3 replicas on 3 LogDirs")
    assert assignment(t) == {0: ["dir-a", "dir-b", "dir-c"], 1: ["dir-b", "dir-c", "dir-a"]}


# -- deletion ----------------------------------------------------------------------------------

def test_deleting_a_logdir_keeps_its_claims_by_default(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("keep", {"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}))
    _ready_logdir(bed, "keep")
    wait_until("the StatefulSet", lambda: bed.get("statefulset", "keep"))

    bed.delete("logdir", "keep")
    bed.gone("logdir", "keep")
    # No garbage collector here: the controller deleted these itself.
    assert bed.get("statefulset", "keep") is None
    assert bed.get("service", "keep") is None
    assert bed.get("configmap", "keep-engine") is None
    claims = bed.objects("pvc", "stratalog.io/logdir=keep")
    assert sorted(c["metadata"]["name"] for c in claims) == ["keep-a", "keep-b"]
    assert all("deletionTimestamp" not in c["metadata"] for c in claims)
    bed.wait_event("keep", "Deleted", "LogDir", "deleted the LogDir's StatefulSet, Service and ConfigMap; "
                                                "PersistentVolumeClaims kept (deleteClaim: false)")


def test_deleting_a_logdir_with_delete_claim_deletes_its_claims(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("drop", {"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}, deleteClaim=True))
    _ready_logdir(bed, "drop")
    wait_until("the StatefulSet", lambda: bed.get("statefulset", "drop"))

    bed.delete("logdir", "drop")
    bed.gone("logdir", "drop")
    assert bed.get("statefulset", "drop") is None
    assert bed.get("service", "drop") is None
    assert bed.get("configmap", "drop-engine") is None
    # Deleted, held only by kubernetes.io/pvc-protection (no controller-manager here to release it).
    claims = bed.objects("pvc", "stratalog.io/logdir=drop")
    assert sorted(c["metadata"]["name"] for c in claims) == ["drop-a", "drop-b"]
    for claim in claims:
        assert "deletionTimestamp" in claim["metadata"]
        assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    for name in ("drop-a", "drop-b"):
        bed.wait_event("drop", "Deleted", "LogDir", f"deleted PersistentVolumeClaim {name} (deleteClaim)")


def test_deleting_a_logdir_releases_its_agents_finalizers_on_topics(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-1"), logdir("dir-2"))
    _ready_logdir(bed, "dir-1")
    _ready_logdir(bed, "dir-2")
    bed.apply(topic("events", partitions=2), topic("audit", partitions=1))
    _topic_status(bed, "events", ready="True")
    # Stand-in for the agents (no pods run here): each puts its finalizer on the Topics it holds data for.
    agent_1, agent_2 = "stratalog.io/agent-dir-1", "stratalog.io/agent-dir-2"
    bed.patch("topic", "events", {"metadata": {"finalizers": [agent_1, agent_2]}})
    bed.patch("topic", "audit", {"metadata": {"finalizers": [agent_1]}})

    bed.delete("topic", "events")
    wait_until("Topic events to be marked for deletion", lambda: bed.get("topic", "events"),
               lambda o: o is not None and "deletionTimestamp" in o["metadata"])

    # dir-1's agent is gone with its LogDir: its finalizers go, on every Topic; dir-2's stay.
    bed.delete("logdir", "dir-1")
    bed.gone("logdir", "dir-1")
    events = wait_until("dir-1's finalizer released", lambda: bed.get("topic", "events"),
                        lambda o: o is not None and o["metadata"].get("finalizers") == [agent_2])
    assert "deletionTimestamp" in events["metadata"]
    audit = bed.get("topic", "audit")
    assert audit is not None and not audit["metadata"].get("finalizers")

    bed.delete("logdir", "dir-2")
    bed.gone("topic", "events")
    bed.gone("logdir", "dir-2")


def test_a_deleted_topic_is_released_from_the_finalizer_of_a_logdir_that_no_longer_exists(
        bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-1"))
    _ready_logdir(bed, "dir-1")
    bed.apply(topic("late", partitions=1))
    _topic_status(bed, "late", ready="True")
    # Stand-in for an agent that added its finalizer after its LogDir's cleanup had run
    # (e.g. during its pod's termination grace period): no LogDir "dir-9" exists.
    bed.patch("topic", "late", {"metadata": {"finalizers": ["stratalog.io/agent-dir-1", "stratalog.io/agent-dir-9"]}})
    bed.delete("topic", "late")
    released = wait_until("the orphaned finalizer to be released", lambda: bed.get("topic", "late"),
                          lambda o: o is not None and o["metadata"].get("finalizers") == ["stratalog.io/agent-dir-1"])
    assert "deletionTimestamp" in released["metadata"]   # dir-1's agent still holds it: it exists
    bed.wait_event("late", "FinalizerReleased", "Topic", lambda m: "stratalog.io/agent-dir-9" in m)
    bed.delete("logdir", "dir-1")
    bed.gone("topic", "late")


# -- conflicts, pause, unmanaged ---------------------------------------------------------------

def test_two_topics_naming_one_kafka_topic_conflict_until_the_older_is_deleted(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-a"))
    _ready_logdir(bed, "dir-a")
    bed.apply(topic("orders", partitions=2))
    first = _topic_status(bed, "orders", ready="True")
    # Newer, and also later by name: the older one wins by either rule.
    bed.apply(topic("orders-v2", partitions=3, topicName="orders"))

    second = _topic_status(bed, "orders-v2", ready="False")
    assert brief(cond(second, "ResourceConflict")) == (
        "True", "TopicNameInUse",
        "Topic orders (older) already manages Kafka topic 'orders'; this Topic is ignored until that one is gone")
    assert brief(cond(second, "Ready")) == ("False", "ResourceConflict",
                                            "Kafka topic 'orders' is managed by Topic orders")
    assert second["status"]["topicName"] == "orders"
    assert assignment(second) == {}
    bed.wait_event("orders-v2", "ResourceConflict", "Topic", lambda m: m.startswith("Topic orders (older)"))
    winner = bed.get("topic", "orders")
    assert assignment(winner) == assignment(first) == {0: ["dir-a"], 1: ["dir-a"]}
    assert brief(cond(winner, "ResourceConflict"))[0] == "False"

    bed.delete("topic", "orders")
    taken = wait_until("orders-v2 to take over", lambda: bed.get("topic", "orders-v2"),
                       lambda o: cond(o, "Ready").get("status") == "True")
    assert brief(cond(taken, "ResourceConflict")) == ("False", "NoConflict", "")
    assert assignment(taken) == {0: ["dir-a"], 1: ["dir-a"], 2: ["dir-a"]}


def test_paused_objects_are_left_as_they_are_until_resumed(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-a", engine={"settings": {"log.cleaner.threads": 1}}), topic("t", partitions=2))
    _ready_logdir(bed, "dir-a")
    _topic_status(bed, "t", ready="True")
    cm_before = bed.get("configmap", "dir-a-engine")
    sts_before = bed.get("statefulset", "dir-a")
    assert cm_before is not None and sts_before is not None

    pause = "stratalog.io/pause-reconciliation=true"
    bed.annotate("logdir", "dir-a", pause)
    bed.annotate("topic", "t", pause)
    for kind, name in (("logdir", "dir-a"), ("topic", "t")):
        paused = wait_until(f"{kind} {name} paused", lambda: bed.get(kind, name),
                            lambda o: cond(o, "ReconciliationPaused").get("status") == "True")
        assert cond(paused, "ReconciliationPaused")["reason"] == "Paused"
    seen = operator.reconciles("LogDir", "paused"), operator.reconciles("Topic", "paused")

    bed.patch("logdir", "dir-a", {"spec": {"engine": {"settings": {"log.cleaner.threads": 4}}}})
    bed.patch("topic", "t", {"spec": {"partitions": 4}})
    bed.delete("service", "dir-a")
    wait_until("the controller to look at both paused objects",
               lambda: (operator.reconciles("LogDir", "paused"), operator.reconciles("Topic", "paused")),
               lambda now: now[0] > seen[0] and now[1] > seen[1])
    assert bed.get("configmap", "dir-a-engine") == cm_before
    assert bed.get("statefulset", "dir-a") == sts_before
    assert bed.get("service", "dir-a") is None
    ld, t = bed.get("logdir", "dir-a"), bed.get("topic", "t")
    assert ld is not None and t is not None
    assert ld["status"]["observedGeneration"] == 1 and ld["metadata"]["generation"] == 2
    assert t["status"]["observedGeneration"] == 1 and t["metadata"]["generation"] == 2
    assert assignment(t) == {0: ["dir-a"], 1: ["dir-a"]}

    resume = "stratalog.io/pause-reconciliation-"
    bed.annotate("logdir", "dir-a", resume)
    bed.annotate("topic", "t", resume)
    ld = _ready_logdir(bed, "dir-a", generation=2)
    assert brief(cond(ld, "ReconciliationPaused")) == ("False", "NotPaused", "")
    wait_until("the new settings in the ConfigMap", lambda: bed.get("configmap", "dir-a-engine"),
               lambda o: o is not None and o["data"] == {"engine.properties": "log.cleaner.threads=4\n"})
    wait_until("the Service back", lambda: bed.get("service", "dir-a"))
    t = _topic_status(bed, "t", generation=2, ready="True")
    assert assignment(t) == {p: ["dir-a"] for p in range(4)}


def test_unmanaged_objects_are_ignored(bed: Bed, operator: Operator) -> None:
    unmanaged = {"stratalog.io/managed": "false"}
    bed.apply(logdir("free", annotations=unmanaged), topic("free", partitions=1, annotations=unmanaged))
    wait_until("the controller to look at both", lambda: (operator.reconciles("LogDir", "unmanaged"),
                                                          operator.reconciles("Topic", "unmanaged")),
               lambda n: n[0] >= 1 and n[1] >= 1)
    free_dir, free_topic = bed.get("logdir", "free"), bed.get("topic", "free")
    assert free_dir is not None and free_topic is not None
    assert "finalizers" not in free_dir["metadata"] and "status" not in free_dir
    assert "status" not in free_topic
    assert bed.objects("pvc,statefulset,service,configmap", "stratalog.io/logdir=free") == []

    # A managed LogDir let go of: deleting it no longer deletes anything on its behalf.
    bed.apply(logdir("let-go", deleteClaim=True))
    _ready_logdir(bed, "let-go")
    wait_until("the StatefulSet", lambda: bed.get("statefulset", "let-go"))
    before = operator.reconciles("LogDir", "unmanaged")
    bed.annotate("logdir", "let-go", "stratalog.io/managed=false")
    wait_until("the controller to see it unmanaged", lambda: operator.reconciles("LogDir", "unmanaged"),
               lambda n: n > before)
    bed.delete("logdir", "let-go")
    bed.gone("logdir", "let-go")        # the controller's finalizer is released all the same
    kept = bed.objects("pvc,statefulset,service,configmap", "stratalog.io/logdir=let-go")
    assert sorted(f"{o['kind']}/{o['metadata']['name']}" for o in kept) == [
        "ConfigMap/let-go-engine", "PersistentVolumeClaim/let-go-data", "Service/let-go", "StatefulSet/let-go"]
    assert all("deletionTimestamp" not in o["metadata"] for o in kept)


# -- storage ------------------------------------------------------------------------------------

def _bind(bed: Bed, claim: str, capacity: str) -> None:
    """Stand-in for the PV controller (there is none here): report the claim Bound with ``capacity``."""
    bed.patch("pvc", claim, {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                                        "capacity": {"storage": capacity}}}, subresource="status")


def test_growing_a_volume_grows_its_claim(bed: Bed, operator: Operator) -> None:
    storage_class = f"{bed.ns}-expandable"
    bed.k.kubectl_run("apply", "-f", "-", input=json.dumps({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
        "provisioner": "stratalog.test/none", "allowVolumeExpansion": True}))
    bed.apply(logdir("grow", {"name": "data", "size": "1Gi", "storageClassName": storage_class}))
    _ready_logdir(bed, "grow")
    _bind(bed, "grow-data", "1Gi")
    wait_until("the capacity in status", lambda: bed.get("logdir", "grow"),
               lambda o: (o or {}).get("status", {}).get("volumes") ==
               [{"name": "data", "claimName": "grow-data", "capacity": "1Gi"}])

    bed.patch("logdir", "grow", [{"op": "replace", "path": "/spec/volumes/0/size", "value": "2Gi"}], type="json")
    ld = wait_until("StorageResizing=True", lambda: bed.get("logdir", "grow"),
                    lambda o: cond(o, "StorageResizing").get("status") == "True")
    assert brief(cond(ld, "StorageResizing")) == ("True", "Resizing", "grow-data: 1Gi of 2Gi")
    claim = bed.get("pvc", "grow-data")
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    bed.wait_event("grow", "Resizing", "LogDir", "requested 2Gi for PersistentVolumeClaim grow-data")

    _bind(bed, "grow-data", "2Gi")      # the stand-in PV controller finishes the expansion
    ld = wait_until("StorageResizing=False", lambda: bed.get("logdir", "grow"),
                    lambda o: cond(o, "StorageResizing").get("status") == "False")
    assert brief(cond(ld, "StorageResizing")) == ("False", "NotResizing", "every claim has its size")
    assert ld["status"]["volumes"] == [{"name": "data", "claimName": "grow-data", "capacity": "2Gi"}]


def test_a_refused_resize_is_reported(bed: Bed, operator: Operator) -> None:
    # An unbound claim: the API server refuses any change to its request.
    bed.apply(logdir("stuck", {"name": "data", "size": "1Gi"}))
    _ready_logdir(bed, "stuck")
    bed.patch("logdir", "stuck", [{"op": "replace", "path": "/spec/volumes/0/size", "value": "2Gi"}], type="json")
    ld = _ready_logdir(bed, "stuck", generation=2)
    status, reason, message = brief(cond(ld, "StorageResizing"))
    assert (status, reason) == ("False", "ResizeRefused")
    assert message.startswith('stuck-data: PersistentVolumeClaim "stuck-data" is invalid: spec: Forbidden'), message
    bed.wait_event("stuck", "ResizeRefused", "LogDir", lambda m: m.startswith("cannot grow stuck-data: "))
    event = bed.events("stuck", "ResizeRefused", "LogDir")[0]
    assert event["type"] == "Warning"
    claim = bed.get("pvc", "stuck-data")
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "1Gi"


# -- keeping children in line ------------------------------------------------------------------

def test_a_settings_change_updates_the_configmap_and_rolls_the_pod_template(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("cfg", engine={"settings": {"log.cleaner.threads": 1}}))
    _ready_logdir(bed, "cfg")
    sts = wait_until("the StatefulSet", lambda: bed.get("statefulset", "cfg"))
    old_hash = sts["spec"]["template"]["metadata"]["annotations"]["stratalog.io/config-hash"]
    assert old_hash == digest("log.cleaner.threads=1\n")

    bed.patch("logdir", "cfg", {"spec": {"engine": {"settings": {"log.cleaner.threads": 4,
                                                                 "log.retention.check.interval.ms": 1000}}}})
    text = "log.cleaner.threads=4\nlog.retention.check.interval.ms=1000\n"
    wait_until("the ConfigMap updated", lambda: bed.get("configmap", "cfg-engine"),
               lambda o: o is not None and o["data"] == {"engine.properties": text})
    sts = wait_until("the pod template's config hash updated", lambda: bed.get("statefulset", "cfg"),
                     lambda o: o is not None and o["spec"]["template"]["metadata"]["annotations"]
                     ["stratalog.io/config-hash"] == digest(text))
    assert digest(text) != old_hash
    assert sts["metadata"]["generation"] == 2          # one update of the template, not several
    bed.wait_event("cfg", "Updated", "LogDir", "updated ConfigMap cfg-engine to match the LogDir spec")
    bed.wait_event("cfg", "Updated", "LogDir", "updated StatefulSet cfg to match the LogDir spec")


def test_children_deleted_or_edited_by_hand_are_restored(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("heal"))
    _ready_logdir(bed, "heal")
    kinds = {"statefulset": "heal", "service": "heal", "configmap": "heal-engine"}
    first = {kind: wait_until(f"{kind} {name}", lambda: bed.get(kind, name)) for kind, name in kinds.items()}

    for kind, name in kinds.items():
        bed.delete(kind, name)
    for kind, name in kinds.items():
        again = wait_until(f"{kind} {name} recreated", lambda: bed.get(kind, name),
                           lambda o: o is not None and o["metadata"]["uid"] != first[kind]["metadata"]["uid"])
        assert again["metadata"]["labels"] == first[kind]["metadata"]["labels"]
        assert again["metadata"]["ownerReferences"] == first[kind]["metadata"]["ownerReferences"]

    bed.patch("configmap", "heal-engine", {"data": {"engine.properties": "log.cleaner.threads=9\n"}})
    bed.patch("statefulset", "heal", {"spec": {"replicas": 0}})
    wait_until("the ConfigMap restored", lambda: bed.get("configmap", "heal-engine"),
               lambda o: o is not None and o["data"] == {"engine.properties": ""})
    wait_until("the StatefulSet scaled back", lambda: bed.get("statefulset", "heal"),
               lambda o: o is not None and o["spec"]["replicas"] == 1)
    assert len(bed.objects("statefulset,service,configmap", "stratalog.io/logdir=heal")) == 3


# -- crash and quiet ---------------------------------------------------------------------------

@pytest.mark.crash
def test_a_controller_killed_mid_reconcile_converges_after_restart(bed: Bed, operator: Operator) -> None:
    n = 20
    dirs = [f"dir-{i:02d}" for i in range(n)]
    objects = [logdir(d, {"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}) for d in dirs]
    objects += [topic(f"topic-{i:02d}", partitions=3, replicas=2) for i in range(n)]
    bed.apply(*objects)
    wait_until("the first writes", operator.writes, lambda w: w >= 1, interval=0.02)
    operator.kill()
    operator.start()

    def converged() -> list[str]:
        problems = []
        for ld in bed.objects("logdir"):
            name = ld["metadata"]["name"]
            if ld["metadata"].get("finalizers") != [FINALIZER] or \
                    (ld.get("status") or {}).get("observedGeneration") != 1 or \
                    cond(ld, "Ready").get("reason") != "AgentNotReady" or \
                    len(ld["status"].get("volumes") or []) != 2:
                problems.append(f"LogDir {name}")
        for t in bed.objects("topic"):
            if cond(t, "Ready").get("status") != "True" or len(assignment(t)) != 3:
                problems.append(f"Topic {t['metadata']['name']}")
        owned = bed.objects("pvc,statefulset,service,configmap", MANAGED_BY)
        if len(owned) != 5 * n:
            problems.append(f"{len(owned)} owned objects")
        return problems
    wait_until("every object reconciled", converged, lambda p: p == [], timeout=180)

    # Exactly one of each, per LogDir: fixed names, so a retried create found what the dead one made.
    for d in dirs:
        owned = bed.objects("pvc,statefulset,service,configmap", f"stratalog.io/logdir={d}")
        assert sorted(f"{o['kind']}/{o['metadata']['name']}" for o in owned) == [
            f"ConfigMap/{d}-engine", f"PersistentVolumeClaim/{d}-a", f"PersistentVolumeClaim/{d}-b",
            f"Service/{d}", f"StatefulSet/{d}"]
        for o in owned:
            if o["kind"] != "PersistentVolumeClaim":
                assert [r["name"] for r in o["metadata"]["ownerReferences"]] == [d]
    for t in bed.objects("topic"):
        placed = assignment(t)
        assert sorted(placed) == [0, 1, 2]
        for dirs_of_partition in placed.values():
            assert len(set(dirs_of_partition)) == 2 and set(dirs_of_partition) <= set(dirs)
        assert brief(cond(t, "ResourceConflict"))[0] == "False"

    # And once converged, it stays quiet.
    writes = operator.settle()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert operator.writes() == writes
        time.sleep(0.5)


def test_nothing_is_written_when_nothing_changes(bed: Bed, operator: Operator) -> None:
    bed.apply(logdir("dir-a", {"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}),
              logdir("dir-b"), topic("t1", partitions=4, replicas=2), topic("t2", partitions=1))
    _ready_logdir(bed, "dir-a")
    _ready_logdir(bed, "dir-b")
    _topic_status(bed, "t1", ready="True")
    _topic_status(bed, "t2", ready="True")
    writes = operator.settle()
    assert writes > 0

    # Changes that change nothing the controller owns: each object is reconciled, nothing is written.
    seen = operator.reconciles("LogDir", "unchanged"), operator.reconciles("Topic", "unchanged")
    bed.kubectl("label", "logdir", "dir-a", "team=storage")         # LogDir labels: Topics are replanned too
    bed.annotate("topic", "t2", "note=hello")
    wait_until("the controller to reconcile the touched objects",
               lambda: (operator.reconciles("LogDir", "unchanged"), operator.reconciles("Topic", "unchanged")),
               lambda now: now[0] > seen[0] and now[1] >= seen[1] + 2)
    assert operator.writes() == writes

    # And over a few quiet seconds the counter does not move.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert operator.writes() == writes
        time.sleep(0.5)
