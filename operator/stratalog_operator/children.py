"""What a LogDir should own in the cluster, computed from its spec alone (no I/O).

One PVC per volume (created by the controller rather than through volumeClaimTemplates, so
that sizes can grow and ``deleteClaim`` can be honoured per claim), a ConfigMap with the
engine's properties, a Service for the agent's HTTP API and Kafka listener, and a
single-replica StatefulSet whose pod runs ``stratalog agent`` on the mounted volumes. Each agent
advertises its Service to Kafka clients, so a client anywhere in the cluster reaches every
broker the Metadata lists.

Everything carries an owner reference to the LogDir, so the garbage collector of a real
cluster removes the children with it; a PVC only when ``deleteClaim`` is true, so that by
default the data outlives the resource (as Strimzi does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .names import (AGENT_PORT, API_VERSION, KAFKA_PORT, CONFIG_DIR, CONFIG_HASH_ANNOTATION, DATA_ROOT, ENGINE_PROPERTIES,
                    SPEC_HASH_ANNOTATION,
                    LABEL_COMPONENT, LABEL_INSTANCE, LABEL_LOGDIR, LABEL_MANAGED_BY, LABEL_NAME, claim_name,
                    configmap_name, service_name, statefulset_name)
from .properties import digest, engine_properties, properties_text

__all__ = ["AgentOptions", "Children", "desired_children", "labels", "selector_labels", "owner_reference"]

Json = dict[str, Any]
TLS_DIR = "/var/run/stratalog/tls"
TOKEN_DIR = "/var/run/stratalog/token"


@dataclass(frozen=True)
class AgentOptions:
    """What the controller knows that a LogDir does not say: its own image and the agents' account."""

    image: str = "ghcr.io/stratalog/stratalog:0.1.0"
    service_account: str = "stratalog-agent"
    image_pull_policy: str = "IfNotPresent"
    run_as_user: int = 10001
    # An init step, as root with CHOWN and FOWNER only, giving each data volume's top directory to
    # the agent's user: for storage classes that apply no fsGroup (the in-tree hostPath provisioner).
    # The restricted Pod Security Standard forbids it, so it is off unless the chart turns it on.
    volume_permissions: bool = False
    # Access control of the agents' API (docs/access.md): "kubernetes" checks ServiceAccount tokens
    # and RBAC on the Topic; "none" lets in anyone who reaches the Service.
    authentication: str = "kubernetes"
    # A Secret in cert-manager's layout (tls.crt, tls.key, ca.crt) in each LogDir's namespace: the
    # agents serve HTTPS with it and trust its CA when they fetch from each other. None: plain HTTP.
    tls_secret: str | None = None
    # The audience the agents accept tokens for (and mint their own with): one per release, so a
    # token for one release's agents is no good at another's.
    token_audience: str = "stratalog"
    # The agents' Kafka listener, advertised as <LogDir's Service>.<namespace>.svc:<port>; 0: none.
    kafka_port: int = KAFKA_PORT


@dataclass(frozen=True)
class Children:
    claims: list[Json]
    configmap: Json
    service: Json
    statefulset: Json


def selector_labels(logdir: str) -> dict[str, str]:
    return {LABEL_NAME: "stratalog", LABEL_INSTANCE: logdir, LABEL_COMPONENT: "agent"}


def labels(logdir: str) -> dict[str, str]:
    return {**selector_labels(logdir), LABEL_MANAGED_BY: "stratalog-operator", LABEL_LOGDIR: logdir}


def owner_reference(logdir: Mapping[str, Any]) -> Json:
    meta = logdir["metadata"]
    return {"apiVersion": API_VERSION, "kind": "LogDir", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _claim(logdir: Mapping[str, Any], volume: Mapping[str, Any], delete_claim: bool) -> Json:
    name = logdir["metadata"]["name"]
    spec: Json = {
        "accessModes": list(volume.get("accessModes") or ["ReadWriteOnce"]),
        "resources": {"requests": {"storage": volume["size"]}},
    }
    if volume.get("storageClassName"):
        spec["storageClassName"] = volume["storageClassName"]
    meta: Json = {"name": claim_name(name, volume["name"]),
                  "labels": {**labels(name), f"{LABEL_LOGDIR}-volume": volume["name"]}}
    # The owner reference is what lets a real cluster's garbage collector delete the claim;
    # without deleteClaim it is left off so the data survives the LogDir.
    meta["ownerReferences"] = [owner_reference(logdir)] if delete_claim else []
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def _restricted() -> Json:
    return {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def _volume_permissions(agent: Json, options: AgentOptions) -> Json:
    """``chown`` of each data volume's top directory to the agent's user (not recursive: the engine
    creates everything below it), then ``chmod u+rwx``."""
    paths = [m["mountPath"] for m in agent["volumeMounts"] if m["mountPath"].startswith(f"{DATA_ROOT}/")]
    user = options.run_as_user
    return {
        "name": "volume-permissions", "image": agent["image"], "imagePullPolicy": agent["imagePullPolicy"],
        "command": ["sh", "-c", f'chown {user}:{user} "$@" && chmod u+rwx "$@"', "volume-permissions", *paths],
        "securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [m for m in agent["volumeMounts"] if m["mountPath"] in paths],
    }


def _access_args(options: AgentOptions, mounts: list[Json], volumes: list[Json]) -> list[str]:
    """The agent's TLS and authentication arguments, with the volumes they read."""
    args: list[str] = []
    if options.tls_secret:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": options.tls_secret}})
        args += ["--tls-cert", f"{TLS_DIR}/tls.crt", "--tls-key", f"{TLS_DIR}/tls.key",
                 "--replication-ca-file", f"{TLS_DIR}/ca.crt"]
    if options.authentication == "kubernetes":
        # The agent's own identity toward other agents: a token minted for the agents' audience,
        # renewed by the kubelet (the agent reads the file again every 30 s, or for a new connection).
        mounts.append({"name": "replication-token", "mountPath": TOKEN_DIR, "readOnly": True})
        volumes.append({"name": "replication-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": options.token_audience, "expirationSeconds": 3600, "path": "token"}}]}})
        args += ["--authentication", "kubernetes", "--token-audience", options.token_audience,
                 "--replication-token-file", f"{TOKEN_DIR}/token"]
    return args


def desired_children(logdir: Mapping[str, Any], options: AgentOptions) -> Children:
    """The objects a LogDir should own, given its spec (raises InvalidConfigError on bad settings)."""
    meta, spec = logdir["metadata"], logdir.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    volumes = list(spec.get("volumes") or [])
    engine = spec.get("engine") or {}
    owner = [owner_reference(logdir)]
    delete_claim = bool(spec.get("deleteClaim", False))

    props = engine_properties(engine.get("settings"))
    props_text = properties_text(props)
    configmap: Json = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": configmap_name(name), "labels": labels(name), "ownerReferences": owner},
        "data": {ENGINE_PROPERTIES: props_text},
    }
    service_ports = [{"name": "http", "port": AGENT_PORT, "targetPort": "http", "protocol": "TCP"}]
    container_ports = [{"name": "http", "containerPort": AGENT_PORT, "protocol": "TCP"}]
    if options.kafka_port:
        service_ports.append({"name": "kafka", "port": options.kafka_port, "targetPort": "kafka", "protocol": "TCP"})
        container_ports.append({"name": "kafka", "containerPort": options.kafka_port, "protocol": "TCP"})
    service: Json = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(name), "labels": labels(name), "ownerReferences": owner},
        "spec": {"type": "ClusterIP", "selector": selector_labels(name), "ports": service_ports},
    }
    # Followers and clients reach this engine through the LogDir's Service: a stable name that
    # survives the pod's rescheduling (the pod's own hostname resolves nowhere without a headless one).
    scheme = "https" if options.tls_secret else "http"
    command = ["stratalog", "agent", "--logdir", name, "--namespace", namespace,
               "--listen", f"0.0.0.0:{AGENT_PORT}", "--config-file", f"{CONFIG_DIR}/{ENGINE_PROPERTIES}",
               "--advertise", f"{scheme}://{service_name(name)}.{namespace}.svc:{AGENT_PORT}"]
    if options.kafka_port:
        command += ["--kafka-listen", f"0.0.0.0:{options.kafka_port}",
                    "--kafka-advertise", f"{service_name(name)}.{namespace}.svc:{options.kafka_port}"]
    mounts: list[Json] = []
    pod_volumes: list[Json] = []
    for volume in volumes:
        path = f"{DATA_ROOT}/{volume['name']}"
        command += ["--data-dir", path]
        mounts.append({"name": f"data-{volume['name']}", "mountPath": path})
        pod_volumes.append({"name": f"data-{volume['name']}",
                            "persistentVolumeClaim": {"claimName": claim_name(name, volume["name"])}})
    mounts += [{"name": "engine-config", "mountPath": CONFIG_DIR, "readOnly": True},
               {"name": "tmp", "mountPath": "/tmp"}]
    pod_volumes += [{"name": "engine-config", "configMap": {"name": configmap_name(name)}},
                    {"name": "tmp", "emptyDir": {}}]
    command += _access_args(options, mounts, pod_volumes)
    container: Json = {
        "name": "agent",
        "image": engine.get("image") or options.image,
        "imagePullPolicy": options.image_pull_policy,
        "command": command,
        "env": [{"name": "STRATALOG_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": container_ports,
        # Liveness must not fail during a long recovery: /healthz answers while the engine opens.
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": scheme.upper()},
                          "periodSeconds": 10, "failureThreshold": 6},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http", "scheme": scheme.upper()},
                           "periodSeconds": 5},
        "securityContext": _restricted(),
        "volumeMounts": mounts,
    }
    if engine.get("resources"):
        container["resources"] = engine["resources"]
    init_containers = [_volume_permissions(container, options)] if options.volume_permissions and volumes else []
    statefulset: Json = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": statefulset_name(name), "labels": labels(name), "ownerReferences": owner},
        "spec": {
            "replicas": 1,
            "serviceName": service_name(name),
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": labels(name),
                             # a settings change rolls the pod: the engine reads them at start
                             "annotations": {CONFIG_HASH_ANNOTATION: digest(props_text)}},
                "spec": {
                    "serviceAccountName": options.service_account,
                    # SIGTERM drains, flushes and writes the clean-shutdown marker: give it time.
                    "terminationGracePeriodSeconds": 120,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": options.run_as_user,
                                        "runAsGroup": options.run_as_user, "fsGroup": options.run_as_user,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    **({"initContainers": init_containers} if init_containers else {}),
                    "containers": [container],
                    "volumes": pod_volumes,
                },
            },
        },
    }
    # A field dropped from the LogDir spec (say engine.resources) is absent from the desired
    # object, which the subset comparison cannot notice; the hash of the whole desired spec can,
    # and the merge patch then replaces the container list as a whole.
    statefulset["metadata"]["annotations"] = {
        SPEC_HASH_ANNOTATION: digest(json.dumps(statefulset["spec"], sort_keys=True))}
    claims = [_claim(logdir, v, delete_claim) for v in volumes]
    return Children(claims, configmap, service, statefulset)
