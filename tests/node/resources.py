"""What the real-pod tests apply and read: LogDir and Topic manifests, conditions, client pods.

Every client runs as a pod of the project's image under the restricted Pod Security Standard, so
it reaches the agents the way an application in the cluster does: by their Services' names, over
TLS, with a token of its ServiceAccount (the chart's secure defaults).
"""

from __future__ import annotations

import base64
import json
import shlex
import textwrap
from pathlib import Path
from typing import Any

from certificates import Authority

from .conftest import REPO, Node

CHART = str(REPO / "charts" / "stratalog")
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def logdir(name: str, storage_class: str, volumes: int = 2, pool: str | None = None) -> str:
    engine = {"resources": {"requests": {"cpu": "50m", "memory": "128Mi"}}}
    return json.dumps({
        "apiVersion": "stratalog.io/v1alpha1", "kind": "LogDir",
        "metadata": {"name": name, "labels": {"stratalog.io/pool": pool or name}},
        "spec": {"volumes": [{"name": f"data-{i}", "size": "1Gi", "storageClassName": storage_class}
                             for i in range(volumes)],
                 "engine": engine}})


def topic(name: str, pool: str, partitions: int, replicas: int = 1, config: dict[str, Any] | None = None) -> str:
    spec: dict[str, Any] = {"partitions": partitions, "replicas": replicas,
                            "logDirSelector": {"matchLabels": {"stratalog.io/pool": pool}}}
    if config:
        spec["config"] = config
    return json.dumps({"apiVersion": "stratalog.io/v1alpha1", "kind": "Topic", "metadata": {"name": name},
                       "spec": spec})


def condition(resource: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (resource.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def get(node: Node, ns: str, *what: str) -> dict[str, Any]:
    out = node.kubectl("-n", ns, "get", *what, "-o", "json", check=False)
    return json.loads(out) if out.strip() else {}


TLS_SECRET = "agents-tls"
TOKEN_DIR = "/var/run/stratalog/token"
CA_DIR = "/var/run/stratalog/ca"


def agent_url(name: str, ns: str) -> str:
    """An agent's address as clients in the cluster use it: https, by its Service's name in the
    certificate (the chart's default: TLS and authentication on)."""
    return f"https://{name}.{ns}.svc:8092"


def wait_for_endpoint(node: Node, ns: str, service: str, pod: str, timeout: float = 120) -> None:
    """Until ``service``'s EndpointSlices list ``pod`` at its current address as ready: a pod that has
    just become Ready is not yet behind its Service (the endpoints controller, then kube-proxy, follow
    it), and a client sent there first finds the Service's port refused."""
    def routed() -> bool:
        ip = get(node, ns, "pod", pod).get("status", {}).get("podIP")
        slices = get(node, ns, "endpointslices", "-l", f"kubernetes.io/service-name={service}").get("items", [])
        return bool(ip) and any(
            ip in endpoint.get("addresses", []) and (endpoint.get("targetRef") or {}).get("name") == pod
            and (endpoint.get("conditions") or {}).get("ready") is True
            for piece in slices for endpoint in piece.get("endpoints") or [])
    node.wait_for(f"{pod} behind Service {service}", routed, timeout=timeout, namespace=ns)


def install(node: Node, release: str, ns: str, *values: str) -> None:
    """The chart with its secure defaults: a TLS Secret in cert-manager's layout made for the
    namespace first, and the namespace's ``default`` ServiceAccount (which client pods run as)
    bound to the chart's example admin Role after."""
    ca = tls_secret(node, ns)
    repository, tag = node.image.rsplit(":", 1)
    sets = [f"image.repository={repository}", f"image.tag={tag}", "image.pullPolicy=Never",
            f"tls.secretName={TLS_SECRET}", *values]
    node.run("helm", "install", release, CHART, "-n", ns, *(a for s in sets for a in ("--set", s)),
             "--wait", "--timeout", "180s", timeout=240)
    fullname = release if "stratalog" in release else f"{release}-stratalog"
    node.kubectl("-n", ns, "create", "rolebinding", "clients", f"--role={fullname}-topic-admin",
                 f"--serviceaccount={ns}:default")
    node.ca_files[ns] = ca
    node.audiences[ns] = fullname   # the chart's default audience: the release's own


def tls_secret(node: Node, ns: str) -> Path:
    """A CA and a certificate for the namespace's Services (and 127.0.0.1, for port-forwards) as the
    Secret ``agents-tls``; the CA's file, for clients outside the cluster's pods."""
    directory = node.dir / "tls" / ns
    authority = Authority.create(directory / "ca", f"{ns}-ca")
    cert, key = authority.issue(directory / "server", f"agents.{ns}", serial=1,
                                names=(f"*.{ns}.svc", f"*.{ns}.svc.cluster.local", "localhost"))
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": TLS_SECRET},
              "data": {name: base64.b64encode(path.read_bytes()).decode()
                       for name, path in (("tls.crt", cert), ("tls.key", key), ("ca.crt", authority.cert))}}
    node.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(secret))
    return authority.cert


# Python client code in a client pod starts with this: every urllib request presents the pod's token
# and trusts the agents' CA.
URLLIB_ACCESS = """
import os, ssl, urllib.request
class _Token(urllib.request.BaseHandler):
    def http_request(self, request):
        with open(os.environ["STRATALOG_TOKEN_FILE"]) as token:
            request.add_unredirected_header("Authorization", "Bearer " + token.read().strip())
        return request
    https_request = http_request
urllib.request.install_opener(urllib.request.build_opener(
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=os.environ["STRATALOG_CA_FILE"])),
    _Token()))
"""


def client_token(node: Node, ns: str) -> str:
    """A token of the namespace's default ServiceAccount for the release's audience."""
    return node.kubectl("-n", ns, "create", "token", "default", "--audience", node.audiences[ns]).strip()


def start_pod(node: Node, ns: str, name: str, command: list[str], *, configmaps: dict[str, str] | None = None,
              env: dict[str, str] | None = None) -> None:
    """A pod of the project's image running ``command`` once, restricted like any pod here; with
    ``configmaps`` (name: mount path) mounted and ``env`` set."""
    # An application's way in: a token of its ServiceAccount minted for the agents, and their CA.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "client", "image": node.image, "imagePullPolicy": "Never",
                                    "command": command, "securityContext": RESTRICTED_CONTAINER,
                                    "env": [{"name": "STRATALOG_TOKEN_FILE", "value": f"{TOKEN_DIR}/token"},
                                            {"name": "STRATALOG_CA_FILE", "value": f"{CA_DIR}/ca.crt"}],
                                    "volumeMounts": [{"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
                                                     {"name": "ca", "mountPath": CA_DIR, "readOnly": True}]}],
                    "volumes": [{"name": "token", "projected": {"sources": [{"serviceAccountToken": {
                                    "audience": node.audiences[ns], "expirationSeconds": 3600,
                                    "path": "token"}}]}},
                                {"name": "ca", "secret": {"secretName": TLS_SECRET,
                                                          "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
    container = pod["spec"]["containers"][0]
    for key, value in (env or {}).items():
        container["env"].append({"name": key, "value": value})
    for index, (configmap, path) in enumerate((configmaps or {}).items()):
        container["volumeMounts"].append({"name": f"configmap-{index}", "mountPath": path, "readOnly": True})
        pod["spec"]["volumes"].append({"name": f"configmap-{index}", "configMap": {"name": configmap}})
    node.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(pod))


def finish_pod(node: Node, ns: str, name: str, timeout: float = 120) -> str:
    """Wait for a pod of ``start_pod`` to end; its output (the test fails if it did not succeed)."""
    node.wait_for(f"client pod {name} to finish", lambda: get(node, ns, "pod", name).get("status", {}).get(
        "phase") in ("Succeeded", "Failed"), timeout=timeout, namespace=ns)
    logs = node.kubectl("-n", ns, "logs", name)
    phase = get(node, ns, "pod", name)["status"]["phase"]
    node.kubectl("-n", ns, "delete", "pod", name, "--wait=false")
    assert phase == "Succeeded", f"client pod {name} failed:\n{logs}"
    return logs


def client(node: Node, ns: str, name: str, script: str, timeout: float = 120) -> str:
    """Run a shell ``script`` in a client pod; its output."""
    start_pod(node, ns, name, ["sh", "-ec", textwrap.dedent(script)])
    return finish_pod(node, ns, name, timeout)


def python_client(node: Node, ns: str, name: str, code: str, *args: str, timeout: float = 120,
                  configmaps: dict[str, str] | None = None, env: dict[str, str] | None = None) -> str:
    """Run Python ``code`` in a client pod; its output."""
    start_pod(node, ns, name, ["python", "-c", textwrap.dedent(code), *args], configmaps=configmaps, env=env)
    return finish_pod(node, ns, name, timeout)


KAFKA_PYTHON_DIR = "/opt/kafka-python"


def kafka_python_configmap(node: Node, ns: str, name: str = "kafka-python") -> dict[str, str]:
    """The host's kafka-python (pure Python) as a zip in a ConfigMap, for client pods of the project's
    image, which has no Kafka client (and no registry is reachable here to pull one): the real
    client, imported from the zip. Returns ``start_pod``'s ``configmaps`` and ``env``."""
    import io
    import zipfile

    import kafka

    package = Path(kafka.__file__).parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, str(path.relative_to(package.parent)))
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                 "binaryData": {"kafka.zip": base64.b64encode(buffer.getvalue()).decode()}}
    node.kubectl("-n", ns, "apply", "--server-side", "-f", "-", input=json.dumps(configmap))
    return {name: KAFKA_PYTHON_DIR}


def produce_script(server: str, topic_name: str, records: list[dict[str, str]], batch_records: int = 500) -> str:
    """Shell lines that produce ``records`` (JSON lines, quoted for the shell) with the CLI."""
    lines = "\n".join(json.dumps(r) for r in records)
    return (f"printf '%s\\n' {shlex.quote(lines)} | stratalog produce --server {server} --topic {topic_name} "
            f"--batch-records {batch_records}\n")


def consume_script(server: str, topic_name: str, partitions: int) -> str:
    """Shell lines that print every record of every partition as JSON lines."""
    return (f"for p in $(seq 0 {partitions - 1}); do\n"
            f"  stratalog consume --server {server} --topic {topic_name} --partition $p\n"
            "done\n")


def records_of(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if '"offset"' in line]


def consume(node: Node, ns: str, name: str, server: str, topic_name: str, partitions: int) -> list[dict[str, Any]]:
    return records_of(client(node, ns, name, consume_script(server, topic_name, partitions)))


def produce(node: Node, ns: str, name: str, server: str, topic_name: str, records: list[dict[str, str]]) -> None:
    """Each record in a batch of its own, so that tiny segments roll between them."""
    client(node, ns, name, produce_script(server, topic_name, records, batch_records=1))
