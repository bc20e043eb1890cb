"""The chart, the image and the operator on a real one-node Kubernetes: real pods, real volumes.

One story, test by test, on one release: the chart installs into a namespace that enforces the
restricted Pod Security Standard; a LogDir with two volumes gets two bound claims and a Ready agent
pod; a Topic's records go through the LogDir's Service from a client pod and through
``kubectl port-forward``; the agent pod, deleted, comes back with every acknowledged record; on a
provisioner that applies no fsGroup the agent says why it cannot start, and with the chart's
volume-permissions step (baseline Pod Security) it starts; ``helm upgrade`` rolls the
operator; ``helm uninstall`` keeps the claims. Then GitOps: the examples applied server-side show no
drift once the operator has acted on them.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest

from .conftest import REPO, Node

NS = "stratalog"
RELEASE = "stratalog"
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def logdir(name: str, storage_class: str, volumes: int = 2) -> str:
    return json.dumps({
        "apiVersion": "stratalog.io/v1alpha1", "kind": "LogDir",
        "metadata": {"name": name, "labels": {"stratalog.io/pool": name}},
        "spec": {"volumes": [{"name": f"data-{i}", "size": "1Gi", "storageClassName": storage_class}
                             for i in range(volumes)],
                 "engine": {"resources": {"requests": {"cpu": "50m", "memory": "128Mi"}}}}})


def topic(name: str, pool: str, partitions: int) -> str:
    return json.dumps({"apiVersion": "stratalog.io/v1alpha1", "kind": "Topic", "metadata": {"name": name},
                       "spec": {"partitions": partitions, "replicas": 1,
                                "logDirSelector": {"matchLabels": {"stratalog.io/pool": pool}}}})


def condition(resource: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (resource.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def get(node: Node, *what: str) -> dict[str, Any]:
    out = node.kubectl("-n", NS, "get", *what, "-o", "json", check=False)
    return json.loads(out) if out.strip() else {}


def client(node: Node, name: str, script: str) -> str:
    """Run ``script`` in a pod of the project's image (restricted like any pod here); its output."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "client", "image": node.image, "imagePullPolicy": "Never",
                                    "command": ["sh", "-ec", textwrap.dedent(script)],
                                    "securityContext": RESTRICTED_CONTAINER}]}}
    node.kubectl("-n", NS, "apply", "-f", "-", input=json.dumps(pod))
    node.wait_for(f"client pod {name} to finish", lambda: get(node, "pod", name).get("status", {}).get(
        "phase") in ("Succeeded", "Failed"), timeout=120, namespace=NS)
    logs = node.kubectl("-n", NS, "logs", name)
    phase = get(node, "pod", name)["status"]["phase"]
    node.kubectl("-n", NS, "delete", "pod", name, "--wait=false")
    assert phase == "Succeeded", f"client pod {name} failed:\n{logs}"
    return logs


def produce_and_read(node: Node, name: str, values: list[str]) -> list[dict[str, Any]]:
    lines = "\n".join(json.dumps({"key": v, "value": v}) for v in values)
    out = client(node, name, f"""
        printf '%s\\n' '{lines}' | stratalog produce --server http://dir-a:8092 --topic orders
        for p in 0 1 2; do stratalog consume --server http://dir-a:8092 --topic orders --partition $p; done
        """)
    return [json.loads(line) for line in out.splitlines() if '"offset"' in line]


@pytest.fixture(scope="module")
def release(node: Node) -> Node:
    node.kubectl("create", "namespace", NS)
    node.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted",
                 "pod-security.kubernetes.io/enforce-version=latest")
    repository, tag = node.image.rsplit(":", 1)
    node.run("helm", "install", RELEASE, str(REPO / "charts" / "stratalog"), "-n", NS,
             "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
             "--set", "image.pullPolicy=Never", "--wait", "--timeout", "180s", timeout=240)
    return node


def test_the_chart_runs_a_ready_non_root_read_only_operator_under_restricted_pod_security(release):
    node = release
    [pod] = get(node, "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    assert condition(pod, "Ready").get("status") == "True", pod["status"]
    [container] = pod["spec"]["containers"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The image's user, not root, is what runs: the kubelet enforced runAsNonRoot on a numeric USER.
    uid = node.kubectl("-n", NS, "exec", pod["metadata"]["name"], "--", "id", "-u").strip()
    assert uid == "10001"
    # And the namespace really enforces restricted: a root pod is refused by the API server.
    refused = node.kubectl("-n", NS, "run", "root-pod", f"--image={node.image}", "--image-pull-policy=Never",
                           "--overrides", json.dumps({"spec": {"securityContext": {"runAsUser": 0}}}),
                           "--restart=Never", "--", "true", check=False)
    assert "root-pod" not in node.kubectl("-n", NS, "get", "pods", "-o", "name"), refused


def test_a_logdir_with_two_volumes_binds_two_claims_and_its_agent_goes_ready(release):
    node = release
    node.kubectl("-n", NS, "apply", "-f", "-", input=logdir("dir-a", "local-path"))
    node.kubectl("-n", NS, "apply", "-f", "-", input=topic("orders", "dir-a", 3))
    ready = node.wait_for("LogDir dir-a Ready=True", lambda: condition(get(node, "logdir", "dir-a"), "Ready").get(
        "status") == "True", timeout=240, namespace=NS)
    assert ready
    claims = {c["metadata"]["name"]: c["status"]["phase"] for c in get(node, "pvc")["items"]}
    assert claims == {"dir-a-data-0": "Bound", "dir-a-data-1": "Bound"}
    pod = get(node, "pod", "dir-a-0")
    assert condition(pod, "Ready").get("status") == "True"
    assert all(c["securityContext"]["readOnlyRootFilesystem"] for c in pod["spec"]["containers"])
    node.wait_for("Topic orders placed", lambda: condition(get(node, "topic", "orders"), "PartitionsPlaced").get(
        "status") == "True", timeout=120, namespace=NS)


def test_records_go_through_the_logdirs_service_from_a_pod_and_through_port_forward(release):
    node = release
    read = produce_and_read(node, "client-a", [f"a{i}" for i in range(12)])
    assert sorted(r["value"] for r in read) == sorted(f"a{i}" for i in range(12))
    assert {r["partition"] for r in read} == {0, 1, 2}
    forward = node.background("kubectl", "-n", NS, "port-forward", "svc/dir-a", "18092:8092")
    try:
        fetched = node.python(textwrap.dedent("""
            import json, time, urllib.request
            for attempt in range(100):
                try:
                    reply = urllib.request.urlopen("http://127.0.0.1:18092/v1/topics/orders/partitions/0/records",
                                                   timeout=10)
                    break
                except OSError:
                    time.sleep(0.2)
            print(json.dumps([r["value"] for r in json.load(reply)["records"]]))
            """))
    finally:
        forward.terminate()
        forward.wait(timeout=30)
    assert json.loads(fetched) == [r["value"] for r in read if r["partition"] == 0]


def test_a_deleted_agent_pod_comes_back_from_its_statefulset_with_every_acknowledged_record(release):
    node = release
    before = produce_and_read(node, "client-b", [f"b{i}" for i in range(6)])
    uid = get(node, "pod", "dir-a-0")["metadata"]["uid"]
    node.kubectl("-n", NS, "delete", "pod", "dir-a-0", timeout=180)
    node.wait_for("a new dir-a-0 Ready", lambda: (p := get(node, "pod", "dir-a-0")) and p["metadata"]["uid"] != uid
                  and condition(p, "Ready").get("status") == "True", timeout=240, namespace=NS)
    # Deleted gracefully (SIGTERM), the engine closed its directories cleanly: no recovery on the way back.
    logs = node.kubectl("-n", NS, "logs", "dir-a-0")
    assert len(re.findall(r"clean shutdown \(recovery skipped\)", logs)) == 2, logs[-3000:]
    after = produce_and_read(node, "client-c", [])
    assert {(r["partition"], r["offset"], r["value"]) for r in before} == \
        {(r["partition"], r["offset"], r["value"]) for r in after}


def test_on_a_provisioner_that_applies_no_fsgroup_the_agent_says_who_owns_its_directory(release):
    """Kubernetes' hostPath provisioner makes root-owned 0750 directories and applies no fsGroup; the
    restricted standard forbids a root init step that could fix it. The claim binds, and the agent
    refuses to start with a message that names the owner, the mode and its own user."""
    node = release
    node.kubectl("-n", NS, "apply", "-f", "-", input=logdir("dir-hp", "hostpath", volumes=1))

    def refused() -> str | None:
        logs = node.kubectl("-n", NS, "logs", "dir-hp-0", check=False)
        return logs if "cannot take its lock" in logs else None

    logs = node.wait_for("the dir-hp agent to refuse its directory", refused, timeout=240, namespace=NS)
    assert re.search(r"data directory /var/lib/stratalog/data-0: cannot take its lock: EACCES: Permission denied "
                     r".*it is owned by uid 0 gid 0 with mode drwxr-x---, and the engine runs as uid 10001", logs), logs
    assert get(node, "pvc", "dir-hp-data-0")["status"]["phase"] == "Bound"
    assert condition(get(node, "logdir", "dir-hp"), "Ready").get("status") != "True"
    node.kubectl("-n", NS, "delete", "logdir", "dir-hp", timeout=180)


def test_with_the_volume_permissions_step_a_hostpath_logdir_goes_ready_under_baseline_pod_security(node):
    """The chart's agent.volumePermissions: a root init step with CHOWN and FOWNER only, which the
    baseline standard allows, gives the hostPath volumes to the agent; it starts and goes Ready."""
    ns = "hostpath"
    node.kubectl("create", "namespace", ns)
    node.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
    repository, tag = node.image.rsplit(":", 1)
    node.run("helm", "install", "hostpath", str(REPO / "charts" / "stratalog"), "-n", ns,
             "--set", f"image.repository={repository}", "--set", f"image.tag={tag}", "--set", "image.pullPolicy=Never",
             "--set", "agent.volumePermissions.enabled=true", "--wait", "--timeout", "180s", timeout=240)
    node.kubectl("-n", ns, "apply", "-f", "-", input=logdir("dir-hp", "hostpath"))
    node.wait_for("LogDir dir-hp Ready=True on hostPath volumes", lambda: condition(json.loads(node.kubectl(
        "-n", ns, "get", "logdir", "dir-hp", "-o", "json")), "Ready").get("status") == "True", timeout=240,
        namespace=ns)
    pod = json.loads(node.kubectl("-n", ns, "get", "pod", "dir-hp-0", "-o", "json"))
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["volume-permissions"]
    claims = json.loads(node.kubectl("-n", ns, "get", "pvc", "-o", "json"))["items"]
    assert {c["spec"]["storageClassName"] for c in claims} == {"hostpath"} and len(claims) == 2
    node.run("helm", "uninstall", "hostpath", "-n", ns, "--wait", timeout=240)


def test_helm_upgrade_with_changed_values_rolls_the_operator_and_it_comes_back_ready(release):
    node = release
    [before] = get(node, "pods", "-l", "app.kubernetes.io/component=operator")["items"]
    node.run("helm", "upgrade", RELEASE, str(REPO / "charts" / "stratalog"), "-n", NS, "--reuse-values",
             "--set", "operator.logLevel=DEBUG", "--wait", "--timeout", "180s", timeout=240)

    def rolled() -> dict[str, Any] | None:
        pods = get(node, "pods", "-l", "app.kubernetes.io/component=operator")["items"]
        return next((p for p in pods if p["metadata"]["uid"] != before["metadata"]["uid"]
                     and condition(p, "Ready").get("status") == "True"), None)

    after = node.wait_for("the upgraded operator pod Ready", rolled, timeout=180, namespace=NS)
    env = {e["name"]: e.get("value") for e in after["spec"]["containers"][0]["env"]}
    assert env["STRATALOG_LOG_LEVEL"] == "DEBUG"
    assert condition(get(node, "logdir", "dir-a"), "Ready").get("status") == "True"


def test_helm_uninstall_leaves_the_claims_and_the_data_on_them(release):
    node = release
    node.run("helm", "uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=240)
    node.wait_for("the operator pod gone", lambda: not get(node, "pods", "-l",
                                                           "app.kubernetes.io/component=operator").get("items"),
                  timeout=120, namespace=NS)
    claims = {c["metadata"]["name"] for c in get(node, "pvc")["items"]}
    assert {"dir-a-data-0", "dir-a-data-1"} <= claims
    # The LogDirs stay too (helm leaves CRDs and their objects): users delete them when they mean it.
    assert get(node, "logdir", "dir-a").get("metadata", {}).get("name") == "dir-a"


def test_the_examples_applied_server_side_show_no_drift_once_the_operator_has_acted(node):
    """GitOps: what Argo CD or Flux apply (server-side, their own field manager) stays theirs. After the
    operator has created children and written status, a server-side diff of the same files is empty
    and no other manager owns a field of spec, labels or annotations."""
    ns, manager = "gitops", "gitops-tool"
    node.kubectl("create", "namespace", ns)
    repository, tag = node.image.rsplit(":", 1)
    node.run("helm", "install", "gitops", str(REPO / "charts" / "stratalog"), "-n", ns,
             "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
             "--set", "image.pullPolicy=Never", "--wait", "--timeout", "180s", timeout=240)
    files = sorted((REPO / "examples").glob("*.yaml"))
    for path in files:
        node.kubectl("-n", ns, "apply", "--server-side", f"--field-manager={manager}", "-f", str(path))

    def acted() -> bool:
        logdir = json.loads(node.kubectl("-n", ns, "get", "logdir", "dir-a", "-o", "json"))
        topics = json.loads(node.kubectl("-n", ns, "get", "topics", "-o", "json"))["items"]
        return condition(logdir, "Ready").get("status") == "True" and len(topics) == 2 and all(
            condition(t, "PartitionsPlaced").get("status") == "True" for t in topics)

    node.wait_for("the examples' LogDir Ready and Topics placed", acted, timeout=300, namespace=ns)
    for path in files:
        diff = node.run("kubectl", "-n", ns, "diff", "--server-side", f"--field-manager={manager}", "-f", str(path),
                        check=False)
        assert diff.returncode == 0 and not diff.stdout, f"{path.name} drifted:\n{diff.stdout}{diff.stderr}"
    for kind in ("logdirs", "topics"):
        for item in json.loads(node.kubectl("-n", ns, "get", kind, "-o", "json"))["items"]:
            for entry in item["metadata"].get("managedFields", []):
                if entry["manager"] == manager or entry.get("subresource") == "status":
                    continue
                fields = entry.get("fieldsV1", {})
                owned = set(fields) | set(fields.get("f:metadata", {}))
                assert not owned & {"f:spec", "f:labels", "f:annotations"}, (
                    f"{kind}/{item['metadata']['name']}: {entry['manager']} owns {sorted(owned)}")
