"""A real single-node Apache Kafka broker (KRaft, broker + controller in one JVM) from the pinned jars.

Not a test module: broker interop tests build one ``KafkaBroker`` per module and
start, stop and restart it around what they do to its log directory::

    broker = KafkaBroker(kafka_toolchain, tmp_path / "broker")
    broker.start()                      # formats the directory on first use
    broker.create_topic("t", {"retention.ms": "-1"})
    ...                                  # kafka-python clients on broker.bootstrap
    broker.stop()                        # SIGTERM: controlled shutdown, clean-shutdown marker
    ...                                  # read or rewrite broker.log_dir
    broker.start(**{"log.cleaner.enable": "false"})

The broker listens on loopback only (PLAINTEXT for clients, CONTROLLER for its own
quorum), on free ports chosen at every start. The quorum is static
(``controller.quorum.voters``), so a restart on other ports finds its metadata log
as it left it. Topics are never created automatically. The JVM gets a small heap and
a quick-start compiler setting; Kafka logs only warnings (the slf4j binding in the
pinned jars is slf4j-simple; a log4j2 configuration at WARN is passed too, for the
log4j2 parts of Kafka 4).

There is no skip: without Java or the jars, the ``kafka_toolchain`` fixture fails with
the toolchain script's own error, and ``start`` fails with the broker's output.
"""

from __future__ import annotations

import base64
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_tools import KafkaToolchain, KafkaToolchainError

MAIN_CLASS = "kafka.Kafka"
# The storage tool is Scala (core) in every 3.x/4.x release; org.apache.kafka.tools.StorageTool is a
# newer home it may move to.
STORAGE_TOOL_CLASSES = ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool")

START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
HEAP = "-Xmx512m"
JVM_OPTIONS = (
    HEAP,
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # C1 only: starts faster; the broker does little work here
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
)

LOG4J2_PROPERTIES = """\
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""

# Everything a single-node test broker needs; per-start overrides go on top.
BASE_PROPERTIES: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "num.replica.fetchers": "1",
    # The cleaner wakes up every 100 ms instead of 15 s; its buffer is small (Kafka's minimum is 1 MiB per thread).
    "log.cleaner.backoff.ms": "100",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    "log.cleaner.io.buffer.size": str(512 * 1024),
    # log.flush.* stay at Kafka's defaults (flush on roll and at shutdown only).
}


class KafkaBrokerError(RuntimeError):
    """The broker could not be formatted, started or stopped; the message carries its output."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nobody listens on right now."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphaned JVM if pytest is killed
    except OSError:
        pass


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaToolchainError("java is not on PATH (the Kafka broker needs Java 17+)")
    return java


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "KAFKA_OPTS")}


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "(no output)"
    return text[-limit:]


def _random_cluster_id() -> str:
    # As Kafka's Uuid.randomUuid: never one starting with "-", which kafka-storage's argument
    # parser would take for an option (1 in 64 ids; it failed CI once).
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not found.startswith("-"):
            return found


class KafkaBroker:
    """One broker + controller node whose single log directory is ``log_dir``."""

    def __init__(self, toolchain: KafkaToolchain, base_dir: Path, *, log_dir: Path | None = None,
                 log_levels: Mapping[str, str] | None = None) -> None:
        """``log_dir`` defaults to a new directory under ``base_dir``; an existing, formatted one (a copy of
        another broker's) is started as it is."""
        self.toolchain = toolchain
        self.base_dir = base_dir
        self.log_dir = log_dir if log_dir is not None else base_dir / "kafka-logs"
        self.config_path = base_dir / "server.properties"
        self.log4j2_path = base_dir / "log4j2.properties"
        # slf4j-simple levels for single loggers, e.g. {"org.apache.kafka.storage.internals.log.LogLoader": "info"}
        self.log_levels = dict(log_levels or {})
        self.cluster_id = _random_cluster_id()
        self.port: int | None = None
        self.controller_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._formatted = (self.log_dir / "meta.properties").exists()
        self._output: Path | None = None
        base_dir.mkdir(parents=True, exist_ok=True)
        self.log4j2_path.write_text(LOG4J2_PROPERTIES, encoding="utf-8")

    # -- configuration -------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise KafkaBrokerError("the broker has not been started")
        return f"127.0.0.1:{self.port}"

    def _write_properties(self, overrides: Mapping[str, object]) -> None:
        assert self.port is not None and self.controller_port is not None
        props = dict(BASE_PROPERTIES)
        props.update({
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
        })
        props.update({k: str(v) for k, v in overrides.items()})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")

    def _jvm(self, main_class: str, args: list[str]) -> list[str]:
        levels = [f"-Dorg.slf4j.simpleLogger.log.{name}={level}" for name, level in self.log_levels.items()]
        return [_java(), *JVM_OPTIONS, *levels, f"-Dlog4j2.configurationFile={self.log4j2_path}",
                "-cp", self.toolchain.classpath, main_class, *args]

    def _format(self) -> None:
        """``kafka-storage.sh format -t <cluster id> -c server.properties`` (static quorum: no --standalone)."""
        from kafka_tools import _find_main_class

        storage_tool = _find_main_class(self.toolchain.libs, STORAGE_TOOL_CLASSES)
        command = self._jvm(storage_tool, ["format", "-t", self.cluster_id, "-c", str(self.config_path)])
        proc = subprocess.run(command, capture_output=True, timeout=START_TIMEOUT_S, env=_clean_env(), check=False)
        if proc.returncode != 0 or not (self.log_dir / "meta.properties").exists():
            raise KafkaBrokerError(
                f"formatting {self.log_dir} failed (exit status {proc.returncode})\ncommand: {' '.join(command)}\n"
                f"--- stdout ---\n{proc.stdout.decode(errors='replace')}\n"
                f"--- stderr ---\n{proc.stderr.decode(errors='replace')}")
        self._formatted = True

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, **overrides: object) -> None:
        """(Re)start the broker with ``overrides`` on top of the base properties; wait until it serves."""
        if self.running:
            self.stop()
        self.port, self.controller_port = free_ports(2)
        self._write_properties(overrides)
        if not self._formatted:
            self._format()
        self.starts += 1
        self._output = self.base_dir / f"broker-{self.starts}.log"
        with open(self._output, "wb") as out:
            self.process = subprocess.Popen(
                self._jvm(MAIN_CLASS, [str(self.config_path)]), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env=_clean_env(), preexec_fn=_die_with_parent)
        try:
            self._wait_until_serving()
        except BaseException:
            self.kill()
            raise

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.port is not None
        while not _port_open(self.port):
            self._check_alive("while starting")
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"the broker did not listen on {self.bootstrap} within {START_TIMEOUT_S} s\n"
                                       f"{self.describe_output()}")
            time.sleep(0.1)
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive("while starting")
            try:
                admin = self.admin()
                try:
                    admin.list_topics()
                    brokers = admin.describe_cluster().get("brokers", [])
                    if any(not b.get("is_fenced", False) for b in brokers):
                        return
                finally:
                    admin.close()
            except Exception as error:  # noqa: BLE001 - any client error means "not yet"
                last_error = error
            time.sleep(0.2)
        raise KafkaBrokerError(f"the broker on {self.bootstrap} did not serve clients within {START_TIMEOUT_S} s "
                               f"(last client error: {last_error!r})\n{self.describe_output()}")

    def _check_alive(self, when: str) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise KafkaBrokerError(f"the broker exited with status {self.process.returncode} {when}\n"
                                   f"{self.describe_output()}")

    def stop(self) -> int:
        """SIGTERM (controlled shutdown) and wait; fails unless the broker left its clean-shutdown marker."""
        if self.process is None:
            return 0
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise KafkaBrokerError(f"the broker did not stop within {STOP_TIMEOUT_S} s of SIGTERM\n"
                                       f"{self.describe_output()}") from None
        # The JVM exits 143 (128 + SIGTERM) after its shutdown hook has run.
        if process.returncode not in (0, 143):
            raise KafkaBrokerError(f"the broker exited with status {process.returncode} on SIGTERM\n"
                                   f"{self.describe_output()}")
        if not (self.log_dir / ".kafka_cleanshutdown").exists():
            raise KafkaBrokerError(f"the broker stopped without writing {self.log_dir / '.kafka_cleanshutdown'}\n"
                                   f"{self.describe_output()}")
        return process.returncode

    def kill(self) -> None:
        """SIGKILL, for cleanup after a failure (no clean shutdown)."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None

    def describe_output(self) -> str:
        if self._output is None:
            return "(the broker was never started)"
        return f"--- broker output ({self._output}, last part) ---\n{_tail(self._output)}"

    def output(self) -> str:
        return "" if self._output is None else self._output.read_text(encoding="utf-8", errors="replace")

    # -- clients -------------------------------------------------------------------------
    def admin(self) -> Any:
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="stratalog-tests",
                                request_timeout_ms=30_000)

    def create_topic(self, name: str, configs: Mapping[str, object] | None = None, partitions: int = 1) -> None:
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in
                                                                              (configs or {}).items()})])
        finally:
            admin.close()
        for partition in range(partitions):
            self.wait_for_leader(name, partition)

    def wait_for_leader(self, topic: str, partition: int = 0, timeout_s: float = 30) -> int | None:
        """Wait until ``topic-partition`` has a leader; returns its leader epoch (None if the client hides it)."""
        deadline = time.monotonic() + timeout_s
        admin = self.admin()
        try:
            while True:
                described = admin.describe_topics([topic])
                for info in described:
                    for p in info.get("partitions", []):
                        # kafka-python 3 names the fields as the protocol does; 2.x used shorter names.
                        index = p.get("partition_index", p.get("partition"))
                        leader = p.get("leader_id", p.get("leader", -1))
                        if index == partition and leader >= 0 and info.get("error_code", 0) == 0:
                            return p.get("leader_epoch")
                if time.monotonic() > deadline:
                    raise KafkaBrokerError(f"{topic}-{partition} has no leader after {timeout_s} s: {described}\n"
                                           f"{self.describe_output()}")
                time.sleep(0.1)
        finally:
            admin.close()

    def producer(self, **config: Any) -> Any:
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, **config)

    def consumer(self, **config: Any) -> Any:
        from kafka import KafkaConsumer

        settings: dict[str, Any] = {"group_id": None, "enable_auto_commit": False, "auto_offset_reset": "earliest",
                                    "fetch_max_wait_ms": 100}
        settings.update(config)
        return KafkaConsumer(bootstrap_servers=self.bootstrap, **settings)

    def read_partition(self, topic: str, partition: int = 0, timeout_s: float = 60) -> list[Any]:
        """Every record of ``topic-partition`` from its start offset to its end offset, through a consumer."""
        from kafka import TopicPartition

        tp = TopicPartition(topic, partition)
        consumer = self.consumer()
        try:
            consumer.assign([tp])
            end = consumer.end_offsets([tp])[tp]
            consumer.seek_to_beginning(tp)
            records: list[Any] = []
            deadline = time.monotonic() + timeout_s
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise KafkaBrokerError(f"reading {tp} stalled at offset {consumer.position(tp)} of {end}")
                records.extend(consumer.poll(timeout_ms=500).get(tp, []))
            return records
        finally:
            consumer.close()

    def close(self) -> None:
        """Fixture teardown: stop cleanly if possible, else kill."""
        if self.running:
            try:
                self.stop()
            except KafkaBrokerError:
                self.kill()
