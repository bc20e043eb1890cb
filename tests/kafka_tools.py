"""Running Apache Kafka's own tools (from the jars ``scripts/kafka-toolchain`` fetches) against our files.

Not a test module: interop tests import the ``kafka_toolchain`` fixture from here
(``from kafka_tools import kafka_toolchain``). The fixture runs the toolchain
script once per test session; the script itself caches the jars outside the
repository (``${STRATALOG_CACHE:-~/.cache/stratalog}/kafka-<version>/libs``), so
only the very first run on a machine downloads anything.

There is deliberately no skip: a machine without Java, Maven or access to Maven
Central fails these tests with the script's own error message, so a CI job can
never pass by silently not checking against Kafka.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOLCHAIN_SCRIPT = REPO / "scripts" / "kafka-toolchain"
# The first run downloads ~100 jars; later runs print the cached path at once.
TOOLCHAIN_TIMEOUT_S = 900
TOOL_TIMEOUT_S = 300

# Java's stdout follows the locale (a POSIX locale turns every non-ASCII character into '?'),
# so force UTF-8: key, value and header-key strings printed by the tools must be comparable.
JVM_OPTIONS = (
    "-Dfile.encoding=UTF-8",
    "-Dsun.stdout.encoding=UTF-8",
    "-Dsun.stderr.encoding=UTF-8",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)

# Kafka moved DumpLogSegments from core (Scala) to the tools module (Java); use whichever the pin has.
_DUMP_LOG_SEGMENTS_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")


class KafkaToolchainError(RuntimeError):
    """The Kafka jars could not be fetched or a Kafka tool could not be started."""


@dataclass(frozen=True)
class ToolResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        # The --files list of a whole data directory is long; show its start and size only.
        shown = " ".join(a if len(a) <= 300 else f"{a[:200]}...({a.count(',') + 1} files)" for a in self.args)
        return (f"command: {shown}\nexit status: {self.returncode}\n"
                f"--- stderr ---\n{self.stderr}--- stdout (first 4000 chars) ---\n{self.stdout[:4000]}")


@dataclass(frozen=True)
class KafkaToolchain:
    libs: Path
    version: str

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @functools.cached_property
    def dump_log_segments_class(self) -> str:
        return _find_main_class(self.libs, _DUMP_LOG_SEGMENTS_CLASSES)

    def java(self, main_class: str, args: Sequence[str], *, timeout: float = TOOL_TIMEOUT_S,
             input: bytes | None = None) -> ToolResult:
        java = shutil.which("java")
        if java is None:
            raise KafkaToolchainError("java is not on PATH (Kafka's tools need Java 17+)")
        command = (java, *JVM_OPTIONS, "-cp", self.classpath, main_class, *args)
        env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")}
        proc = subprocess.run(command, capture_output=True, timeout=timeout, env=env, check=False, input=input)
        return ToolResult(command, proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))

    def dump_log_segments(self, files: Sequence[Path | str], *flags: str) -> ToolResult:
        """Kafka's ``kafka-dump-log.sh --files f1,f2,... <flags>``."""
        return self.java(self.dump_log_segments_class, ["--files", ",".join(str(f) for f in files), *flags])


def _find_main_class(libs: Path, candidates: Sequence[str]) -> str:
    wanted = {c.replace(".", "/") + ".class": c for c in candidates}
    found: dict[str, str] = {}
    for jar in sorted(libs.glob("*.jar")):
        with zipfile.ZipFile(jar) as archive:
            for name in wanted.keys() & set(archive.namelist()):
                found[wanted[name]] = str(jar)
    for candidate in candidates:
        if candidate in found:
            return candidate
    raise KafkaToolchainError(f"none of {list(candidates)} is in the jars of {libs}")


@functools.cache
def kafka_toolchain_or_error() -> KafkaToolchain:
    """Run ``scripts/kafka-toolchain`` (once per process) and return the fetched Kafka."""
    try:
        proc = subprocess.run(["bash", str(TOOLCHAIN_SCRIPT)], capture_output=True, text=True,
                              timeout=TOOLCHAIN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        raise KafkaToolchainError(f"{TOOLCHAIN_SCRIPT} did not finish in {TOOLCHAIN_TIMEOUT_S} s; "
                                  f"stderr so far:\n{e.stderr}") from None
    if proc.returncode != 0:
        raise KafkaToolchainError(f"{TOOLCHAIN_SCRIPT} failed with exit status {proc.returncode}:\n"
                                  f"{proc.stderr}{proc.stdout}")
    lines = proc.stdout.strip().splitlines()
    libs = Path(lines[-1]) if lines else None
    if libs is None or not libs.is_dir():
        raise KafkaToolchainError(f"{TOOLCHAIN_SCRIPT} printed no libs directory on its last line:\n"
                                  f"stdout: {proc.stdout!r}\nstderr: {proc.stderr}")
    version = libs.parent.name.removeprefix("kafka-")
    return KafkaToolchain(libs, version)


def kafka_classpath() -> str:
    """The ``java -cp`` value for the pinned Kafka (runs the toolchain script on first use)."""
    return kafka_toolchain_or_error().classpath


@pytest.fixture(scope="session")
def kafka_toolchain() -> KafkaToolchain:
    """The pinned Apache Kafka's jars; fails (never skips) when they cannot be had."""
    try:
        return kafka_toolchain_or_error()
    except KafkaToolchainError as error:
        pytest.fail(f"Apache Kafka toolchain unavailable: {error}", pytrace=False)
