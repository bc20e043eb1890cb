"""The LogDir/Topic CRDs: generated from stratalog.common.config, installed on a real kube-apiserver,
and refusing invalid resources at ``kubectl apply`` with messages naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratalog.common.config import ENGINE_CONFIGS, TOPIC_CONFIGS
from stratalog_operator import crds as gen

from .conftest import REPO, KubeCluster

CRD_DIRS = [REPO / "crds", REPO / "charts" / "stratalog" / "crds"]
EXAMPLES = REPO / "examples"
NAMES = ["logdirs.stratalog.io", "topics.stratalog.io"]


# -- pure: no cluster --------------------------------------------------------------------

@pytest.mark.parametrize("directory", CRD_DIRS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_crds_are_generated(directory: Path) -> None:
    expected = gen.rendered()
    assert sorted(expected) == [f"{n}.yaml" for n in NAMES]
    for name, text in expected.items():
        committed = (directory / name).read_text(encoding="utf-8")
        assert committed == text, (
            f"{directory / name} is stale: run `python -m stratalog_operator.crds "
            "--write crds/ --write charts/stratalog/crds/`")


def _version_schema(crd: dict, *path: str) -> dict:
    s = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for p in path:
        s = s["properties"][p]
    return s


def test_schemas_follow_config_tables() -> None:
    logdir, topic = gen.crds()
    config = _version_schema(topic, "spec", "config")["properties"]
    assert set(config) == set(TOPIC_CONFIGS)
    assert set(_version_schema(logdir, "spec", "topicDefaults")["properties"]) == set(TOPIC_CONFIGS)
    assert set(_version_schema(logdir, "spec", "engine", "settings")["properties"]) == set(ENGINE_CONFIGS)
    assert config["retention.ms"]["minimum"] == -1
    assert config["retention.ms"]["format"] == "int64"
    assert config["segment.bytes"]["minimum"] == 14
    assert config["cleanup.policy"]["items"]["enum"] == ["compact", "delete"]
    assert config["min.cleanable.dirty.ratio"]["type"] == "number"
    assert config["max.compaction.lag.ms"]["minimum"] == 1
    for name, key in TOPIC_CONFIGS.items():
        assert key.doc in config[name]["description"]
    json.dumps(gen.crds(), allow_nan=False)  # finite numbers only


# -- against the API server ----------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(kube_cluster: KubeCluster) -> KubeCluster:
    kube_cluster.kubectl_run("apply", "-f", str(REPO / "crds"))
    kube_cluster.kubectl_run("wait", "--for", "condition=Established", "--timeout=60s",
                             *(f"crd/{n}" for n in NAMES))
    return kube_cluster


@pytest.fixture(scope="module")
def ns(installed: KubeCluster) -> str:
    installed.kubectl_run("create", "namespace", "crd-tests")
    return "crd-tests"


def _apply(k: KubeCluster, ns: str, manifest: str, check: bool = True) -> tuple[int, str]:
    proc = k.kubectl_run("apply", "-n", ns, "-f", "-", input=manifest, check=check)
    return proc.returncode, proc.stdout + proc.stderr


def test_crds_established_with_names(installed: KubeCluster) -> None:
    for name in NAMES:
        out = installed.kubectl_run("get", "crd", name, "-o", "json").stdout
        crd = json.loads(out)
        assert "stratalog" in crd["spec"]["names"]["categories"]
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    res = installed.kubectl_run("api-resources", "--api-group=stratalog.io", "-o", "wide").stdout
    assert "sld" in res and "stp" in res


def test_examples_apply(installed: KubeCluster, ns: str) -> None:
    installed.kubectl_run("apply", "-n", ns, "-f", str(EXAMPLES))
    out = installed.kubectl_run("get", "-n", ns, "stratalog", "-o", "name").stdout.split()
    assert sorted(out) == ["logdir.stratalog.io/dir-a", "topic.stratalog.io/customer-profiles",
                           "topic.stratalog.io/orders"]
    topic = json.loads(installed.kubectl_run("get", "-n", ns, "stp", "orders", "-o", "json").stdout)
    assert topic["spec"]["config"]["cleanup.policy"] == ["delete"]
    compact = json.loads(installed.kubectl_run("get", "-n", ns, "stp", "customer-profiles", "-o", "json").stdout)
    assert compact["spec"]["replicas"] == 1  # defaulted by the schema


LOGDIR = """\
apiVersion: stratalog.io/v1alpha1
kind: LogDir
metadata: {{name: {name}}}
spec:
  volumes:
{volumes}
"""


def _logdir(name: str, *volumes: tuple[str, str]) -> str:
    return LOGDIR.format(name=name, volumes="\n".join(f"  - {{name: {v}, size: {s}}}" for v, s in volumes))


def _topic(name: str, spec: str) -> str:
    return f"apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def test_volume_size_grows_never_shrinks(installed: KubeCluster, ns: str) -> None:
    _apply(installed, ns, _logdir("grow", ("a", "10Gi"), ("b", "1Gi")))
    _apply(installed, ns, _logdir("grow", ("a", "20Gi"), ("b", "1Gi"), ("c", "5Gi")))  # grow + add
    rc, out = _apply(installed, ns, _logdir("grow", ("a", "19Gi"), ("b", "1Gi"), ("c", "5Gi")), check=False)
    assert rc != 0
    assert "spec.volumes[0].size" in out and "never shrink" in out, out


def test_volume_cannot_be_renamed_or_removed(installed: KubeCluster, ns: str) -> None:
    _apply(installed, ns, _logdir("ren", ("a", "1Gi"), ("b", "1Gi")))
    for volumes in ([("a", "1Gi"), ("x", "1Gi")], [("a", "1Gi")]):
        rc, out = _apply(installed, ns, _logdir("ren", *volumes), check=False)
        assert rc != 0
        assert "spec.volumes" in out and "cannot be removed or renamed" in out, out


def test_bad_volume_size_refused(installed: KubeCluster, ns: str) -> None:
    rc, out = _apply(installed, ns, _logdir("badsize", ("a", "ten-gigs")), check=False)
    assert rc != 0 and "spec.volumes[0].size" in out, out


def test_partitions_only_increase(installed: KubeCluster, ns: str) -> None:
    _apply(installed, ns, _topic("parts", "{partitions: 4}"))
    _apply(installed, ns, _topic("parts", "{partitions: 6}"))
    rc, out = _apply(installed, ns, _topic("parts", "{partitions: 5}"), check=False)
    assert rc != 0
    assert "spec.partitions" in out and "never decreased" in out, out


def test_topic_name_immutable(installed: KubeCluster, ns: str) -> None:
    _apply(installed, ns, _topic("named", "{partitions: 1, topicName: named.v1}"))
    rc, out = _apply(installed, ns, _topic("named", "{partitions: 1, topicName: named.v2}"), check=False)
    assert rc != 0 and "spec.topicName" in out and "immutable" in out, out


@pytest.mark.parametrize("spec, field, words", [
    ("{partitions: 1, config: {cleanup.policy: [compcat]}}", "spec.config.cleanup.policy[0]", "Unsupported value"),
    ("{partitions: 1, config: {retention.ms: -5}}", "spec.config.retention.ms", "greater than or equal to -1"),
    ("{partitions: 1, config: {segment.bytes: 13}}", "spec.config.segment.bytes", "greater than or equal to 14"),
    ("{partitions: 1, config: {min.cleanable.dirty.ratio: 1.5}}", "spec.config.min.cleanable.dirty.ratio",
     "less than or equal to 1"),
    ("{partitions: 1, config: {compression.gzip.level: 0}}", "spec.config.compression.gzip.level", "-1 or [1, 9]"),
    ("{partitions: 1, config: {compression.type: brotli}}", "spec.config.compression.type", "Unsupported value"),
    ("{partitions: 1, config: {retention.msx: 5}}", "spec.config.retention.msx", "unknown field"),
    ("{partitions: 1, topicName: ../x}", "spec.topicName", "should match"),
    ("{partitions: 1, topicName: ..}", "spec.topicName", "cannot be '.' or '..'"),
    ("{partitions: 1, topicName: " + "a" * 250 + "}", "spec.topicName", "more than 249"),
    ("{partitions: 0}", "spec.partitions", "greater than or equal to 1"),
    ("{partitions: 1, deletionPolicy: Keep}", "spec.deletionPolicy", "Unsupported value"),
], ids=["cleanup.policy", "retention.ms", "segment.bytes", "dirty.ratio", "gzip.level", "compression.type",
        "unknown-key", "topic-name-slash", "topic-name-dotdot", "topic-name-long", "partitions-0",
        "deletionPolicy"])
def test_invalid_topic_refused(installed: KubeCluster, ns: str, spec: str, field: str, words: str) -> None:
    rc, out = _apply(installed, ns, _topic("invalid", spec), check=False)
    assert rc != 0, out
    assert field in out and words in out, out


def test_invalid_engine_setting_refused(installed: KubeCluster, ns: str) -> None:
    manifest = _logdir("badengine", ("a", "1Gi")) + "  engine:\n    settings: {log.cleaner.threads: -1}\n"
    rc, out = _apply(installed, ns, manifest, check=False)
    assert rc != 0 and "spec.engine.settings.log.cleaner.threads" in out, out


@pytest.mark.parametrize("settings, refused", [
    ("{replica.fetch.wait.max.ms: 40000}", True),                                  # above the default lag
    ("{replica.lag.time.max.ms: 400}", True),                                      # below the default wait
    ("{replica.fetch.wait.max.ms: 60000, replica.lag.time.max.ms: 40000}", True),
    ("{replica.fetch.wait.max.ms: 40000, replica.lag.time.max.ms: 60000}", False),
    ("{replica.fetch.wait.max.ms: 30000}", False),                                 # equal is allowed
], ids=["wait-above-default-lag", "lag-below-default-wait", "both-set-out-of-order", "both-set-in-order",
        "wait-equal-to-lag"])
def test_a_followers_fetch_wait_longer_than_the_isr_allows_is_refused_whatever_is_left_unset(
        installed: KubeCluster, ns: str, settings: str, refused: bool) -> None:
    """The engine refuses replica.fetch.wait.max.ms > replica.lag.time.max.ms at start (KafkaConfig's
    rule), so the API server refuses the LogDir first, an unset key counting at its default."""
    manifest = _logdir("waits", ("a", "1Gi")) + f"  engine:\n    settings: {settings}\n"
    rc, out = _apply(installed, ns, manifest, check=False)
    if refused:
        assert rc != 0 and "spec.engine.settings" in out and "must not be greater than replica.lag" in out, out
    else:
        assert rc == 0, out
        installed.kubectl_run("delete", "-n", ns, "logdir", "waits", "--wait=false")


def test_explain_teaches_config(installed: KubeCluster) -> None:
    out = installed.kubectl_run("explain", "topics.spec.config").stdout
    doc = " ".join(TOPIC_CONFIGS["retention.ms"].doc.split())
    assert "retention.ms" in out
    assert doc in " ".join(out.split()), out
    out = installed.kubectl_run("explain", "logdirs.spec.volumes.size").stdout
    assert "never shrink" in " ".join(out.split())
