"""``kafka.isolation.level=read_committed`` through format("stratalog"): committed transactions only, and
nothing from an open transaction on, both from a directory and through a running ``stratalog serve``.

The log holds what a Kafka broker's log holds when its producers use transactions (the engine's own
producers may not: it has no transaction coordinator), written with ``append_raw`` as a copy of
Kafka's log would be.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server_harness import Server  # tests/ is on sys.path (its conftest)
from stratalog.broker.topics import TopicAdmin
from stratalog.records import ControlRecordType, Record, build_batch
from stratalog.records.control import build_end_txn_marker_batch

from .conftest import engine

# Recent timestamps: the server's retention (7 days by default) would delete older records under the test.
TS = (int(time.time()) - 3600) * 1000
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def _data(offset: int, producer: int | None, value: bytes) -> bytes:
    fields: dict[str, Any] = {}
    if producer is not None:
        fields = {"producer_id": producer, "producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
    return build_batch([Record(offset, TS + offset, b"k", value)], base_offset=offset, **fields)


def _marker(offset: int, producer: int, kind: ControlRecordType) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                      base_offset=offset, timestamp=TS + offset)


LOG = [  # offset by offset: (batch, the value a read_committed reader gets from it, if any)
    (_data(0, None, b"before"), b"before"),
    (_data(1, 7, b"committed-1"), b"committed-1"),
    (_data(2, 8, b"aborted"), None),
    (_data(3, 7, b"committed-2"), b"committed-2"),
    (_marker(4, 8, ABORT), None),
    (_marker(5, 7, COMMIT), None),
    (_data(6, None, b"between"), b"between"),
    (_data(7, 9, b"open"), None),           # never ended: the last stable offset is 7
    (_data(8, None, b"after"), None),        # committed, but past the open transaction's start
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("read-committed") / "data"
    with engine(directory) as manager:
        TopicAdmin(manager).create_topic("txn", 1, {"segment.bytes": "300"})
        log = manager.get_log("txn", 0)
        for raw, _ in LOG:
            log.append_raw(raw)
        assert len(log.segments) > 2
    return directory


@pytest.fixture(scope="module")
def server(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    copy = tmp_path_factory.mktemp("served") / "data"
    shutil.copytree(data, copy)
    running = Server([copy]).start()
    try:
        yield running
    finally:
        running.terminate()


def values(spark: Any, isolation: str, **where: str) -> list[bytes]:
    frame = spark.read.format("stratalog").option("subscribe", "txn").option("kafka.isolation.level", isolation)
    for name, value in where.items():
        frame = frame.option(name, value)
    return [r["value"] for r in sorted(frame.load().collect(), key=lambda r: r["offset"])]


@pytest.mark.parametrize("store", ["path", "url"])
def test_read_committed_reads_committed_transactions_and_stops_at_the_open_one(spark, data, server, store):
    where = {"path": str(data)} if store == "path" else {"url": server.base}
    assert values(spark, "read_committed", **where) == [v for _, v in LOG if v is not None]
    # read_uncommitted: every data record, aborted and open ones too, up to the high watermark.
    assert values(spark, "read_uncommitted", **where) == [
        b"before", b"committed-1", b"aborted", b"committed-2", b"between", b"open", b"after"]
