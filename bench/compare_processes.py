"""The children of ``bench.compare``: Kafka's side in a JVM running our harness against Kafka's own
classes, stratalog's in a Python process, each reporting one JSON line; and the progress lines.

The harness (``bench/kafka/harness/KafkaLogBench.java``) is compiled at run time against the pinned
jars (``scripts/kafka-toolchain``) into a cache outside the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import compare_report

REPO = Path(__file__).resolve().parent.parent
HARNESS_SOURCE = REPO / "bench" / "kafka" / "harness" / "KafkaLogBench.java"
HARNESS_CLASS = "KafkaLogBench"
KAFKA_VERSION = compare_report.KAFKA_VERSION
# The JVM settings kafka-server-start.sh / kafka-run-class.sh give a broker (KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS), used for the harness and the broker alike.
KAFKA_JVM_OPTIONS = (
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)
CHILD_TIMEOUT_S = 3600


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- processes ------------------------------------------------------------------------------------

def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "KAFKA_OPTS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _last_json_line(stdout: str, command: Sequence[str], stderr: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise RuntimeError(f"no JSON result from {' '.join(command)}\n--- stdout ---\n{stdout[-3000:]}\n"
                       f"--- stderr ---\n{stderr[-5000:]}")


def run_json(command: Sequence[str]) -> dict[str, Any]:
    """Run ``command`` to completion; its last stdout line that is a JSON object is the result."""
    done = subprocess.run(list(command), cwd=REPO, env=clean_env(), capture_output=True, text=True,
                          timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}\n--- stdout ---\n"
                           f"{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-5000:]}")
    return _last_json_line(done.stdout, command, done.stderr)


def run_json_then_kill(command: Sequence[str]) -> dict[str, Any]:
    """Start ``command``, read its one JSON line, then SIGKILL it (the unclean shutdown)."""
    err_path = Path(tempfile.mkstemp(prefix="stratalog-compare-", suffix=".err")[1])
    try:
        with open(err_path, "w") as err:
            child = subprocess.Popen(list(command), cwd=REPO, env=clean_env(), stdout=subprocess.PIPE,
                                     stderr=err, text=True)
        assert child.stdout is not None
        line = child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        if not line.startswith("{"):
            raise RuntimeError(f"{' '.join(command)} reported no result (exit {child.returncode}):\n{line}"
                               f"{err_path.read_text(errors='replace')[-5000:]}")
        if child.returncode != -signal.SIGKILL:
            raise RuntimeError(f"{' '.join(command)} ended with {child.returncode}, not by SIGKILL")
        result: dict[str, Any] = json.loads(line)
        return result
    finally:
        err_path.unlink(missing_ok=True)


# -- Kafka's side: the jars and our harness -------------------------------------------------------

def kafka_libs() -> Path:
    done = subprocess.run(["bash", str(REPO / "scripts" / "kafka-toolchain")], capture_output=True, text=True,
                          timeout=900, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not Path(lines[-1]).is_dir():
        raise SystemExit(f"scripts/kafka-toolchain failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    return Path(lines[-1])


def compile_harness(libs: Path) -> Path:
    """javac the harness into a cache directory keyed by its source and the jars (never into the repo)."""
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit("javac is not on PATH (the Kafka harness is compiled at run time; needs a JDK 17+)")
    source = HARNESS_SOURCE.read_bytes()
    key = hashlib.sha256(source + str(libs).encode() + b"\0" + KAFKA_VERSION.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("STRATALOG_CACHE", Path.home() / ".cache" / "stratalog"))
    classes = cache / "kafka-bench-harness" / key
    if (classes / f"{HARNESS_CLASS}.class").exists():
        return classes
    tmp = classes.with_name(f"{key}.tmp.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    done = subprocess.run([javac, "-nowarn", "-cp", f"{libs}/*", "-d", str(tmp), str(HARNESS_SOURCE)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"javac failed on {HARNESS_SOURCE}:\n{done.stdout}{done.stderr}")
    shutil.rmtree(classes, ignore_errors=True)
    tmp.rename(classes)
    return classes


@dataclass(frozen=True)
class KafkaHarness:
    libs: Path
    classes: Path

    def command(self, subcommand: str, *args: str) -> list[str]:
        java = shutil.which("java") or "java"
        return [java, *KAFKA_JVM_OPTIONS, "-cp", f"{self.classes}{os.pathsep}{self.libs}/*", HARNESS_CLASS,
                subcommand, *args]
