"""The chart, the image and the operator on a real one-node Kubernetes: real pods, real volumes.

One story, test by test, on one release: the chart installs into a namespace that enforces the
restricted Pod Security Standard; a LogDir with two volumes gets two bound claims and a Ready agent
pod; a Topic's records go through the LogDir's Service from a client pod and through
``kubectl port-forward``; the agent pod, deleted, comes back with every acknowledged record; a
settings change rolls it, and retention and compaction then run on its timers; a volume resize
the storage class refuses is reported on the LogDir; on a provisioner that applies no fsGroup the
agent says why it cannot start, and with the chart's volume-permissions step (baseline Pod
Security) it starts; ``helm upgrade`` rolls the operator; ``helm uninstall`` keeps the claims.
Then GitOps: the examples applied server-side show no drift once the operator has acted on them.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest

from . import resources
from .conftest import REPO, Node
from .resources import CHART, condition, install, logdir, topic

NS = "stratalog"
RELEASE = "stratalog"


def get(node: Node, *what: str) -> dict[str, Any]:
    return resources.get(node, NS, *what)


def produce_and_read(node: Node, name: str, values: list[str]) -> list[dict[str, Any]]:
    """One client pod: ``values`` produced to orders (as keys and values), then all of orders read back."""
    server = resources.agent_url("dir-a", NS)
    script = resources.produce_script(server, "orders", [{"key": v, "value": v} for v in values]) if values else ""
    return resources.records_of(resources.client(node, NS, name, script + resources.consume_script(server, "orders", 3)))


@pytest.fixture(scope="module")
def release(node: Node) -> Node:
    node.kubectl("create", "namespace", NS)
    node.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted",
                 "pod-security.kubernetes.io/enforce-version=latest")
    install(node, RELEASE, NS)
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
    # Secure by default: a pod that presents no token is refused (401), over TLS it trusts.
    refused = resources.client(node, NS, "client-anonymous", f"""
        if out=$(STRATALOG_TOKEN_FILE= stratalog consume --server {resources.agent_url("dir-a", NS)} \\
            --topic orders --partition 0 2>&1); then exit 1; fi
        echo "$out"
        """)
    assert "SASL_AUTHENTICATION_FAILED" in refused, refused
    read = produce_and_read(node, "client-a", [f"a{i}" for i in range(12)])
    assert sorted(r["value"] for r in read) == sorted(f"a{i}" for i in range(12))
    assert {r["partition"] for r in read} == {0, 1, 2}
    forward = node.background("kubectl", "-n", NS, "port-forward", "svc/dir-a", "18092:8092")
    token, ca = resources.client_token(node, NS), node.ca_files[NS]
    try:
        fetched = node.python(textwrap.dedent(f"""
            import json, ssl, time, urllib.request
            request = urllib.request.Request("https://127.0.0.1:18092/v1/topics/orders/partitions/0/records",
                                             headers={{"Authorization": "Bearer {token}"}})
            context = ssl.create_default_context(cafile="{ca}")
            for attempt in range(100):
                try:
                    reply = urllib.request.urlopen(request, timeout=10, context=context)
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
    resources.wait_for_endpoint(node, NS, "dir-a", "dir-a-0")
    after = produce_and_read(node, "client-c", [])
    assert {(r["partition"], r["offset"], r["value"]) for r in before} == \
        {(r["partition"], r["offset"], r["value"]) for r in after}


def test_a_settings_change_rolls_the_agent_pod_and_its_timers_then_run_retention_and_compaction(release):
    """The LogDir's engine settings are the pod's configuration: changing them rolls the pod. With the
    new intervals, the agent's own timers run retention and the cleaner inside the pod, and the
    Topic's status figures show it (segments gone, log start moved, last clean time)."""
    node = release
    uid = get(node, "pod", "dir-a-0")["metadata"]["uid"]
    node.kubectl("-n", NS, "patch", "logdir", "dir-a", "--type=merge", "-p", json.dumps(
        {"spec": {"engine": {"settings": {"log.retention.check.interval.ms": 1000,
                                          "log.cleaner.backoff.ms": 1000}}}}))
    node.wait_for("dir-a-0 rolled and Ready", lambda: (p := get(node, "pod", "dir-a-0")) and p["metadata"]["uid"] != uid
                  and condition(p, "Ready").get("status") == "True", timeout=240, namespace=NS)
    engine_config = get(node, "configmap", "dir-a-engine")["data"]["engine.properties"]
    assert "log.retention.check.interval.ms=1000" in engine_config, engine_config
    resources.wait_for_endpoint(node, NS, "dir-a", "dir-a-0")

    small = {"segment.bytes": 200, "file.delete.delay.ms": 1000}
    node.kubectl("-n", NS, "apply", "-f", "-", input=topic("expiring", "dir-a", 1, config={
        **small, "cleanup.policy": ["delete"], "retention.ms": 2000}))
    node.kubectl("-n", NS, "apply", "-f", "-", input=topic("profiles", "dir-a", 1, config={
        **small, "cleanup.policy": ["compact"], "min.cleanable.dirty.ratio": 0.01, "min.compaction.lag.ms": 0}))
    for name in ("expiring", "profiles"):
        node.wait_for(f"Topic {name} placed", lambda: condition(get(node, "topic", name), "PartitionsPlaced").get(
            "status") == "True", timeout=120, namespace=NS)
    values = [{"key": f"k{i % 4}", "value": f"v{i}"} for i in range(24)]
    resources.produce(node, NS, "client-maintenance", resources.agent_url("dir-a", NS), "expiring", values)
    resources.produce(node, NS, "client-compacted", resources.agent_url("dir-a", NS), "profiles", values)

    def figures(name: str) -> dict[str, Any]:
        status = get(node, "topic", name).get("status") or {}
        return ((status.get("logDirs") or {}).get("dir-a") or {}).get("partitions", {}).get("0") or {}

    expired = node.wait_for("retention to delete expiring's segments", lambda: (f := figures("expiring")).get(
        "lastRetentionTime") and f["logStartOffset"] > 0 and f, timeout=180, namespace=NS)
    assert expired["logEndOffset"] == 24 and expired["logStartOffset"] <= 24, expired
    cleaned = node.wait_for("the cleaner to compact profiles", lambda: (f := figures("profiles")).get(
        "lastCleanTime") and f, timeout=180, namespace=NS)
    assert cleaned["logEndOffset"] == 24, cleaned
    kept = resources.consume(node, NS, "client-compacted-read", resources.agent_url("dir-a", NS), "profiles", 1)
    latest = {r["key"]: r["value"] for r in kept}
    assert latest == {f"k{k}": f"v{20 + k}" for k in range(4)}, kept
    assert len(kept) < len(values), f"nothing was compacted away: {len(kept)} records read"


def test_a_volume_resize_the_storage_class_refuses_is_reported_on_the_logdir(release):
    """Neither provisioner here can grow a volume (local-path and the hostPath provisioner allow no
    expansion), so the API server refuses the claim's resize; the LogDir says so in its
    StorageResizing condition and a Warning event, and its agent keeps serving."""
    node = release
    node.kubectl("-n", NS, "patch", "logdir", "dir-a", "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/volumes/1/size", "value": "2Gi"}]))
    refused = node.wait_for("StorageResizing=False ResizeRefused", lambda: (c := condition(
        get(node, "logdir", "dir-a"), "StorageResizing")).get("reason") == "ResizeRefused" and c,
        timeout=120, namespace=NS)
    assert refused["status"] == "False" and "dir-a-data-1" in refused["message"], refused
    events = get(node, "events", "--field-selector", "involvedObject.name=dir-a,reason=ResizeRefused")["items"]
    assert events and all(e["type"] == "Warning" for e in events), events
    claim = get(node, "pvc", "dir-a-data-1")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert condition(get(node, "logdir", "dir-a"), "Ready").get("status") == "True"


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
    install(node, "hostpath", ns, "agent.volumePermissions.enabled=true")
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
    node.run("helm", "upgrade", RELEASE, CHART, "-n", NS, "--reuse-values",
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
    install(node, "gitops", ns)
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
