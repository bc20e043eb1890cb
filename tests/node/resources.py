"""What the real-pod tests apply and read: LogDir and Topic manifests, conditions, client pods.

Every client runs as a pod of the project's image under the restricted Pod Security Standard, so
it reaches the agents the way an application in the cluster does: by their Services' names.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from typing import Any

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


def install(node: Node, release: str, ns: str, *values: str) -> None:
    repository, tag = node.image.rsplit(":", 1)
    sets = [f"image.repository={repository}", f"image.tag={tag}", "image.pullPolicy=Never", *values]
    node.run("helm", "install", release, CHART, "-n", ns, *(a for s in sets for a in ("--set", s)),
             "--wait", "--timeout", "180s", timeout=240)


def start_pod(node: Node, ns: str, name: str, command: list[str]) -> None:
    """A pod of the project's image running ``command`` once, restricted like any pod here."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "client", "image": node.image, "imagePullPolicy": "Never",
                                    "command": command, "securityContext": RESTRICTED_CONTAINER}]}}
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


def python_client(node: Node, ns: str, name: str, code: str, *args: str, timeout: float = 120) -> str:
    """Run Python ``code`` in a client pod; its output."""
    start_pod(node, ns, name, ["python", "-c", textwrap.dedent(code), *args])
    return finish_pod(node, ns, name, timeout)


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
