"""The controller's and the agents' only door to the API server: a few verbs on a few kinds.

Built on the official Kubernetes client's transport (configuration, auth, TLS) but talking
JSON dicts rather than generated models, so the pure planning code and the tests share one
shape of object. Every write goes through here, which is what lets the metrics count
writes per verb and kind (and the scale test see that nothing is written when nothing
changed).
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes import client, config
from kubernetes.utils import parse_quantity

from .names import API_VERSION

__all__ = ["Kube", "ApiError", "KINDS", "load_client_configuration", "is_subset", "quantity"]

logger = logging.getLogger(__name__)

Json = dict[str, Any]

# kind -> (API prefix, plural)
KINDS: dict[str, tuple[str, str]] = {
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Pod": ("/api/v1", "pods"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "LogDir": (f"/apis/{API_VERSION}", "logdirs"),
    "Topic": (f"/apis/{API_VERSION}", "topics"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "Event": ("/api/v1", "events"),
}

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class ApiError(Exception):
    """A refused request, with the API server's own message (which names the field)."""

    def __init__(self, status: int, reason: str, message: str, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def load_client_configuration() -> client.Configuration:
    """In-cluster when running in a pod, else the kubeconfig (``KUBECONFIG`` or ~/.kube/config)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)
    return configuration


class Kube:
    def __init__(self, configuration: client.Configuration | None = None, *,
                 field_manager: str = "stratalog",
                 on_write: Callable[[str, str], None] | None = None,
                 on_conflict: Callable[[str], None] | None = None) -> None:
        self.api = client.ApiClient(configuration or load_client_configuration())
        self.field_manager = field_manager
        self.on_write = on_write
        self.on_conflict = on_conflict   # a write refused with 409 (a compare-and-swap that lost), by kind
        # Status fragments last applied, per (kind, namespace, name, uid, manager): see status.py.
        self.applied: dict[tuple[str, str, str, str | None, str], str] = {}

    # -- transport --------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, content_type: str | None = None,
                query: Mapping[str, str] | None = None) -> Json:
        if query:
            path = f"{path}?{urlencode(query)}"
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        _, url, headers, _, _ = self.api.param_serialize(method, path, header_params=headers,
                                                         auth_settings=["BearerToken"])
        response = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=30)
        raw = response.read()
        try:
            payload: Json = json.loads(raw) if raw else {}
        except ValueError:   # e.g. "404 page not found" for an API that is not installed
            payload = {"message": raw.decode("utf-8", "replace").strip()}
        if not 200 <= response.status < 300:
            raise ApiError(response.status, str(payload.get("reason", response.reason)),
                           str(payload.get("message", raw[:500])), method, path)
        return payload

    @staticmethod
    def path(kind: str, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
        prefix, plural = KINDS[kind]
        path = f"{prefix}/namespaces/{quote(namespace)}/{plural}"
        if name is not None:
            path += f"/{quote(name)}"
        if subresource is not None:
            path += f"/{subresource}"
        return path

    def _wrote(self, verb: str, kind: str) -> None:
        if self.on_write is not None:
            self.on_write(verb, kind)

    # -- verbs ------------------------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str) -> Json | None:
        try:
            return self.request("GET", self.path(kind, namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str, label_selector: str | None = None) -> list[Json]:
        query = {"labelSelector": label_selector} if label_selector else None
        items: list[Json] = self.request("GET", self.path(kind, namespace), query=query).get("items") or []
        return items

    def create(self, kind: str, namespace: str, body: Json) -> Json:
        result = self.request("POST", self.path(kind, namespace), body,
                              query={"fieldManager": self.field_manager})
        self._wrote("create", kind)
        return result

    def patch(self, kind: str, namespace: str, name: str, patch: Any, *, type: str = "merge",
              subresource: str | None = None) -> Json:
        try:
            result = self.request("PATCH", self.path(kind, namespace, name, subresource), patch,
                                  content_type=PATCH_TYPES[type], query={"fieldManager": self.field_manager})
        except ApiError as error:
            if error.status == 409 and self.on_conflict is not None:
                self.on_conflict(kind)
            raise
        self._wrote("patch-status" if subresource == "status" else "patch", kind)
        return result

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete; False when it was already gone."""
        try:
            self.request("DELETE", self.path(kind, namespace, name),
                         {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        self._wrote("delete", kind)
        return True

    def remove_finalizer(self, kind: str, body: Mapping[str, Any], finalizer: str) -> bool:
        """Drop one finalizer with a JSON patch guarded by a test on the list, so a concurrent
        change by another finalizer's owner makes this attempt fail rather than clobber it."""
        meta = body["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if finalizer not in finalizers:
            return False
        index = finalizers.index(finalizer)
        ops = [{"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
               {"op": "remove", "path": f"/metadata/finalizers/{index}"}]
        try:
            self.patch(kind, meta["namespace"], meta["name"], ops, type="json")
        except ApiError as error:
            if error.status == 404:
                return False
            if error.status in (409, 422):   # the list changed under us: re-read and retry once
                fresh = self.get(kind, meta["namespace"], meta["name"])
                return fresh is not None and self.remove_finalizer(kind, fresh, finalizer)
            raise
        return True

    def add_finalizer(self, kind: str, body: Mapping[str, Any], finalizer: str) -> bool:
        meta = body["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if finalizer in finalizers:
            return False
        if finalizers:
            ops: list[Json] = [{"op": "test", "path": "/metadata/resourceVersion",
                                "value": meta["resourceVersion"]},
                               {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
        else:
            ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
                   {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]
        try:
            self.patch(kind, meta["namespace"], meta["name"], ops, type="json")
        except ApiError as error:
            if error.status in (409, 422):   # stale body: re-read and retry
                fresh = self.get(kind, meta["namespace"], meta["name"])
                if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                    return False
                return self.add_finalizer(kind, fresh, finalizer)
            raise
        return True


# -- comparing desired with actual -----------------------------------------------------------

def quantity(text: str) -> Decimal:
    """A Kubernetes quantity ("10Gi", "500m") as a number; ValueError if it is not one."""
    value: Decimal = parse_quantity(text)
    return value


def _quantity_equal(a: str, b: str) -> bool:
    try:
        return quantity(a) == quantity(b)
    except ValueError:
        return False


_LIST_MAP_KEYS = ("type", "name", "partition", "containerPort")


def _list_key(items: list[Any]) -> str | None:
    for key in _LIST_MAP_KEYS:
        if items and all(isinstance(i, Mapping) and key in i for i in items):
            return key
    return None


def is_subset(desired: Any, actual: Any) -> bool:
    """Whether every field set in ``desired`` has the same value in ``actual``.

    Fields the API server defaults (and ``desired`` leaves out) do not count as a
    difference; lists of objects with a key (conditions by ``type``, containers and
    volumes by ``name``, ...) are matched by key, so entries another writer owns do not
    count either; quantities compare by value ("1024Mi" equals "1Gi"), since the API
    server stores them in canonical form.
    """
    if isinstance(desired, Mapping):
        if actual is None:
            actual = {}
        if not isinstance(actual, Mapping):
            return False
        return all(is_subset(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if actual is None:
            actual = []
        if not isinstance(actual, list):
            return False
        key = _list_key(desired)
        if key is not None:
            by_key = {a.get(key): a for a in actual if isinstance(a, Mapping)}
            return all(d[key] in by_key and is_subset(d, by_key[d[key]]) for d in desired)
        if len(desired) != len(actual):
            return False
        return all(is_subset(d, a) for d, a in zip(desired, actual))
    if desired == actual:
        return True
    if isinstance(desired, str) and isinstance(actual, str):
        return _quantity_equal(desired, actual)
    if isinstance(desired, (int, float)) and isinstance(actual, str) or \
            isinstance(actual, (int, float)) and isinstance(desired, str):
        return _quantity_equal(str(desired), str(actual))
    return False
