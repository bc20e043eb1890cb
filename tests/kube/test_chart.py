"""The Helm chart: lints clean and its rendered manifests are accepted by a real kube-apiserver,
including Pod Security "restricted" enforcement on the operator's namespace."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from .conftest import REPO, KubeCluster

CHART = REPO / "charts" / "stratalog"


def _helm(k: KubeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(k.helm), *args], capture_output=True, text=True, env=k.env, timeout=120,
                          check=False)
    if proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed (exit {proc.returncode})\n{proc.stdout}\n{proc.stderr}",
                    pytrace=False)
    return proc


@pytest.mark.parametrize("sets", [["--set", "tls.secretName=agents-tls"],
                                  ["--set", "metrics.serviceMonitor.enabled=true,operator.peering=true,"
                                            "tls.certManager.issuerRef.name=ca"]],
                         ids=["defaults", "all-options"])
def test_helm_lint_clean(kube_cluster: KubeCluster, sets: list[str]) -> None:
    out = _helm(kube_cluster, "lint", "--strict", str(CHART), *sets).stdout
    assert "0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_values_schema_refuses_unknown_value(kube_cluster: KubeCluster) -> None:
    proc = subprocess.run([str(kube_cluster.helm), "template", "x", str(CHART), "--set", "image.pullPolicy=Sometimes"],
                          capture_output=True, text=True, env=kube_cluster.env, timeout=120, check=False)
    assert proc.returncode != 0 and "pullPolicy" in proc.stderr, proc.stderr


def test_chart_crds_match_generated() -> None:
    for name in ("logdirs.stratalog.io.yaml", "topics.stratalog.io.yaml"):
        assert (CHART / "crds" / name).read_text() == (REPO / "crds" / name).read_text()


def test_template_accepted_by_apiserver(kube_cluster: KubeCluster) -> None:
    ns = "stratalog-system"
    kube_cluster.kubectl_run("create", "namespace", ns)
    kube_cluster.kubectl_run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
                             "pod-security.kubernetes.io/warn=restricted")
    # --include-crds: the CRDs go through the same server-side validation.
    rendered = _helm(kube_cluster, "template", "strata", str(CHART), "--namespace", ns, "--include-crds",
                     "--set", "tls.secretName=agents-tls",
                     "--set", "networkPolicy.allowedNamespaces[0].kubernetes\\.io/metadata\\.name=apps").stdout
    assert "kind: Deployment" in rendered and "type: Recreate" in rendered
    proc = kube_cluster.kubectl_run("apply", "--dry-run=server", "-f", "-", input=rendered)
    out = proc.stdout + proc.stderr
    assert "deployment.apps/strata-stratalog-operator created (server dry run)" in out, out
    assert "clusterrole.rbac.authorization.k8s.io/strata-stratalog-operator" in out
    assert "role.rbac.authorization.k8s.io/strata-stratalog-agent" in out
    # Secure by default: the agents' access control, its RBAC, a NetworkPolicy and example Roles.
    assert "clusterrole.rbac.authorization.k8s.io/strata-stratalog-agent-reviews created" in out
    assert "networkpolicy.networking.k8s.io/strata-stratalog-agents created" in out
    for role in ("producer", "consumer", "admin"):
        assert f"role.rbac.authorization.k8s.io/strata-stratalog-topic-{role} created" in out
    assert "Warning" not in out, out  # no PodSecurity "restricted" violations
    env = {e["name"]: e.get("value") for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "Deployment"
           for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["STRATALOG_AGENT_AUTHENTICATION"], env["STRATALOG_AGENT_TLS_SECRET"]) == ("kubernetes", "agents-tls")
    assert env["STRATALOG_AGENT_TOKEN_AUDIENCE"] == "strata-stratalog"   # one per release by default
    # Kafka clients: the agents listen on 9092, the NetworkPolicy lets them in, and they bootstrap from one Service.
    assert env["STRATALOG_AGENT_KAFKA_PORT"] == "9092"
    assert "service/strata-stratalog-kafka-bootstrap created (server dry run)" in out, out
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    [bootstrap] = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("kafka-bootstrap")]
    assert bootstrap["spec"]["selector"] == {"app.kubernetes.io/name": "stratalog",
                                             "app.kubernetes.io/component": "agent"}
    assert bootstrap["spec"]["ports"] == [{"name": "kafka", "port": 9092, "targetPort": "kafka", "protocol": "TCP"}]
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": 8092, "protocol": "TCP"}, {"port": 9092, "protocol": "TCP"}]


def test_tls_on_by_default_asks_for_a_secret_or_an_issuer_by_name(kube_cluster: KubeCluster) -> None:
    proc = subprocess.run([str(kube_cluster.helm), "template", "x", str(CHART)], capture_output=True, text=True,
                          env=kube_cluster.env, timeout=120, check=False)
    assert proc.returncode != 0
    assert "tls.secretName" in proc.stderr and "tls.certManager.issuerRef" in proc.stderr, proc.stderr
    plain = _helm(kube_cluster, "template", "x", str(CHART), "--set", "tls.enabled=false,access.authentication=none,"
                  "networkPolicy.enabled=false,access.exampleRoles=false").stdout
    assert '"STRATALOG_AGENT_TLS_SECRET"' not in plain and "value: \"none\"" in plain
    assert "NetworkPolicy" not in plain and "agent-reviews" not in plain
    no_kafka = _helm(kube_cluster, "template", "x", str(CHART), "--set", "tls.enabled=false,kafka.port=0").stdout
    assert "kafka-bootstrap" not in no_kafka
    env = {e["name"]: e.get("value") for doc in yaml.safe_load_all(no_kafka) if doc and doc["kind"] == "Deployment"
           for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["STRATALOG_AGENT_KAFKA_PORT"] == "0"   # the operator then gives the agents no Kafka listener


def test_the_grafana_dashboard_ships_as_a_configmap_for_grafanas_sidecar(kube_cluster: KubeCluster) -> None:
    rendered = _helm(kube_cluster, "template", "strata", str(CHART), "--set", "metrics.grafanaDashboard.enabled=true",
                     "--set", "tls.secretName=agents-tls",
                     "--show-only", "templates/dashboard.yaml").stdout
    configmap = yaml.safe_load(rendered)
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["stratalog.json"]) == json.loads(
        (CHART / "dashboards" / "stratalog.json").read_text())
    proc = kube_cluster.kubectl_run("apply", "--dry-run=server", "-f", "-", input=rendered)
    assert "configmap/strata-stratalog-dashboard created (server dry run)" in proc.stdout, proc.stdout
