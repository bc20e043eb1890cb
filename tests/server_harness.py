"""A real ``stratalog serve`` subprocess for the service tests, and small clients of it.

The server is started exactly as an operator would (the console entry point,
``--listen 127.0.0.1:0`` so the kernel picks a free port, which the server
prints), its log goes to a file the test can show on failure, and the test
waits for ``/readyz``. Nothing here sleeps for a fixed time: every wait polls a
condition, bounded only so a broken server fails the test instead of hanging.
"""

from __future__ import annotations

import hashlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import requests
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

RECORD_BATCH = "application/vnd.kafka.record-batch"
DATA_ROUTE = re.compile(r"/v1/topics/[^/?]+/partitions/[^/?]+/records")   # the path, query left out
STARTUP_BOUND_S = 60.0
_LISTENING = re.compile(r"listening on (https?://[^\s]+)")
_KAFKA_LISTENING = re.compile(r"listening for (?:Kafka clients|followers \(replication only\)) on [^\s]+ "
                              r"\(advertised as ([^\s);]+)[;)]")
# The ``stratalog`` console script, run with this interpreter (whatever venv the tests run in).
STRATALOG = [sys.executable, "-c", "import sys; from stratalog.cli import main; sys.exit(main())"]


class Server:
    def __init__(self, data_dirs: Sequence[Path], *args: str, log_path: Path | None = None,
                 ca: Path | None = None, token: str | None = None) -> None:
        """``ca``: the CA the test's session trusts (a TLS server); ``token``: the bearer token it presents."""
        self.data_dirs = [Path(d) for d in data_dirs]
        self.args = list(args)
        self.log_path = log_path or self.data_dirs[0].parent / f"serve-{id(self)}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""
        self.ca, self.token = ca, token
        self.session = self._new_session()
        # The data route on connections of its own, which serve/direct answers without aiohttp (a
        # connection that starts with another route is aiohttp's for good): both paths are tested.
        self.data_session = self._new_session()

    def _new_session(self) -> requests.Session:
        session = requests.Session()
        if self.ca is not None:
            session.verify = str(self.ca)
            session.trust_env = False   # else REQUESTS_CA_BUNDLE in the environment overrides verify
        if self.token is not None:
            session.headers["Authorization"] = f"Bearer {self.token}"
        return session

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, *, wait_ready: bool = True) -> Server:
        command = [*STRATALOG, "serve", "--listen", "127.0.0.1:0"]
        for directory in self.data_dirs:
            command += ["--data-dir", str(directory)]
        command += self.args
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.base = self._wait_for_address()
        if wait_ready:
            self.wait_ready()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def open_files(self, settle_to: list[str] | None = None) -> list[str]:
        """The files the server holds open, once per descriptor (its sockets and pipes left out).
        ``settle_to``: wait up to 5 s for them to become these (an answer's descriptor is closed
        just after its last byte went, and the client may look in between); a leaked one stays."""
        assert self.proc is not None
        deadline = time.monotonic() + 5
        while True:
            targets = []
            for fd in Path(f"/proc/{self.proc.pid}/fd").iterdir():
                try:
                    targets.append(str(fd.readlink()))
                except FileNotFoundError:
                    continue   # closed while listed (a connection's socket, most likely)
            files = sorted(t for t in targets if t.startswith("/"))
            if settle_to is None or files == settle_to or time.monotonic() > deadline:
                return files
            time.sleep(0.05)

    def kafka_address(self) -> str:
        """HOST:PORT of the Kafka-protocol listener (started with ``--kafka-listen``), once ready."""
        found = _KAFKA_LISTENING.findall(self.log_path.read_bytes()[self._log_offset:].decode(errors="replace"))
        assert found, f"stratalog serve has no Kafka listener:\n{self.log()}"
        return str(found[-1])

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + STARTUP_BOUND_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[self._log_offset:].decode(errors="replace")
            found = _LISTENING.search(text)
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                raise AssertionError(f"stratalog serve exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"stratalog serve did not listen within {STARTUP_BOUND_S} s:\n{self.log()}")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_BOUND_S
        while time.monotonic() < deadline:
            try:
                if self.session.get(self.url("/readyz"), timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"stratalog serve exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"stratalog serve was not ready within {STARTUP_BOUND_S} s:\n{self.log()}")

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self.session.close()
        self.session = self._new_session()
        return code

    def kill(self) -> int:
        return self.terminate(signal.SIGKILL)

    def rss_bytes(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/<pid>/status")

    # -- requests -----------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return self.base + path

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 120)
        session = self.data_session if DATA_ROUTE.fullmatch(path) else self.session
        return session.request(method, self.url(path), **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        assert response.status_code in (200, 201), f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def create_topic(self, name: str, partitions: int = 1, **configs: object) -> Any:
        return self.ok("POST", "/v1/topics", json={"name": name, "partitions": partitions,
                                                  "configs": {k.replace("_", "."): v for k, v in configs.items()}})

    def produce_raw(self, topic: str, partition: int, batch: bytes, **query: str) -> requests.Response:
        return self.post(f"/v1/topics/{topic}/partitions/{partition}/records", data=batch,
                         headers={"Content-Type": RECORD_BATCH}, params=query)

    def produce_json(self, topic: str, partition: int, records: list[dict[str, Any]], **query: str
                     ) -> requests.Response:
        return self.post(f"/v1/topics/{topic}/partitions/{partition}/records", json={"records": records},
                         params=query)

    def fetch_json(self, topic: str, partition: int, offset: int | None = None, **query: Any) -> Any:
        params = dict(query)
        if offset is not None:
            params["offset"] = offset
        return self.ok("GET", f"/v1/topics/{topic}/partitions/{partition}/records", params=params)

    def read_all(self, topic: str, partition: int, offset: int | None = None) -> list[dict[str, Any]]:
        """Every record from ``offset`` (default: the log start) up to the high watermark."""
        out: list[dict[str, Any]] = []
        while True:
            reply = self.fetch_json(topic, partition, offset)
            out.extend(reply["records"])
            if reply["nextOffset"] >= reply["highWatermark"] or reply["nextOffset"] == offset:
                return out
            offset = reply["nextOffset"]

    def stats(self, topic: str, partition: int) -> Any:
        return self.ok("GET", f"/v1/topics/{topic}/partitions/{partition}")


# -- kafka-python: an independent producer and parser of v2 batches -----------------------------
def kafka_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, compression: int = 0,
                timestamp: int | None = None, headers: Sequence[tuple[str, bytes]] = ()) -> bytes:
    """A producer batch as kafka-python's producer builds it (offsets 0..n-1)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    now = int(time.time() * 1000) if timestamp is None else timestamp
    for offset, (key, value) in enumerate(records):
        builder.append(offset, now + offset, key, value, list(headers))
    return bytes(builder.build())


def kafka_parse(data: bytes) -> Iterator[tuple[DefaultRecordBatch, Any]]:
    """(batch, record) pairs of a fetch response, decoded by kafka-python (CRC checked)."""
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "kafka-python: CRC mismatch"
        for record in batch:
            yield batch, record


# -- on-disk state ------------------------------------------------------------------------------
def disk_state(root: Path, prefix: str = "") -> dict[str, str]:
    """What a refused request must not change: the directory's entries, its top-level files (checkpoints,
    meta.properties) and every file of the partition directories whose names start with ``prefix``."""
    out = {}
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            out[entry.name] = "<dir>"
            if not entry.name.startswith(prefix):
                continue
            for path in sorted(entry.iterdir()):
                out[f"{entry.name}/{path.name}"] = hashlib.sha1(path.read_bytes()).hexdigest()
        elif entry.name != ".lock":
            out[entry.name] = hashlib.sha1(entry.read_bytes()).hexdigest()
    return out
