"""One real one-node Kubernetes for the suite (``scripts/k8s-node``): kubelet, containerd, CoreDNS,
local-path-provisioner and Kubernetes' own hostPath provisioner, in a private mount and network
namespace, with the project's image built from its Dockerfile on a Debian stand-in for
python:3.11-slim (no container registry is reachable here; the stand-in is named as such by the
script). The API server is reachable inside that namespace only, so every client runs through
``scripts/k8s-node exec``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "k8s-node"
BUILD_TIMEOUT = 60 * 60     # a cold build compiles kubelet and friends, CoreDNS and two images
START_TIMEOUT = 10 * 60


@dataclass
class Node:
    dir: Path
    env: dict[str, str]
    ca_files: dict[str, Path] = field(default_factory=dict)   # per namespace: the CA of its agents' certificate
    audiences: dict[str, str] = field(default_factory=dict)   # per namespace: its release's token audience

    @property
    def image(self) -> str:
        return self.env["K8S_NODE_IMAGE_STRATALOG"]

    def run(self, *command: str, input: str | None = None, check: bool = True, timeout: float = 180
            ) -> subprocess.CompletedProcess[str]:
        """A command inside the cluster's network namespace (kubectl and helm on its PATH)."""
        proc = subprocess.run(["bash", str(SCRIPT), "exec", str(self.dir), "--", *command], input=input,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(command)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
                        f"--- stderr\n{proc.stderr[-4000:]}", pytrace=False)
        return proc

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 180) -> str:
        return self.run("kubectl", *args, input=input, check=check, timeout=timeout).stdout

    def python(self, code: str, timeout: float = 120) -> str:
        """This test run's Python inside the cluster's network (for Services and port-forwards)."""
        return self.run(sys.executable, "-c", code, timeout=timeout).stdout

    def background(self, *command: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["bash", str(SCRIPT), "exec", str(self.dir), "--", *command],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 180, namespace: str | None = None
                 ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                state = self.kubectl("get", "pods,pvc,logdirs,topics", "-o", "wide", "-n", namespace,
                                     check=False) if namespace else ""
                pytest.fail(f"timed out after {timeout:g}s waiting for {what}\n{state}", pytrace=False)
            time.sleep(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The first test to request ``node`` pays for the build (cold: tens of minutes): pytest-timeout's
    per-test limit applies to the test functions only; the fixture bounds its own subprocesses."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if "node" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(None, func_only=True))


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    state = tmp_path_factory.mktemp("k8s-node")
    env = {**os.environ, "K8S_NODE_OWNER_PID": str(os.getpid())}
    build = subprocess.run(["bash", str(SCRIPT), "build"], capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                           env=env, check=False)
    if build.returncode != 0:
        pytest.fail(f"scripts/k8s-node build failed\n{build.stderr[-6000:]}", pytrace=False)
    started = subprocess.run(["bash", str(SCRIPT), "start", str(state)], capture_output=True, text=True,
                             timeout=START_TIMEOUT, env=env, check=False)
    try:
        if started.returncode != 0:
            pytest.fail(f"scripts/k8s-node start failed\n{started.stderr[-6000:]}", pytrace=False)
        values = dict(line.split("=", 1) for line in started.stdout.splitlines() if "=" in line)
        yield Node(state, values)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(state)], check=False, timeout=300)
