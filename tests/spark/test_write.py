"""Batch writes: each key in the partition Kafka's murmur2 picks, records read back as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from pyspark.sql import types as T

from stratalog.broker.partitioner import murmur2, partition_for_key
from stratalog.broker.topics import TopicAdmin

from .conftest import engine

PARTITIONS = 5
HEADERS = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))
SCHEMA = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType()),
                       T.StructField("partition", T.IntegerType()), T.StructField("headers", HEADERS)])


def kafka_partition(key: bytes, partitions: int) -> int:
    """kafka-python's DefaultPartitioner: an independent murmur2, made positive, modulo the count."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def test_murmur2_matches_kafkas_known_vectors_and_kafka_python():
    assert murmur2(b"21") == -973932308  # Kafka's UtilsTest.testMurmur2
    for key in (b"", b"a", b"ab", b"abc", b"abcd", b"key-17", bytes(range(256))):
        assert partition_for_key(key, 7) == kafka_partition(key, 7)


def read_back(data: Path, topic: str) -> dict[int, list[tuple[bytes | None, bytes | None, tuple]]]:
    with engine(data) as manager:
        return {p: [(r.key, r.value, tuple((h.key, h.value) for h in r.headers))
                    for r in manager.get_log(topic, p).read_records(0)]
                for p in manager.describe_topic(topic).partitions}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    with engine(directory) as manager:
        TopicAdmin(manager).create_topic("w", PARTITIONS, {"segment.bytes": "4000"})
        TopicAdmin(manager).create_topic("other", 2)
    return directory


def test_a_write_puts_each_key_where_murmur2_says_and_reads_back_equal(spark, data):
    rows = [(f"key-{i % 40}", f"value-{i}".encode(), None,
             [("n", str(i).encode()), ("dup", None), ("dup", b"x")] if i % 3 == 0 else [])
            for i in range(400)]
    rows += [(None, f"nokey-{i}".encode(), None, []) for i in range(50)]       # round robin
    rows += [("pinned", f"pinned-{i}".encode(), 3, []) for i in range(10)]      # an explicit partition wins
    rows += [("tomb", None, None, [])]                                           # a tombstone
    frame = spark.createDataFrame(rows, SCHEMA).repartition(2)
    frame.write.format("stratalog").mode("append").option("path", str(data)).option("topic", "w").save()

    stored = read_back(data, "w")
    assert sum(len(records) for records in stored.values()) == len(rows)
    for partition, records in stored.items():
        for key, value, headers in records:
            if key is not None and key != b"pinned":
                assert partition == kafka_partition(key, PARTITIONS) == partition_for_key(key, PARTITIONS)
            if key == b"pinned":
                assert partition == 3
    written = [(None if k is None else k.encode(), v, tuple(tuple(h) for h in hs)) for k, v, _, hs in rows]
    got = [r for records in stored.values() for r in records]
    assert sorted(written, key=repr) == sorted(got, key=repr)
    keyless = {p for p, records in stored.items() if any(k is None for k, _, _ in records)}
    assert len(keyless) > 1, "null keys are spread over partitions"


def test_a_topic_column_routes_rows_and_binary_keys_work(spark, data):
    frame = spark.createDataFrame([("w", b"\x00\xffbin", b"1"), ("other", b"k", b"2"), ("other", None, b"3")],
                                  "topic STRING, key BINARY, value BINARY")
    frame.write.format("stratalog").mode("append").option("path", str(data)).save()
    assert [r for records in read_back(data, "w").values() for r in records] == [(b"\x00\xffbin", b"1", ())]
    assert sorted(r[1] for records in read_back(data, "other").values() for r in records) == [b"2", b"3"]


def test_writes_refuse_overwrite_a_missing_value_and_a_missing_topic(spark, data):
    frame = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    with pytest.raises(Exception, match="overwrite"):
        frame.write.format("stratalog").mode("overwrite").option("path", str(data)).option("topic", "w").save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        frame.select("key").write.format("stratalog").mode("append").option("path", str(data)) \
            .option("topic", "w").save()
    with pytest.raises(Exception, match="topic option required"):
        frame.write.format("stratalog").mode("append").option("path", str(data)).save()
    assert read_back(data, "w") == {p: [] for p in range(PARTITIONS)}
