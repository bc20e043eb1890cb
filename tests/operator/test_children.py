"""children.desired_children: what a LogDir owns, field by field, from its spec alone."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from stratalog.common.errors import InvalidConfigError
from stratalog_operator.children import AgentOptions, desired_children
from stratalog_operator.names import agent_finalizer, statefulset_name
from stratalog.common.properties import parse_properties_text
from stratalog_operator.properties import digest, properties_text

UID = "0b5c6a43-5f1f-4b8e-a1a4-7c1d1d1d1d1d"
OPTIONS = AgentOptions(image="registry.test/stratalog:dev", service_account="agents", authentication="none")

SELECTOR = {"app.kubernetes.io/name": "stratalog", "app.kubernetes.io/instance": "dir-a",
            "app.kubernetes.io/component": "agent"}
LABELS = {**SELECTOR, "app.kubernetes.io/managed-by": "stratalog-operator", "stratalog.io/logdir": "dir-a"}
OWNER = {"apiVersion": "stratalog.io/v1alpha1", "kind": "LogDir", "name": "dir-a", "uid": UID,
         "controller": True, "blockOwnerDeletion": True}


def logdir(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "volumes": [{"name": "data-0", "size": "10Gi", "accessModes": ["ReadWriteMany"], "storageClassName": "fast"},
                    {"name": "data-1", "size": "5Gi"}],
        "engine": {"settings": {"num.recovery.threads.per.data.dir": 2, "log.cleaner.threads": 3}},
    }
    base.update(spec)
    return {"apiVersion": "stratalog.io/v1alpha1", "kind": "LogDir",
            "metadata": {"name": "dir-a", "namespace": "ns1", "uid": UID}, "spec": base}


PROPERTIES = "log.cleaner.threads=3\nnum.recovery.threads.per.data.dir=2\n"


def test_the_configmap_text_reaches_the_agent_unchanged_whatever_its_characters() -> None:
    # The agent reads --config-file with Java's rules; the operator must escape as Java does.
    props = {"b.path": "C:\\new", "a.pattern": "k=v: #1 !", "c.spaces": "  padded  "}
    text = properties_text(props)
    assert text.splitlines()[0].startswith("a.pattern=")
    assert parse_properties_text(text) == props


def test_one_claim_per_volume() -> None:
    first, second = desired_children(logdir(), OPTIONS).claims
    assert first == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "dir-a-data-0", "labels": {**LABELS, "stratalog.io/logdir-volume": "data-0"},
                     "ownerReferences": []},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}},
                 "storageClassName": "fast"},
    }
    assert second["metadata"]["name"] == "dir-a-data-1"
    assert second["spec"] == {"accessModes": ["ReadWriteOnce"],           # the default access mode
                              "resources": {"requests": {"storage": "5Gi"}}}    # no class: the cluster's default


def test_claims_are_owned_by_the_logdir_only_with_delete_claim() -> None:
    kept = desired_children(logdir(deleteClaim=False), OPTIONS).claims
    owned = desired_children(logdir(deleteClaim=True), OPTIONS).claims
    assert [c["metadata"]["ownerReferences"] for c in kept] == [[], []]
    assert [c["metadata"]["ownerReferences"] for c in owned] == [[OWNER], [OWNER]]


def test_configmap_holds_sorted_canonical_engine_properties() -> None:
    cm = desired_children(logdir(), OPTIONS).configmap
    assert cm == {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "dir-a-engine", "labels": LABELS, "ownerReferences": [OWNER]},
                  "data": {"engine.properties": PROPERTIES}}
    empty = desired_children(logdir(engine={}), OPTIONS).configmap
    assert empty["data"] == {"engine.properties": ""}


def test_service_exposes_the_agent_http_port_and_its_kafka_listener() -> None:
    svc = desired_children(logdir(), OPTIONS).service
    assert svc == {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "dir-a", "labels": LABELS, "ownerReferences": [OWNER]},
                   "spec": {"type": "ClusterIP", "selector": SELECTOR,
                            "ports": [{"name": "http", "port": 8092, "targetPort": "http", "protocol": "TCP"},
                                     {"name": "kafka", "port": 9092, "targetPort": "kafka", "protocol": "TCP"}]}}


def test_without_a_kafka_port_the_agent_runs_no_kafka_listener() -> None:
    children = desired_children(logdir(), dataclasses.replace(OPTIONS, kafka_port=0))
    assert [p["name"] for p in children.service["spec"]["ports"]] == ["http"]
    [container] = children.statefulset["spec"]["template"]["spec"]["containers"]
    assert [p["name"] for p in container["ports"]] == ["http"]
    assert not any(arg.startswith("--kafka") for arg in container["command"])


def test_statefulset_runs_one_agent_on_the_volumes() -> None:
    sts = desired_children(logdir(), OPTIONS).statefulset
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    spec_hash = digest(json.dumps(sts["spec"], sort_keys=True))
    assert sts["metadata"] == {"name": "dir-a", "labels": LABELS, "ownerReferences": [OWNER],
                               "annotations": {"stratalog.io/spec-hash": spec_hash}}
    spec = sts["spec"]
    assert spec["replicas"] == 1
    assert spec["serviceName"] == "dir-a"
    assert spec["selector"] == {"matchLabels": SELECTOR}
    template = spec["template"]
    assert template["metadata"] == {"labels": LABELS,
                                    "annotations": {"stratalog.io/config-hash": digest(PROPERTIES)}}
    pod = template["spec"]
    assert pod["serviceAccountName"] == "agents"
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                      "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["volumes"] == [
        {"name": "data-data-0", "persistentVolumeClaim": {"claimName": "dir-a-data-0"}},
        {"name": "data-data-1", "persistentVolumeClaim": {"claimName": "dir-a-data-1"}},
        {"name": "engine-config", "configMap": {"name": "dir-a-engine"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    [container] = pod["containers"]
    assert container["name"] == "agent"
    assert container["image"] == "registry.test/stratalog:dev"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == [
        "stratalog", "agent", "--logdir", "dir-a", "--namespace", "ns1", "--listen", "0.0.0.0:8092",
        "--config-file", "/etc/stratalog/engine.properties",
        "--advertise", "http://dir-a.ns1.svc:8092",   # followers find it by its Service
        "--kafka-listen", "0.0.0.0:9092", "--kafka-advertise", "dir-a.ns1.svc:9092",   # and Kafka clients too
        "--data-dir", "/var/lib/stratalog/data-0", "--data-dir", "/var/lib/stratalog/data-1"]
    assert container["env"] == [{"name": "STRATALOG_POD_NAME",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert container["ports"] == [{"name": "http", "containerPort": 8092, "protocol": "TCP"},
                                  {"name": "kafka", "containerPort": 9092, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTP"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTP"}
    assert container["securityContext"] == {
        "runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["volumeMounts"] == [
        {"name": "data-data-0", "mountPath": "/var/lib/stratalog/data-0"},
        {"name": "data-data-1", "mountPath": "/var/lib/stratalog/data-1"},
        {"name": "engine-config", "mountPath": "/etc/stratalog", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    assert "resources" not in container


def test_by_default_the_agent_checks_tokens_and_rbac_and_presents_a_projected_token_of_its_own() -> None:
    pod = desired_children(logdir(), AgentOptions()).statefulset["spec"]["template"]["spec"]
    [container] = pod["containers"]
    command = container["command"]
    assert command[command.index("--authentication") + 1] == "kubernetes"
    assert command[command.index("--token-audience") + 1] == "stratalog"
    assert command[command.index("--replication-token-file") + 1] == "/var/run/stratalog/token/token"
    assert {"name": "replication-token", "projected": {"sources": [{"serviceAccountToken": {
        "audience": "stratalog", "expirationSeconds": 3600, "path": "token"}}]}} in pod["volumes"]
    assert {"name": "replication-token", "mountPath": "/var/run/stratalog/token", "readOnly": True} \
        in container["volumeMounts"]
    assert "--tls-cert" not in command


def test_the_agents_audience_is_the_one_the_controller_is_given() -> None:
    pod = desired_children(logdir(), AgentOptions(token_audience="release-a")).statefulset["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    assert command[command.index("--token-audience") + 1] == "release-a"
    [token] = [v for v in pod["volumes"] if v["name"] == "replication-token"]
    assert token["projected"]["sources"][0]["serviceAccountToken"]["audience"] == "release-a"


def test_a_tls_secret_makes_the_agent_serve_https_and_trust_its_ca_when_it_fetches() -> None:
    options = AgentOptions(tls_secret="agents-tls")
    pod = desired_children(logdir(), options).statefulset["spec"]["template"]["spec"]
    [container] = pod["containers"]
    command = container["command"]
    assert command[command.index("--advertise") + 1] == "https://dir-a.ns1.svc:8092"
    assert [command[command.index(flag) + 1] for flag in ("--tls-cert", "--tls-key", "--replication-ca-file")] == \
        ["/var/run/stratalog/tls/tls.crt", "/var/run/stratalog/tls/tls.key", "/var/run/stratalog/tls/ca.crt"]
    assert {"name": "tls", "secret": {"secretName": "agents-tls"}} in pod["volumes"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_engine_image_and_resources_come_from_the_spec_when_given() -> None:
    resources = {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}
    sts = desired_children(logdir(engine={"image": "mine:1", "resources": resources}), OPTIONS).statefulset
    [container] = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "mine:1"
    assert container["resources"] == resources
    default = desired_children(logdir(), AgentOptions()).statefulset["spec"]["template"]["spec"]
    assert default["containers"][0]["image"] == AgentOptions().image
    assert default["serviceAccountName"] == "stratalog-agent"


def test_a_settings_change_changes_configmap_and_config_hash_only() -> None:
    before = desired_children(logdir(), OPTIONS)
    changed = logdir(engine={"settings": {"num.recovery.threads.per.data.dir": 4, "log.cleaner.threads": 3}})
    after = desired_children(changed, OPTIONS)
    assert after.configmap["data"]["engine.properties"] == \
        "log.cleaner.threads=3\nnum.recovery.threads.per.data.dir=4\n"
    hash_before = before.statefulset["spec"]["template"]["metadata"]["annotations"]["stratalog.io/config-hash"]
    hash_after = after.statefulset["spec"]["template"]["metadata"]["annotations"]["stratalog.io/config-hash"]
    assert hash_after != hash_before
    assert hash_after == digest(after.configmap["data"]["engine.properties"])
    strip = copy.deepcopy(after.statefulset)
    strip["spec"]["template"]["metadata"]["annotations"]["stratalog.io/config-hash"] = hash_before
    assert strip["spec"] == before.statefulset["spec"]
    # The spec hash follows (it covers the whole desired spec, so a removed field is noticed too).
    assert after.statefulset["metadata"]["annotations"] != before.statefulset["metadata"]["annotations"]
    assert after.claims == before.claims and after.service == before.service


def test_settings_order_does_not_change_the_hash() -> None:
    one = {"log.cleaner.threads": 3, "num.recovery.threads.per.data.dir": 2}
    other = dict(reversed(list(one.items())))
    a = desired_children(logdir(engine={"settings": one}), OPTIONS)
    b = desired_children(logdir(engine={"settings": other}), OPTIONS)
    assert a.statefulset == b.statefulset and a.configmap == b.configmap


def test_invalid_settings_raise_naming_the_key() -> None:
    with pytest.raises(InvalidConfigError, match=r"spec\.engine\.settings\.log\.cleaner\.threads: "):
        desired_children(logdir(engine={"settings": {"log.cleaner.threads": -1}}), OPTIONS)
    with pytest.raises(InvalidConfigError, match=r"spec\.engine\.settings\.no\.such\.key: unknown config key"):
        desired_children(logdir(engine={"settings": {"no.such.key": 1}}), OPTIONS)


def test_long_names_are_shortened_stably_and_stay_distinct() -> None:
    long_a, long_b = "x" * 60 + "-a", "x" * 60 + "-b"
    assert len(statefulset_name(long_a)) <= 52
    assert statefulset_name(long_a) == statefulset_name(long_a)
    assert statefulset_name(long_a) != statefulset_name(long_b)
    body = logdir()
    body["metadata"]["name"] = long_a
    sts = desired_children(body, OPTIONS).statefulset
    assert sts["metadata"]["name"] == statefulset_name(long_a)


def test_agent_finalizer_is_a_qualified_name() -> None:
    assert agent_finalizer("dir-a") == "stratalog.io/agent-dir-a"
    long = agent_finalizer("d" * 253)
    prefix, name = long.split("/")
    assert prefix == "stratalog.io" and len(name) <= 63
    assert long != agent_finalizer("d" * 252)


def test_dropping_a_field_from_the_spec_changes_the_statefulsets_spec_hash() -> None:
    # is_subset cannot see a field that is no longer desired; the hash makes the controller patch.
    with_limits = desired_children(logdir(engine={"resources": {"limits": {"memory": "1Gi"}}}), OPTIONS)
    without = desired_children(logdir(), OPTIONS)
    assert with_limits.statefulset["metadata"]["annotations"] != without.statefulset["metadata"]["annotations"]


def test_the_volume_permissions_step_gives_each_volume_to_the_agent_only_when_asked() -> None:
    plain = desired_children(logdir(), OPTIONS).statefulset["spec"]["template"]["spec"]
    assert "initContainers" not in plain
    options = AgentOptions(image="registry.test/stratalog:dev", service_account="agents", volume_permissions=True)
    pod = desired_children(logdir(), options).statefulset["spec"]["template"]["spec"]
    [step] = pod["initContainers"]
    paths = ["/var/lib/stratalog/data-0", "/var/lib/stratalog/data-1"]
    assert step["command"][-2:] == paths and "chown 10001:10001" in step["command"][2]
    assert [m["mountPath"] for m in step["volumeMounts"]] == paths
    security = step["securityContext"]
    # Root, but only to change owners: every other capability dropped, nothing gained after exec.
    assert security["runAsUser"] == 0 and security["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert pod["containers"][0]["securityContext"] == plain["containers"][0]["securityContext"]
