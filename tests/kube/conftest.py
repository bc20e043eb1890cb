"""A real kube-apiserver + etcd on loopback (scripts/k8s-testbed), shared by the whole session.

The binaries are built once from their Go modules and cached outside the repository; a cold build
takes tens of minutes (see scripts/k8s-testbed), a warm one returns at once. There is no skip: when
the build or the start fails, the fixture fails with the script's own output.

Only etcd and kube-apiserver run: no kube-controller-manager (no garbage collection of
ownerReferences, namespaces stay Terminating, no ServiceAccount/Deployment/StatefulSet
controllers), no scheduler, no kubelet (Pods never run).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTBED = REPO / "scripts" / "k8s-testbed"

# A cold build (etcd, kube-apiserver, kubectl, helm from source) is far longer than the suite's
# per-test timeout; the fixture's own subprocess timeouts bound it instead.
BUILD_TIMEOUT = float(os.environ.get("K8S_TESTBED_BUILD_TIMEOUT", 75 * 60))
START_TIMEOUT = 300.0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep pytest-timeout's per-test limit off the session fixture's build and start.

    The first test to request ``kube_cluster`` pays for the build (cold: tens of minutes), so for
    tests using it the limit applies to the test function only (``func_only``); the fixture bounds
    its own subprocesses. An explicit timeout marker on such a test keeps its value.
    """
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if "kube_cluster" not in getattr(item, "fixturenames", ()):
            continue
        own = item.get_closest_marker("timeout")
        args, kwargs = (own.args, dict(own.kwargs)) if own else ((), {})
        kwargs["func_only"] = True
        if not args and "timeout" not in kwargs:
            kwargs["timeout"] = None  # the configured default
        item.add_marker(pytest.mark.timeout(*args, **kwargs))


def _run_testbed(*args: str, timeout: float) -> str:
    # K8S_TESTBED_OWNER_PID: if this pytest dies before the teardown, the test bed stops by itself.
    env = {**os.environ, "K8S_TESTBED_OWNER_PID": str(os.getpid())}
    try:
        proc = subprocess.run(["bash", str(TESTBED), *args], capture_output=True, text=True,
                              timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"scripts/k8s-testbed {' '.join(args)} timed out after {timeout:.0f}s\n"
                    f"--- stdout\n{out}\n--- stderr\n{err}", pytrace=False)
    if proc.returncode != 0:
        pytest.fail(f"scripts/k8s-testbed {' '.join(args)} failed (exit {proc.returncode})\n"
                    f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}", pytrace=False)
    return proc.stdout


@dataclass
class KubeCluster:
    dir: Path
    bin: Path
    kubeconfig: Path
    server: str
    token: str
    ca: Path
    env: dict[str, str] = field(repr=False)

    @property
    def kubectl(self) -> Path:
        return self.bin / "kubectl"

    @property
    def helm(self) -> Path:
        return self.bin / "helm"

    def kubectl_run(self, *args: str, input: str | None = None, check: bool = True,
                    timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the test bed; with ``check`` a non-zero exit fails the test with its output."""
        proc = subprocess.run([str(self.kubectl), *args], input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed (exit {proc.returncode})\n"
                        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}", pytrace=False)
        return proc


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    bin_dir = Path(_run_testbed("build", timeout=BUILD_TIMEOUT).strip().splitlines()[-1])
    state = tmp_path_factory.mktemp("k8s-testbed")
    out = _run_testbed("start", str(state), timeout=START_TIMEOUT)
    try:
        values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env["KUBECONFIG"] = values["KUBECONFIG"]
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', os.defpath)}"
        env["HOME"] = str(state)                    # kubectl's/helm's caches, not the user's
        env["HELM_CACHE_HOME"] = str(state / "helm" / "cache")
        env["HELM_CONFIG_HOME"] = str(state / "helm" / "config")
        env["HELM_DATA_HOME"] = str(state / "helm" / "data")
        yield KubeCluster(dir=state, bin=bin_dir, kubeconfig=Path(values["KUBECONFIG"]),
                          server=values["K8S_TESTBED_SERVER"], token=values["K8S_TESTBED_TOKEN"],
                          ca=Path(values["K8S_TESTBED_CA"]), env=env)
    finally:
        subprocess.run(["bash", str(TESTBED), "stop", str(state)], check=False, timeout=60)
