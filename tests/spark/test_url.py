"""format("stratalog") through a running ``stratalog serve`` (option url), beside lock-free directory reads."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import functions as F

from stratalog.broker.partitioner import partition_for_key

from server_harness import Server  # tests/ is on sys.path (its conftest)

PARTITIONS = 3
# Recent timestamps: the server's retention (7 days by default) would delete older records under the test.
BASE_TS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("url") / "data"
    data.mkdir()
    running = Server([data]).start()
    running.create_topic("h", PARTITIONS, segment_bytes=2000)
    try:
        yield running
    finally:
        running.terminate()


def read(spark: Any, **options: str) -> Any:
    frame = spark.read.format("stratalog").option("subscribe", "h")
    for name, value in options.items():
        frame = frame.option(name, value)
    return frame.load()


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"], r["ts"], r["timestampType"])
                  for r in frame.withColumn("ts", F.unix_millis("timestamp")).collect())


def test_a_write_through_the_server_is_read_back_alike_through_it_and_from_its_directory(spark, server):
    frame = spark.createDataFrame([(f"key-{i % 25}", f"value-{i}", BASE_TS + i) for i in range(300)],
                                  "key STRING, value STRING, ms LONG")
    frame = frame.select("key", "value", F.timestamp_millis("ms").alias("timestamp")).repartition(2)
    frame.write.format("stratalog").mode("append").option("url", server.base).option("topic", "h").save()

    through_server = rows(read(spark, url=server.base))
    assert len(through_server) == 300
    for partition, _, key, value, ts, timestamp_type in through_server:
        assert partition == partition_for_key(key, PARTITIONS) and timestamp_type == 0
        assert ts == BASE_TS + int(value.split(b"-")[1])
    # The directory read takes no lock: it works while the server holds the directory.
    assert rows(read(spark, path=str(server.data_dirs[0]))) == through_server
    # And both equal the server's own JSON fetch (what `stratalog consume --server` prints).
    served = sorted((p, r["offset"], r["key"].encode(), r["value"].encode())
                    for p in range(PARTITIONS) for r in server.read_all("h", p))
    assert served == [row[:4] for row in through_server]


def test_offset_and_timestamp_options_through_the_server_equal_the_directory_read(spark, server):
    options = {"startingTimestamp": str(BASE_TS + 100),
               "endingOffsets": json.dumps({"h": {"0": 50, "1": -1, "2": 20}})}
    via_url = rows(read(spark, url=server.base, **options))
    via_path = rows(read(spark, path=str(server.data_dirs[0]), **options))
    assert via_url == via_path and 0 < len(via_url) < 200


def test_a_directory_held_by_the_server_refuses_a_direct_write_and_points_at_url(spark, server):
    frame = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    with pytest.raises(Exception, match="write through the server with option url"):
        frame.write.format("stratalog").mode("append").option("path", str(server.data_dirs[0])) \
            .option("topic", "h").option("lockTimeoutMs", "300").save()


def test_fail_on_data_loss_through_the_server(spark, server):
    server.ok("POST", "/v1/topics/h/partitions/1/delete-records", json={"beforeOffset": 30})
    with pytest.raises(Exception, match=r"h-1: offsets 0\.\.29 were removed"):
        read(spark, url=server.base, startingOffsets=json.dumps({"h": {"0": 0, "1": 0, "2": 0}})).collect()
    kept = read(spark, url=server.base, failOnDataLoss="false",
                startingOffsets=json.dumps({"h": {"0": 0, "1": 0, "2": 0}})).where("partition = 1")
    assert min(r["offset"] for r in kept.select("offset").collect()) == 30

