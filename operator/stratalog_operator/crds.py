"""The ``LogDir`` and ``Topic`` CustomResourceDefinitions, generated from stratalog.common.config.

Why generated: config keys, their types, ranges and documentation are declared once in
:data:`stratalog.common.config.TOPIC_CONFIGS` / :data:`~stratalog.common.config.ENGINE_CONFIGS`; the CRD
schemas are derived from those tables so that ``kubectl apply`` refuses exactly what the
engine would refuse (unknown keys, wrong types, out-of-range values) and ``kubectl explain``
shows the same documentation.

:func:`crds` is pure (no I/O, no cluster); ``python -m stratalog_operator.crds --write DIR``
writes one YAML file per CRD (``crds/`` and ``charts/stratalog/crds/`` hold committed copies,
checked against this generator by the tests).  The YAML is emitted by a small built-in
writer (:func:`to_yaml`) so generation needs no third-party package.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stratalog.common.config import ENGINE_CONFIGS, TOPIC_CONFIGS, ConfigKey, ConfigType
from stratalog.common.names import MAX_TOPIC_NAME_LENGTH

__all__ = ["GROUP", "VERSION", "CATEGORY", "crds", "logdir_crd", "topic_crd", "config_schema",
           "to_yaml", "write", "main"]

GROUP = "stratalog.io"
VERSION = "v1alpha1"
CATEGORY = "stratalog"
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]+$"
MAX_VOLUMES = 16
MAX_PARTITIONS = 100_000
MAX_LOGDIRS_PER_SELECTION = 1024

Schema = dict[str, Any]

_INT32 = (-(2**31), 2**31 - 1)


# -- config tables -> schemas ------------------------------------------------------------

def _default_text(key: ConfigKey) -> str:
    if key.default is None:
        return "unset (a lower-priority synonym supplies the value)"
    if isinstance(key.default, frozenset):
        return json.dumps(sorted(key.default))
    return key.to_string(key.default)


def config_key_schema(key: ConfigKey) -> Schema:
    """The OpenAPI schema of one config key: type, format, range/choices and documentation."""
    doc = f"{key.doc} Allowed: {key.allowed}. Default: {_default_text(key)}."
    if key.synonym:
        doc += f" Broker default: {key.synonym}."
    s: Schema = {"description": doc}
    if key.type in (ConfigType.INT, ConfigType.LONG):
        s["type"] = "integer"
        s["format"] = "int32" if key.type is ConfigType.INT else "int64"
        lo = key.minimum if key.minimum is not None else (_INT32[0] if key.type is ConfigType.INT else None)
        hi = key.maximum if key.maximum is not None else (_INT32[1] if key.type is ConfigType.INT else None)
        if key.also_allowed:
            # e.g. compression.gzip.level: -1 or [1, 9]; the schema bounds cover both, CEL refines.
            alts = " || ".join(f"self == {v}" for v in key.also_allowed)
            lo = min([v for v in (lo,) if v is not None] + list(key.also_allowed))
            rule = f"{alts} || (self >= {key.minimum} && self <= {key.maximum})"
            s["x-kubernetes-validations"] = [{"rule": rule, "message": f"must be {key.allowed}"}]
        if lo is not None:
            s["minimum"] = lo
        if hi is not None:
            s["maximum"] = hi
    elif key.type is ConfigType.DOUBLE:
        s["type"] = "number"
        s["format"] = "double"
        if key.minimum is not None:
            s["minimum"] = key.minimum
        if key.maximum is not None:
            s["maximum"] = key.maximum
    elif key.type is ConfigType.BOOLEAN:
        s["type"] = "boolean"
    elif key.type is ConfigType.STRING:
        s["type"] = "string"
        if key.choices:
            s["enum"] = list(key.choices)
        else:
            s["maxLength"] = 1024
    else:  # LIST: a YAML list rather than Kafka's comma-separated string
        item: Schema = {"type": "string"}
        if key.choices:
            item["enum"] = list(key.choices)
        else:
            item["maxLength"] = 1024
        s.update({"type": "array", "items": item, "x-kubernetes-list-type": "set", "maxItems": 64})
    return s


def config_schema(table: Mapping[str, ConfigKey], description: str) -> Schema:
    """An object with one typed property per key; unknown keys are not declared, so the
    API server refuses them under kubectl's (default) strict field validation."""
    return {
        "type": "object",
        "description": description,
        "properties": {name: config_key_schema(key) for name, key in sorted(table.items())},
    }


def _cel_field(name: str) -> str:
    """A config key as a CEL field of ``self`` (Kubernetes escapes '.' in property names as __dot__)."""
    return "self." + name.replace(".", "__dot__")


def _at_most(lower: str, upper: str, table: Mapping[str, ConfigKey]) -> str:
    """A CEL rule: ``lower`` ≤ ``upper``, each its default where unset."""
    def value(name: str) -> str:
        field = _cel_field(name)
        return f"(has({field}) ? {field} : {table[name].default})"
    return f"{value(lower)} <= {value(upper)}"


def engine_settings_schema() -> Schema:
    """The engine's settings, with the rule across keys that the engine checks at start (KafkaConfig's):
    refused by the API server rather than by an engine that then cannot start."""
    schema = config_schema(ENGINE_CONFIGS, "Engine (broker-level) settings under Kafka's names, e.g. "
                                           "log.cleaner.threads. Unknown keys are refused.")
    wait, lag = ENGINE_CONFIGS["replica.fetch.wait.max.ms"], ENGINE_CONFIGS["replica.lag.time.max.ms"]
    schema["x-kubernetes-validations"] = [{
        "rule": _at_most(wait.name, lag.name, ENGINE_CONFIGS),
        "message": f"{wait.name} must not be greater than {lag.name} (a follower's fetch may wait that long at "
                   f"its leader, and one not caught up for {lag.name} leaves the ISR); unset, they are "
                   f"{wait.default} and {lag.default}"}]
    return schema


# -- shared pieces -----------------------------------------------------------------------

def _conditions() -> Schema:
    return {
        "type": "array",
        "description": "Latest observations of the resource's state (metav1.Condition).",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "maxItems": 32,
        "items": {
            "type": "object",
            "required": ["type", "status", "lastTransitionTime", "reason", "message"],
            "properties": {
                "type": {"type": "string", "maxLength": 316, "description": "Condition type, e.g. Ready."},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                           "description": "True, False or Unknown."},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                                       "description": "metadata.generation the condition was set for."},
                "lastTransitionTime": {"type": "string", "format": "date-time",
                                       "description": "When the status last changed."},
                "reason": {"type": "string", "maxLength": 1024,
                           "pattern": "^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$",
                           "description": "CamelCase machine-readable reason."},
                "message": {"type": "string", "maxLength": 32768,
                            "description": "Human-readable details."},
            },
        },
    }


def _observed_generation() -> Schema:
    return {"type": "integer", "format": "int64", "minimum": 0,
            "description": "metadata.generation the controller last acted on."}


def _label_selector(description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Labels a LogDir must carry (all of them)."},
            "matchExpressions": {
                "type": "array",
                "description": "Label requirements, ANDed.",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string", "description": "Label key."},
                        "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"],
                                     "description": "In, NotIn, Exists or DoesNotExist."},
                        "values": {"type": "array", "items": {"type": "string"},
                                   "x-kubernetes-list-type": "atomic",
                                   "description": "Values for In/NotIn; empty for Exists/DoesNotExist."},
                    },
                },
            },
        },
    }


def _resources() -> Schema:
    qty: Schema = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    return {
        "type": "object",
        "description": "CPU/memory requests and limits of the engine container (corev1.ResourceRequirements).",
        "properties": {
            "limits": {"type": "object", "additionalProperties": qty, "description": "Maximum resources."},
            "requests": {"type": "object", "additionalProperties": qty, "description": "Minimum resources."},
        },
    }


def _crd(kind: str, plural: str, short: list[str], description: str, spec: Schema, status: Schema,
         columns: list[Schema]) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "stratalog", "app.kubernetes.io/part-of": "stratalog"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "shortNames": short, "categories": [CATEGORY]},
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns + [
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": description,
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string", "description": "APIVersion of this object."},
                        "kind": {"type": "string", "description": "Kind of this object."},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
            }],
        },
    }


_READY = {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}


# -- LogDir ------------------------------------------------------------------------------

def logdir_crd() -> Schema:
    volume: Schema = {
        "type": "object",
        "description": "One data directory of the engine (Kafka's log.dirs entry), backed by a PVC.",
        "required": ["name", "size"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 63,
                     "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                     "description": "Volume name (DNS label); part of the PVC name and mount path. Immutable."},
            "size": {"type": "string", "maxLength": 64,
                     "description": "Requested capacity, a Kubernetes quantity such as 10Gi. May grow "
                                    "(if the storage class allows expansion), never shrink.",
                     "x-kubernetes-validations": [
                         {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",
                          "message": "size must be a positive quantity such as 10Gi"}]},
            "storageClassName": {"type": "string", "maxLength": 253,
                                 "description": "StorageClass of the PVC; the cluster default when unset. Immutable."},
            "accessModes": {"type": "array", "maxItems": 4, "x-kubernetes-list-type": "set",
                            "description": "PVC access modes; ReadWriteOnce when unset.",
                            "items": {"type": "string", "enum": ["ReadWriteOnce", "ReadWriteOncePod",
                                                                 "ReadOnlyMany", "ReadWriteMany"]}},
        },
        "x-kubernetes-validations": [
            {"rule": "quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0",
             "message": "volume size may grow but never shrink", "fieldPath": ".size",
             "reason": "FieldValueForbidden"},
            {"rule": "has(self.storageClassName) == has(oldSelf.storageClassName) && "
                     "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
             "message": "storageClassName is immutable", "fieldPath": ".storageClassName"},
        ],
    }
    spec: Schema = {
        "type": "object",
        "description": "Desired state of a LogDir: its volumes and the engine serving them.",
        "required": ["volumes"],
        "properties": {
            "volumes": {
                "type": "array",
                "description": "Data directories of this LogDir, one PVC each. Volumes may be added, "
                               "not removed or renamed.",
                "minItems": 1,
                "maxItems": MAX_VOLUMES,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": volume,
                "x-kubernetes-validations": [
                    {"rule": "oldSelf.all(o, self.exists(v, v.name == o.name))",
                     "message": "volumes cannot be removed or renamed (volume names are immutable)"}],
            },
            "deleteClaim": {"type": "boolean", "default": False,
                            "description": "Whether the PVCs are deleted with the LogDir (data is lost)."},
            "engine": {
                "type": "object",
                "description": "The engine sidecar serving these volumes.",
                "properties": {
                    "image": {"type": "string", "maxLength": 1024,
                              "description": "Container image; the operator's own image when unset."},
                    "resources": _resources(),
                    "settings": engine_settings_schema(),
                },
            },
            "topicDefaults": config_schema(
                TOPIC_CONFIGS,
                "Defaults of topic configs for the partitions this LogDir holds, under Kafka's topic "
                "names (retention.ms, cleanup.policy, ...); a Topic's spec.config overrides them."),
        },
    }
    status: Schema = {
        "type": "object",
        "description": "Observed state of the LogDir, written by the operator and its agent.",
        "properties": {
            "observedGeneration": _observed_generation(),
            "conditions": _conditions(),
            "volumes": {
                "type": "array",
                "description": "Per-volume capacity and usage.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "description": "Volume name (spec.volumes[].name)."},
                        "claimName": {"type": "string", "description": "Name of the backing PVC."},
                        "capacity": {"type": "string", "description": "Capacity granted by the PVC (quantity)."},
                        "capacityBytes": {"type": "integer", "format": "int64",
                                          "description": "Filesystem size in bytes."},
                        "usedBytes": {"type": "integer", "format": "int64",
                                      "description": "Bytes used on the filesystem."},
                        "logBytes": {"type": "integer", "format": "int64",
                                     "description": "Bytes held by partition logs on this volume."},
                        "partitions": {"type": "integer", "format": "int32",
                                       "description": "Partition directories on this volume."},
                    },
                },
            },
        },
    }
    columns = [
        {"name": "Delete-Claim", "type": "boolean", "jsonPath": ".spec.deleteClaim",
         "description": "Whether the PVCs are deleted with the LogDir."},
        _READY,
    ]
    return _crd("LogDir", "logdirs", ["sld"], "A LogDir: a set of data volumes and the stratalog "
                "engine (sidecar agent) that stores Topic partitions on them.", spec, status, columns)


# -- Topic -------------------------------------------------------------------------------

def topic_crd() -> Schema:
    spec: Schema = {
        "type": "object",
        "description": "Desired state of a Topic: its name in the log layer, partitions, placement and configs.",
        "required": ["partitions"],
        "properties": {
            "topicName": {
                "type": "string", "minLength": 1, "maxLength": MAX_TOPIC_NAME_LENGTH,
                "pattern": TOPIC_NAME_PATTERN,
                "description": "Kafka topic name (ASCII letters, digits, '.', '_', '-'; at most 249; not "
                               "'.' or '..'). Defaults to metadata.name. Immutable.",
                "x-kubernetes-validations": [
                    {"rule": "self != '.' && self != '..'", "message": "topic name cannot be '.' or '..'"},
                    {"rule": "self == oldSelf", "message": "topicName is immutable"},
                ],
            },
            "partitions": {
                "type": "integer", "format": "int32", "minimum": 1, "maximum": MAX_PARTITIONS,
                "description": "Number of partitions. May be increased, never decreased.",
                "x-kubernetes-validations": [
                    {"rule": "self >= oldSelf", "message": "partitions may be increased, never decreased"}],
            },
            "replicas": {"type": "integer", "format": "int32", "minimum": 1,
                         "maximum": MAX_LOGDIRS_PER_SELECTION, "default": 1,
                         "description": "Copies of each partition, each on a different LogDir."},
            "logDirSelector": _label_selector(
                "Selects the LogDirs (in this namespace) the partitions are assigned to; all LogDirs "
                "of the namespace when unset."),
            "config": config_schema(
                TOPIC_CONFIGS,
                "Topic config overrides under Kafka's names (retention.ms, cleanup.policy, ...). "
                "Unknown keys are refused."),
            "deletionPolicy": {"type": "string", "enum": ["Delete", "Retain"], "default": "Delete",
                               "description": "Delete: the partitions' data is deleted with the Topic; "
                                              "Retain: it is left on the LogDirs."},
        },
        "x-kubernetes-validations": [
            {"rule": "has(self.topicName) == has(oldSelf.topicName)",
             "message": "topicName cannot be added or removed after creation", "fieldPath": ".topicName"},
        ],
    }
    status: Schema = {
        "type": "object",
        "description": "Observed state of the Topic, written by the operator and the agents.",
        "properties": {
            "observedGeneration": _observed_generation(),
            "conditions": _conditions(),
            "topicName": {"type": "string", "description": "The effective Kafka topic name."},
            "assignment": {
                "type": "array",
                "description": "Replica assignment: for each partition, the LogDirs holding it (first is preferred).",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["partition"],
                "items": {
                    "type": "object",
                    "required": ["partition", "logDirs"],
                    "properties": {
                        "partition": {"type": "integer", "format": "int32", "minimum": 0,
                                      "description": "Partition number."},
                        "logDirs": {"type": "array", "items": {"type": "string"},
                                    "x-kubernetes-list-type": "atomic",
                                    "description": "Names of the LogDirs holding this partition."},
                    },
                },
            },
            "partitions": {
                "type": "array",
                "description": "Replication state of each partition, as the controller decides it (KRaft's "
                               "PartitionRecord): written only by compare-and-swap on resourceVersion.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["partition"],
                "items": {
                    "type": "object",
                    "required": ["partition", "replicas", "leaderEpoch", "isr", "partitionEpoch"],
                    "properties": {
                        "partition": {"type": "integer", "format": "int32", "minimum": 0},
                        "replicas": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic",
                                     "description": "LogDirs holding a replica, preferred leader first."},
                        "leader": {"type": "string", "nullable": True,
                                   "description": "The LogDir leading it; null while it is offline."},
                        "leaderEpoch": {"type": "integer", "format": "int32", "minimum": 0},
                        "isr": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic",
                                "description": "In-sync replicas."},
                        "partitionEpoch": {"type": "integer", "format": "int32", "minimum": 0},
                        "addingReplicas": {"type": "array", "items": {"type": "string"},
                                           "x-kubernetes-list-type": "atomic",
                                           "description": "While the partition moves (KIP-455): LogDirs catching "
                                                          "up to join it."},
                        "removingReplicas": {"type": "array", "items": {"type": "string"},
                                             "x-kubernetes-list-type": "atomic",
                                             "description": "While the partition moves: LogDirs that leave it once "
                                                            "the new ones are in sync."},
                    },
                },
            },
            "underReplicatedPartitions": {"type": "integer", "minimum": 0,
                                          "description": "Partitions whose ISR is smaller than their replicas."},
            "offlinePartitions": {"type": "integer", "minimum": 0,
                                  "description": "Partitions without a leader (no in-sync replica alive)."},
            "logDirs": {
                "type": "object",
                "description": "Per-LogDir, per-partition figures reported by each LogDir's agent "
                               "(log start/end offset, size, segments, dirty ratio, last cleaned offset).",
                "additionalProperties": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }
    columns: list[Schema] = [
        {"name": "Topic", "type": "string", "jsonPath": ".status.topicName", "description": "Kafka topic name."},
        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.partitions"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        _READY,
        {"name": "Under-Replicated", "type": "integer", "jsonPath": ".status.underReplicatedPartitions",
         "description": "Partitions whose ISR is smaller than their replicas."},
        {"name": "Offline", "type": "integer", "jsonPath": ".status.offlinePartitions",
         "description": "Partitions without a leader.", "priority": 1},
        {"name": "Placed", "type": "string",
         "jsonPath": '.status.conditions[?(@.type=="PartitionsPlaced")].status',
         "description": "Whether every assigned partition is held by its LogDir's agent."},
    ]
    return _crd("Topic", "topics", ["stp"], "A Topic of the stratalog log layer: partitions placed on "
                "LogDirs, with Kafka topic configs.", spec, status, columns)


def crds() -> list[Schema]:
    """Both CRDs, as plain data (pure: same output for the same config tables)."""
    return [logdir_crd(), topic_crd()]


# -- YAML --------------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def _emit(v: Any, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    if isinstance(v, Mapping):
        for k, item in v.items():
            key = _scalar(k)
            if isinstance(item, Mapping) and item:
                out.append(f"{pad}{key}:")
                _emit(item, indent + 1, out)
            elif isinstance(item, Sequence) and not isinstance(item, str) and item:
                out.append(f"{pad}{key}:")
                _emit(item, indent, out)
            else:
                out.append(f"{pad}{key}: {_empty(item)}")
    else:
        for item in v:
            if isinstance(item, Mapping) and item:
                sub: list[str] = []
                _emit(item, indent + 1, sub)
                out.append(f"{pad}- {sub[0].lstrip()}")
                out.extend(sub[1:])
            elif isinstance(item, Sequence) and not isinstance(item, str) and item:
                raise ValueError("nested lists are not used in CRDs")
            else:
                out.append(f"{pad}- {_empty(item)}")


def _empty(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{}"
    if isinstance(v, Sequence) and not isinstance(v, str):
        return "[]"
    return _scalar(v)


def to_yaml(obj: Mapping[str, Any]) -> str:
    """Block-style YAML of a JSON-like document (strings quoted as JSON where needed)."""
    out: list[str] = []
    _emit(obj, 0, out)
    return "\n".join(out) + "\n"


HEADER = "# Generated by `python -m stratalog_operator.crds --write crds/` from stratalog/common/config/; do not edit.\n"


def rendered() -> dict[str, str]:
    """File name -> YAML text of each CRD."""
    return {f"{c['metadata']['name']}.yaml": HEADER + to_yaml(c) for c in crds()}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stratalog_operator.crds",
                                     description="Generate the stratalog CRDs from the config tables.")
    parser.add_argument("--write", metavar="DIR", type=Path, action="append",
                        help="write <plural>.stratalog.io.yaml files into DIR (repeatable); "
                             "without it, print all CRDs as one multi-document YAML stream")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write("---\n".join(rendered().values()))
        return 0
    for directory in args.write:
        for path in write(directory):
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
