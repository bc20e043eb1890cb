"""Spark's own Kafka source and sink (``format("kafka")``, spark-sql-kafka-0-10 from Maven Central)
against ``stratalog serve --kafka-listen``: batch and streaming reads give what ``format("stratalog")``
reads from the same engine's files, and a write lands in the topic as the HTTP API reads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from server_harness import Server

TOPIC = "spark-in"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("spark-kafka")
    running = Server([root / "data"], "--no-schedule", "--kafka-listen", "127.0.0.1:0",
                     "--create-topic", f"{TOPIC}:2", "--create-topic", "spark-out:1").start()
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=running.kafka_address(), acks="all")
    for i in range(100):
        producer.send(TOPIC, key=b"k%d" % i, value=b"value %d" % i, partition=i % 2,
                      timestamp_ms=1_700_000_000_000 + i, headers=[("n", str(i).encode())])
    producer.flush()
    producer.close()
    yield running
    assert running.terminate() == 0, running.log()


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.select("key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers").collect())


def test_a_batch_read_through_kafkas_source_equals_the_stratalog_source_over_the_files(spark, server: Server):
    through_kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", server.kafka_address())
                     .option("subscribe", TOPIC).option("includeHeaders", "true").load())
    from_files = (spark.read.format("stratalog").option("path", str(server.data_dirs[0]))
                  .option("subscribe", TOPIC).option("includeHeaders", "true").load())
    got = rows(through_kafka)
    assert len(got) == 100
    assert got == rows(from_files)
    assert {(bytes(r[0]), bytes(r[1])) for r in got} == {(b"k%d" % i, b"value %d" % i) for i in range(100)}


def test_a_streaming_read_through_kafkas_source_gets_every_record(spark, server: Server):
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", server.kafka_address())
             .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()
             .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
             .writeStream.format("memory").queryName("kafka_stream").trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    streamed = sorted((r.partition, r.offset, r.value) for r in spark.sql("SELECT * FROM kafka_stream").collect())
    assert streamed == sorted((i % 2, i // 2, f"value {i}") for i in range(100))


def test_a_write_through_kafkas_sink_reads_back_through_http(spark, server: Server):
    frame = spark.createDataFrame([(f"key{i}", f"written by spark {i}") for i in range(10)], ["key", "value"])
    frame.write.format("kafka").option("kafka.bootstrap.servers", server.kafka_address()) \
        .option("topic", "spark-out").save()
    reply = server.ok("GET", "/v1/topics/spark-out/partitions/0/records", params={"offset": 0})
    got = sorted((r["key"], r["value"]) for r in reply["records"])
    assert got == sorted((f"key{i}", f"written by spark {i}") for i in range(10))
