"""Names the controller, the agents and the chart agree on: API coordinates, labels,
annotations, finalizers and the names of the objects made for a LogDir.

Kept in one module so that a rename cannot leave the controller and the agents (two
processes that only meet through the API server) disagreeing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from .crds import GROUP, VERSION

__all__ = [
    "GROUP", "VERSION", "API_VERSION", "LOGDIRS", "TOPICS",
    "LABEL_NAME", "LABEL_INSTANCE", "LABEL_COMPONENT", "LABEL_MANAGED_BY", "LABEL_LOGDIR",
    "PAUSE_ANNOTATION", "MANAGED_ANNOTATION", "OFFSETS_TOPIC_REQUESTED_ANNOTATION", "CONFIG_HASH_ANNOTATION", "SPEC_HASH_ANNOTATION",
    "CONTROLLER_FINALIZER", "AGENT_FINALIZER_PREFIX", "agent_finalizer", "agent_timer_finalizer", "is_paused", "is_unmanaged",
    "claim_name", "statefulset_name", "service_name", "configmap_name", "pod_name",
    "AGENT_PORT", "KAFKA_PORT", "DATA_ROOT", "CONFIG_DIR", "ENGINE_PROPERTIES",
]

API_VERSION = f"{GROUP}/{VERSION}"
LOGDIRS = "logdirs"
TOPICS = "topics"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_LOGDIR = f"{GROUP}/logdir"

# Strimzi's conventions, under our own group: pause keeps everything as it is (deletion
# still proceeds, so `kubectl delete` never hangs on a paused object); managed=false makes
# the operator forget the object: no writes, and data is never deleted on its behalf.
PAUSE_ANNOTATION = f"{GROUP}/pause-reconciliation"
MANAGED_ANNOTATION = f"{GROUP}/managed"
CONFIG_HASH_ANNOTATION = f"{GROUP}/config-hash"
SPEC_HASH_ANNOTATION = f"{GROUP}/spec-hash"

# Put on its own LogDir by an agent asked for a group's coordinator while the namespace has no
# __consumer_offsets Topic: the controller then makes one (Kafka makes it at the first FindCoordinator).
OFFSETS_TOPIC_REQUESTED_ANNOTATION = f"{GROUP}/consumer-offsets-requested"

CONTROLLER_FINALIZER = f"{GROUP}/controller"
AGENT_FINALIZER_PREFIX = f"{GROUP}/agent-"

AGENT_PORT = 8092
KAFKA_PORT = 9092    # the agents' Kafka listener (Kafka's own default port)
DATA_ROOT = "/var/lib/stratalog"
CONFIG_DIR = "/etc/stratalog"
ENGINE_PROPERTIES = "engine.properties"

_QUALIFIED_NAME_MAX = 63


def _annotation(meta: Mapping[str, Any], key: str) -> str:
    annotations = meta.get("annotations") or {}
    return str(annotations.get(key, "")).strip().lower()


def is_paused(meta: Mapping[str, Any]) -> bool:
    """``stratalog.io/pause-reconciliation: "true"``: leave the object and its children as they are."""
    return _annotation(meta, PAUSE_ANNOTATION) == "true"


def is_unmanaged(meta: Mapping[str, Any]) -> bool:
    """``stratalog.io/managed: "false"``: the operator no longer acts on the object at all."""
    return _annotation(meta, MANAGED_ANNOTATION) == "false"


def _short(name: str, limit: int) -> str:
    """``name`` if it fits, else a prefix plus a stable hash (names must stay unique)."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:limit - 11].rstrip('-.')}-{digest}"


def agent_finalizer(logdir: str) -> str:
    """The finalizer an agent puts on a Topic before it creates that Topic's data on its LogDir.

    A finalizer is a qualified name whose name part is at most 63 characters of
    ``[A-Za-z0-9][-A-Za-z0-9_.]*``; LogDir names (DNS subdomains, up to 253) are shortened
    with a hash when needed.
    """
    part = re.sub(r"[^-A-Za-z0-9_.]", "-", f"agent-{logdir}")
    return f"{GROUP}/{_short(part, _QUALIFIED_NAME_MAX)}"


# Objects made for a LogDir. The StatefulSet's pod is <sts>-0 and the pod name carries a
# controller-revision-hash label of 63 chars at most, so the StatefulSet name stays ≤ 52.
def statefulset_name(logdir: str) -> str:
    return _short(f"{logdir}", 52)


def pod_name(logdir: str) -> str:
    return f"{statefulset_name(logdir)}-0"


def service_name(logdir: str) -> str:
    return _short(logdir, 63)   # a DNS label


def configmap_name(logdir: str) -> str:
    return _short(f"{logdir}-engine", 253)


def claim_name(logdir: str, volume: str) -> str:
    return _short(f"{logdir}-{volume}", 253)


def agent_timer_finalizer(logdir: str) -> str:
    """The finalizer kopf puts on an agent's own LogDir while its timers run there.

    Distinct from :func:`agent_finalizer`: kopf removes its persistence finalizer from
    objects none of its handlers need it on, and must never take the data finalizer off
    a Topic.
    """
    part = re.sub(r"[^-A-Za-z0-9_.]", "-", f"timers-{logdir}")
    return f"{GROUP}/{_short(part, _QUALIFIED_NAME_MAX)}"
