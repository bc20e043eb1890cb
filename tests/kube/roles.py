"""``stratalog operator`` and ``stratalog agent`` as real subprocesses against the test bed.

Started exactly as the chart and the StatefulSet start them (the console entry point),
with their logs in files the tests attach to failures. Waits poll a condition with a
deadline; nothing sleeps for a fixed time to be correct.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import requests
from prometheus_client.parser import text_string_to_metric_families

STRATALOG = [sys.executable, "-c", "import sys; from stratalog.cli import main; sys.exit(main())"]
_API = re.compile(r"API on (https?://[^\s]+)")
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2,
             logs: Sequence[Path] = ()) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` (with the logs) if it never does."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as error:   # the thing may not exist yet
            last = error
        else:
            if last:
                return last
        time.sleep(interval)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}\n{tails}")


class Role:
    def __init__(self, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.command = command
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Role:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._offset = offset
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no drain, no flush, no clean-shutdown marker."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # A hung stop: have it print every thread's stack to its log (faulthandler), then kill it.
            self.proc.send_signal(signal.SIGUSR2)   # an agent logs its asyncio tasks
            time.sleep(0.5)
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            self.proc.kill()
            return self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Operator(Role):
    def __init__(self, env: dict[str, str], namespace: str, log_path: Path, *args: str) -> None:
        self.port = free_port()
        super().__init__([*STRATALOG, "operator", "--namespace", namespace,
                          "--metrics-listen", f"127.0.0.1:{self.port}", *args], env, log_path)

    def start(self) -> Operator:
        super().start()
        wait_for("the operator's /healthz", self._healthy, timeout=60, logs=[self.log_path])
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
        return requests.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200

    def metrics(self) -> str:
        return requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text


class Agent(Role):
    def __init__(self, env: dict[str, str], namespace: str, logdir: str, data_dirs: Sequence[Path],
                 log_path: Path, *args: str) -> None:
        self.logdir = logdir
        self.data_dirs = [Path(d) for d in data_dirs]
        command = [*STRATALOG, "agent", "--logdir", logdir, "--namespace", namespace, "--listen", "127.0.0.1:0"]
        for d in self.data_dirs:
            command += ["--data-dir", str(d)]
        super().__init__(command + list(args), env, log_path)
        self.base = ""

    def start(self) -> Agent:
        super().start()
        return self.wait_ready()

    def wait_ready(self) -> Agent:
        """Wait for a started agent to listen and then to be ready (``start`` without the spawn)."""
        match = wait_for(f"agent {self.logdir} to listen", self._listening, timeout=60, logs=[self.log_path])
        self.base = match
        wait_for(f"agent {self.logdir} to be ready", lambda: requests.get(f"{self.base}/readyz", timeout=2).ok,
                 timeout=120, logs=[self.log_path])
        return self

    def _listening(self) -> str | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"agent exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
        found = _API.findall(self.log()[self._offset:])
        return found[-1] if found else None

    def produce(self, topic: str, partition: int, records: list[dict[str, Any]]) -> dict[str, Any]:
        r = requests.post(f"{self.base}/v1/topics/{topic}/partitions/{partition}/records",
                          json={"records": records}, timeout=30)
        assert r.status_code == 200, r.text
        result: dict[str, Any] = r.json()
        return result

    def consume(self, topic: str, partition: int, offset: int | None = None) -> list[dict[str, Any]]:
        """Every record from ``offset`` (default: the log start) to the end."""
        out: list[dict[str, Any]] = []
        while True:
            query: dict[str, int] = {"maxBytes": 1 << 20}
            if offset is not None:
                query["offset"] = offset
            r = requests.get(f"{self.base}/v1/topics/{topic}/partitions/{partition}/records",
                             params=query, timeout=30)
            assert r.status_code == 200, r.text
            body = r.json()
            records = body.get("records") or []
            if not records:
                return out
            out.extend(records)
            offset = records[-1]["offset"] + 1

    def metrics(self) -> str:
        return requests.get(f"{self.base}/metrics", timeout=5).text


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metrics_text: str) -> Samples:
    """A Prometheus text page as {(sample name, sorted labels): value} (prometheus_client's parser)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics_text) for s in family.samples}


def api_writes(metrics_text: str, prefix: str) -> Samples:
    """``<prefix>_api_writes_total`` by labels, Lease renewals aside (an agent's heartbeat writes by
    design; the issue's "flat at rest" excludes them)."""
    return {k: v for k, v in samples(metrics_text).items()
            if k[0] == f"{prefix}_api_writes_total" and ("kind", "Lease") not in k[1]}


def writes_total(metrics_text: str, prefix: str) -> float:
    """All of ``api_writes``: the API writes of one role, Lease renewals aside."""
    return sum(api_writes(metrics_text, prefix).values())


def logdir_manifests(names: Sequence[str]) -> list[str]:
    """One LogDir of one 1 GiB volume per name (the agents run beside them on local directories)."""
    return ["apiVersion: stratalog.io/v1alpha1\nkind: LogDir\n"
            f"metadata: {{name: {name}}}\nspec: {{volumes: [{{name: data-0, size: 1Gi}}]}}\n" for name in names]


def conflicts_total(metrics_text: str, prefix: str) -> float:
    """Sum of ``<prefix>_api_conflicts_total`` samples: writes the API server refused with 409."""
    return sum(v for (name, _), v in samples(metrics_text).items() if name == f"{prefix}_api_conflicts_total")


def kubectl_json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl_run(*args, "-o", "json").stdout)
