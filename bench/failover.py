"""Failover through the operator: from a leader agent's SIGKILL to the first acknowledged produce on its successor.

``python -m bench.failover [--trials 10] [--session-timeout-ms 9000] [--heartbeat-interval-ms 2000] [--json F]``

A real kube-apiserver and etcd (``scripts/k8s-testbed``), the controller and three LogDir agents
as processes, one Topic of 1 partition × 3 replicas with ``min.insync.replicas=2``. A producer
sends ``acks=all`` records in a loop to whichever agent accepts them. Each trial SIGKILLs the
leader's agent and measures the time until an acknowledged produce from another agent; the killed
agent then restarts and rejoins the ISR before the next trial.

What that time is made of: the Lease lapsing (``--session-timeout-ms``, rounded up to whole
seconds, as Kafka's ``broker.session.timeout.ms``), the controller noticing on its next election
tick (1 s), the record written, the new leader's agent reading it (watch event), and the first
acks=all produce completing. Kafka's defaults for the same detection are
``broker.session.timeout.ms=9000`` and ``broker.heartbeat.interval.ms=2000``, which this bench
uses unless told otherwise; Kafka's failover after a broker crash cannot be shorter than its
session timeout either.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kube.roles import Agent, Operator, logdir_manifests, wait_for  # noqa: E402
from server_harness import kafka_batch  # noqa: E402

NS = "bench-failover"
LOGDIRS = ("dir-a", "dir-b", "dir-c")


def start_testbed(state: Path) -> dict[str, str]:
    testbed = REPO / "scripts" / "k8s-testbed"
    env = {**os.environ, "K8S_TESTBED_OWNER_PID": str(os.getpid())}
    bin_dir = subprocess.run(["bash", str(testbed), "build"], check=True, capture_output=True, text=True,
                             env=env).stdout.strip().splitlines()[-1]
    out = subprocess.run(["bash", str(testbed), "start", str(state)], check=True, capture_output=True, text=True,
                         env=env).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    return {**clean, "KUBECONFIG": values["KUBECONFIG"], "PATH": f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}",
            "HOME": str(state)}


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> str:
    return subprocess.run(["kubectl", *args], input=input, check=True, capture_output=True, text=True,
                          env=env).stdout


def leader(env: dict[str, str]) -> tuple[str | None, int]:
    topic = json.loads(kubectl(env, "-n", NS, "get", "topic", "t", "-o", "json"))
    [record] = (topic.get("status") or {}).get("partitions") or [{"leader": None, "isr": []}]
    return record["leader"], len(record["isr"])


class Producer:
    """acks=all records in a loop, to whichever agent acknowledges; the time of every acknowledgement."""

    def __init__(self, agents: dict[str, Agent]) -> None:
        self.agents = agents
        self.acks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        session = requests.Session()
        batch = kafka_batch([(None, b"x" * 100)])
        current = LOGDIRS[0]
        while not self._stop.is_set():
            agent = self.agents[current]
            try:
                reply = session.post(f"{agent.base}/v1/topics/t/partitions/0/records", data=batch,
                                     params={"acks": "all"}, timeout=5,
                                     headers={"Content-Type": "application/vnd.kafka.record-batch"})
                if reply.status_code == 200:
                    self.acks.append((time.monotonic(), current))
                    continue
            except requests.RequestException:
                pass
            current = LOGDIRS[(LOGDIRS.index(current) + 1) % len(LOGDIRS)]   # ask the next agent
            time.sleep(0.005)


def run(trials: int, session_timeout_ms: int, heartbeat_interval_ms: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        root = Path(tmp)
        env = start_testbed(root / "testbed")
        kubectl(env, "apply", "-f", str(REPO / "crds"))
        kubectl(env, "create", "namespace", NS)
        operator = Operator(env, NS, root / "operator.log").start()
        args = ("--broker-session-timeout-ms", str(session_timeout_ms),
                "--broker-heartbeat-interval-ms", str(heartbeat_interval_ms))
        agents = {n: Agent(env, NS, n, [root / n], root / f"{n}.log", *args).start() for n in LOGDIRS}
        manifests = logdir_manifests(LOGDIRS)
        manifests.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\nmetadata: {name: t}\n"
                         "spec: {partitions: 1, replicas: 3, config: {min.insync.replicas: 2}}\n")
        kubectl(env, "-n", NS, "apply", "-f", "-", input="---\n".join(manifests))
        producer = Producer(agents).start()
        times: list[float] = []
        try:
            for trial in range(trials):
                wait_for("all three replicas in sync", lambda: leader(env)[1] == 3 and leader(env)[0], timeout=120)
                before = len(producer.acks)
                wait_for("acknowledged produces", lambda: len(producer.acks) > before + 20, timeout=60)
                victim = leader(env)[0]
                assert victim is not None
                killed = time.monotonic()
                agents[victim].kill()
                first = wait_for("an acknowledged produce on the new leader", lambda: next(
                    (t for t, who in reversed(producer.acks) if t > killed and who != victim), None), timeout=120)
                times.append(first - killed)
                print(f"trial {trial}: {victim} killed, new leader acknowledging after {first - killed:.2f} s",
                      file=sys.stderr)
                agents[victim].start()
        finally:
            producer.stop()
            for role in (*agents.values(), operator):
                role.stop()
            subprocess.run(["bash", str(REPO / "scripts" / "k8s-testbed"), "stop", str(root / "testbed")],
                           check=False, capture_output=True)
    ordered = sorted(times)
    return {"trials": trials, "sessionTimeoutMs": session_timeout_ms, "heartbeatIntervalMs": heartbeat_interval_ms,
            "seconds": {"min": ordered[0], "median": statistics.median(ordered),
                        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "max": ordered[-1]},
            "all": [round(t, 3) for t in times],
            "kafkaDefaults": {"broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--session-timeout-ms", type=int, default=9000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.trials, args.session_timeout_ms, args.heartbeat_interval_ms)
    s = result["seconds"]
    print(f"failover, session {args.session_timeout_ms} ms, {args.trials} trials: min {s['min']:.2f} s, "
          f"median {s['median']:.2f} s, p90 {s['p90']:.2f} s, max {s['max']:.2f} s "
          f"(Kafka's default session timeout: 9 s)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
