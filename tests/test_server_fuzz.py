"""Property-based fuzzing of every API operation with schemathesis, against a live ``stratalog serve``.

schemathesis takes the OpenAPI document (built by the server's own code and
checked equal to the one the server serves) and sends, for each operation,
schema-valid and schema-violating requests (examples, boundary values, random
data). Checked for each answer: never a 5xx, the status / content type /
headers / body conform to the document, and a request that violates the
document is refused with a 4xx. Half of the well-formed paths are aimed at the
topics ``demo`` and ``compacted``, which exist, so fuzzed produce, fetch and
admin requests reach real partitions (the last test checks they did), not
only 404s.

Then the server is stopped (SIGTERM) and the directory it wrote must verify
clean with ``stratalog verify``, and every record of every partition must read
back through the engine with strictly increasing offsets.

Bounded: ``STRATALOG_FUZZ_EXAMPLES`` examples per operation (default 25: about
30 s; 1000 ran clean in 12 minutes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.config import SchemathesisConfig

from server_harness import RECORD_BATCH, STRATALOG, Server
from stratalog.storage.log_manager import open_log_manager
from stratalog.server.openapi import build_document
from stratalog.server.state import Settings

EXAMPLES = int(os.environ.get("STRATALOG_FUZZ_EXAMPLES", "25"))

# Raw batches travel as bytes, like application/octet-stream.
schemathesis.serializer.alias(RECORD_BATCH, "application/octet-stream")


# The limits the fuzzed server runs with. Small ones keep fuzzed topic creations and long polls cheap; the
# document publishes them, so schemathesis generates within (and just outside) exactly these bounds.
FUZZ_SETTINGS = Settings(max_fetch_wait_ms=100, max_partitions_per_topic=4)
CONFIG = SchemathesisConfig.from_dict({
    "checks": {
        # Kafka's rules a JSON schema cannot express (CRCs, config values, timestamp windows, offsets past the
        # end) refuse some schema-valid requests, by design with 400 / 413 / 416.
        "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404", "409", "413", "416"]},
    },
    # This server has no broker id: it takes no part in replication, so the replication operations refuse
    # any request, however well-formed, with NOT_LEADER_OR_FOLLOWER (421) -- there and only there.
    "operations": [{"include-path-regex": "^/v1/replication/", "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "400", "404", "409", "413", "416", "421"]}}}],
})
# Built in-process from the same code that serves /v1/openapi.json (schemathesis' lazy fixture loader does
# not run under pytest 9); the first test checks the served document is exactly this one.
schema = schemathesis.openapi.from_dict(build_document(FUZZ_SETTINGS), config=CONFIG)

EXISTING_TOPICS = ("demo", "compacted")  # two partitions each
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@schema.hook
def flatmap_path_parameters(context: schemathesis.HookContext, path_parameters: dict[str, Any] | None
                            ) -> st.SearchStrategy[dict[str, Any] | None]:
    """Aim half of the well-formed paths at partitions that exist, so fuzzing reaches the append and fetch
    paths instead of answering 404 to random names. Malformed values (negative cases) are left as generated;
    deleting topics keeps its random names, or the first example would delete the targets of all others."""
    operation = context.operation
    if not path_parameters or operation is not None and operation.method.upper() == "DELETE":
        return st.just(path_parameters)
    topic = path_parameters.get("topic")
    if not isinstance(topic, str) or not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        return st.just(path_parameters)
    partition = path_parameters.get("partition")
    if "partition" in path_parameters and not (type(partition) is int and 0 <= partition < 2**31):
        return st.just(path_parameters)

    def aimed(topic: str, partition: int) -> dict[str, Any]:
        out = dict(path_parameters, topic=topic)
        if "partition" in out:
            out["partition"] = partition
        return out

    return st.one_of(st.just(path_parameters),
                     st.builds(aimed, st.sampled_from(EXISTING_TOPICS), st.integers(0, 1)))


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("fuzz")
    server = Server([root / "data"], "--no-schedule", "--create-topic", "demo:2",
                    "--max-fetch-wait-ms", str(FUZZ_SETTINGS.max_fetch_wait_ms),
                    "--max-partitions-per-topic", str(FUZZ_SETTINGS.max_partitions_per_topic)).start()
    server.create_topic("compacted", 2, cleanup_policy="compact")
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.terminate()


def test_the_served_document_is_the_fuzzed_one(fuzz_server: Server) -> None:
    served = fuzz_server.ok("GET", "/v1/openapi.json")
    assert served == json.loads(json.dumps(build_document(FUZZ_SETTINGS)))


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_survives_fuzzing(case: schemathesis.Case, fuzz_server: Server) -> None:
    case.call_and_validate(base_url=fuzz_server.base, timeout=30)
    assert fuzz_server.proc is not None and fuzz_server.proc.poll() is None, fuzz_server.log()


def test_after_fuzzing_the_directory_shuts_down_cleanly_and_verifies(fuzz_server: Server) -> None:
    # Runs after the fuzzing (pytest keeps the file's order).
    assert fuzz_server.get("/readyz").status_code == 200
    # The fuzzing reached the data path: real appends, fetches and offset queries succeeded.
    succeeded = set()
    for family in text_string_to_metric_families(fuzz_server.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "stratalog_http_requests_total" and sample.labels["status"].startswith("2"):
                succeeded.add((sample.labels["method"], sample.labels["route"]))
    partition = "/v1/topics/{topic}/partitions/{partition}"
    for route in (("POST", f"{partition}/records"), ("GET", f"{partition}/records"), ("GET", f"{partition}/offsets"),
                  ("GET", partition), ("POST", "/v1/topics/{topic}/records")):
        assert route in succeeded, (route, sorted(succeeded))
    assert fuzz_server.terminate() == 0, fuzz_server.log()
    data = fuzz_server.data_dirs[0]
    assert (data / ".kafka_cleanshutdown").exists()
    verify = subprocess.run([*STRATALOG, "verify", "--data-dir", str(data)], capture_output=True, text=True,
                            timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    read_everything(data)


def read_everything(data: Path) -> None:
    """Open the directory as the engine does and read every record of every partition."""
    with open_log_manager([data], create_missing=False) as manager:
        for tp, log in sorted(manager.logs().items()):
            previous = log.log_start_offset - 1
            for record in log.read_records(log.log_start_offset):
                assert record.offset > previous, (tp, record.offset, previous)
                previous = record.offset
            assert previous < log.log_end_offset, tp
