"""The test bed is a real control plane: kube-apiserver (with CEL) on etcd, reached with kubectl and helm."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request

from .conftest import KubeCluster

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.testbed.stratalog.io
spec:
  group: testbed.stratalog.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [minReplicas, maxReplicas]
            properties:
              minReplicas: {type: integer, minimum: 0}
              maxReplicas: {type: integer, minimum: 0}
            x-kubernetes-validations:
            - rule: "self.minReplicas <= self.maxReplicas"
              message: "minReplicas must not exceed maxReplicas"
"""


def widget(name: str, lo: int, hi: int) -> str:
    return json.dumps({"apiVersion": "testbed.stratalog.io/v1", "kind": "Widget",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"minReplicas": lo, "maxReplicas": hi}})


def test_version_reports_the_pinned_server(kube_cluster: KubeCluster) -> None:
    out = json.loads(kube_cluster.kubectl_run("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"].startswith("v1.")
    assert out["serverVersion"]["gitVersion"] == out["clientVersion"]["gitVersion"]
    assert kube_cluster.server.startswith("https://127.0.0.1:")


def test_system_namespaces_exist(kube_cluster: KubeCluster) -> None:
    names = kube_cluster.kubectl_run("get", "ns", "-o", "name").stdout.split()
    assert {"namespace/default", "namespace/kube-system"} <= set(names)


def test_static_token_is_a_superuser(kube_cluster: KubeCluster) -> None:
    ctx = ssl.create_default_context(cafile=str(kube_cluster.ca))
    req = urllib.request.Request(f"{kube_cluster.server}/api/v1/namespaces/kube-system",
                                 headers={"Authorization": f"Bearer {kube_cluster.token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        assert json.load(resp)["metadata"]["name"] == "kube-system"
    # RBAC is on: an anonymous request is not allowed to read namespaces.
    anon = urllib.request.Request(f"{kube_cluster.server}/api/v1/namespaces")
    try:
        urllib.request.urlopen(anon, context=ctx, timeout=30)
    except urllib.error.HTTPError as e:
        assert e.code in (401, 403)
    else:
        raise AssertionError("anonymous request was allowed")


def test_configmap_create_get_delete(kube_cluster: KubeCluster) -> None:
    k = kube_cluster.kubectl_run
    k("create", "configmap", "testbed-cm", "--from-literal=segment.bytes=1048576")
    data = json.loads(k("get", "configmap", "testbed-cm", "-o", "json").stdout)["data"]
    assert data == {"segment.bytes": "1048576"}
    k("delete", "configmap", "testbed-cm")
    gone = k("get", "configmap", "testbed-cm", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_crd_with_cel_validation(kube_cluster: KubeCluster) -> None:
    k = kube_cluster.kubectl_run
    k("apply", "-f", "-", input=CRD)
    k("wait", "--for=condition=Established", "crd/widgets.testbed.stratalog.io", "--timeout=60s")
    try:
        k("apply", "-f", "-", input=widget("ok", 1, 3))
        assert json.loads(k("get", "wdg", "ok", "-o", "json").stdout)["spec"]["maxReplicas"] == 3

        bad = k("apply", "-f", "-", input=widget("bad", 5, 2), check=False)
        assert bad.returncode != 0
        assert "minReplicas must not exceed maxReplicas" in bad.stderr, bad.stderr
        assert k("get", "wdg", "bad", check=False).returncode != 0

        # The structural schema itself is enforced too (minimum: 0).
        neg = k("apply", "-f", "-", input=widget("neg", -1, 2), check=False)
        assert neg.returncode != 0 and "minReplicas" in neg.stderr, neg.stderr
    finally:
        k("delete", "crd", "widgets.testbed.stratalog.io", "--wait=false", check=False)


def test_server_side_dry_run(kube_cluster: KubeCluster) -> None:
    k = kube_cluster.kubectl_run
    cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "dry-run-cm", "namespace": "default"}, "data": {"a": "1"}})
    out = k("apply", "--dry-run=server", "-o", "json", "-f", "-", input=cm).stdout
    assert json.loads(out)["metadata"]["name"] == "dry-run-cm"   # defaulted and admitted by the server
    assert k("get", "configmap", "dry-run-cm", check=False).returncode != 0   # but not stored
    # Server-side validation runs in a dry run: an invalid name is refused by the apiserver.
    bad = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}})
    refused = k("apply", "--dry-run=server", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0 and "Invalid" in refused.stderr, refused.stderr


def test_no_garbage_collector(kube_cluster: KubeCluster) -> None:
    """Documents the test bed's limit: no kube-controller-manager, so ownerReferences are not followed."""
    k = kube_cluster.kubectl_run
    k("create", "configmap", "gc-owner")
    uid = k("get", "configmap", "gc-owner", "-o", "jsonpath={.metadata.uid}").stdout
    dep = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "gc-dependent", "namespace": "default",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-owner", "uid": uid}]}})
    k("apply", "-f", "-", input=dep)
    k("delete", "configmap", "gc-owner")
    # A real cluster's garbage collector would delete the dependent; here it stays.
    assert k("get", "configmap", "gc-dependent", check=False).returncode == 0
    k("delete", "configmap", "gc-dependent")


def test_helm_reaches_the_cluster(kube_cluster: KubeCluster) -> None:
    version = subprocess.run([str(kube_cluster.helm), "version", "--short"], capture_output=True, text=True,
                             env=kube_cluster.env, timeout=60, check=True).stdout
    assert version.startswith("v3.")
    listed = subprocess.run([str(kube_cluster.helm), "list", "-A", "-o", "json"], capture_output=True,
                            text=True, env=kube_cluster.env, timeout=60, check=False)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
