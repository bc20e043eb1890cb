"""Batch reads through format("stratalog") equal what ``stratalog consume`` prints, for every option form."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from stratalog.records.json_form import record_to_dict
from stratalog.records import Compression, Header, Record, TimestampType
from stratalog.storage.retention import delete_records
from stratalog_spark.options import parse_source_options
from stratalog_spark.reader import RangePartition, StratalogBatchReader
from stratalog_spark.schema import arrow_schema, kafka_schema, projection
from stratalog.broker.topics import TopicAdmin

from .conftest import append, consume, engine, reader

BASE_TS = 1_700_000_000_000
PARTITIONS = 3


def as_consumed(row: Any) -> dict[str, Any]:
    """A Spark row in ``stratalog consume``'s JSON form (the same encoder the CLI uses)."""
    headers = tuple(Header(h["key"], h["value"]) for h in (row["headers"] or ()))
    record = Record(row["offset"], row["ts"], row["key"], row["value"], headers)
    return record_to_dict(record, topic=row["topic"], partition=row["partition"],
                          timestamp_type=TimestampType(row["timestampType"]))


def rows_of(frame: Any) -> list[dict[str, Any]]:
    rows = frame.withColumn("ts", F.unix_millis("timestamp")).collect()
    return sorted((as_consumed(r) for r in rows), key=lambda d: (d["partition"], d["offset"]))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topics across many rolls: every codec, null keys, tombstones, repeated and null headers, binary keys."""
    directory = tmp_path_factory.mktemp("read") / "data"
    rng = random.Random(8)
    codecs = list(Compression)
    with engine(directory) as manager:
        TopicAdmin(manager).create_topic("mixed", PARTITIONS, {"segment.bytes": "1500", "index.interval.bytes": "200"})
        TopicAdmin(manager).create_topic("appended", 1, {"message.timestamp.type": "LogAppendTime", "segment.bytes": "1000"})
        TopicAdmin(manager).create_topic("timed", 2, {"segment.bytes": "800"})
        for n in range(90):
            records = []
            for i in range(rng.randint(1, 6)):
                key = None if rng.random() < 0.15 else bytes([rng.randrange(256)]) + b"key-%d" % rng.randrange(30)
                value = None if rng.random() < 0.1 else b"value-%d-%d" % (n, i) * rng.randint(1, 4)
                headers = ()
                if rng.random() < 0.4:
                    headers = (Header("h", b"1"), Header("h", None), Header("tr\u00e6ce", bytes([200, n % 256])))
                records.append(Record(i, BASE_TS + n * 10 + i, key, value, headers))
            append(manager, "mixed", n % PARTITIONS, records, compression=codecs[n % len(codecs)])
            append(manager, "appended", 0, records[:2], compression=codecs[(n + 1) % len(codecs)])
        for n in range(60):  # timed-p: timestamps 1000 * n (+ p), one record per batch
            for p in range(2):
                append(manager, "timed", p, [Record(0, BASE_TS + 1000 * n + p, b"k", b"%d" % n)])
    return directory


@pytest.fixture(scope="module")
def consumed(data: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """``stratalog consume`` of every partition, once (each run is a process start)."""
    return {(topic, p): consume(data, topic, p) for topic, count in (("mixed", PARTITIONS), ("appended", 1))
            for p in range(count)}


def test_a_full_read_equals_consume_across_rolls_codecs_tombstones_and_headers(spark, data, consumed):
    frame = reader(spark, data, subscribe="mixed,appended", includeHeaders="true").load()
    got = rows_of(frame)
    expected = sorted([r for records in consumed.values() for r in records],
                      key=lambda d: (d["partition"], d["offset"], d["topic"]))
    assert len(got) == len(expected) > 300
    got.sort(key=lambda d: (d["partition"], d["offset"], d["topic"]))
    assert got == expected
    assert {r["timestampType"] for r in got if r["topic"] == "appended"} == {"LogAppendTime"}
    assert any(r["value"] is None for r in got if r.get("value_b64") is None)  # tombstones came through


def test_reads_split_inside_segments_still_return_every_record_once(spark, data):
    whole = rows_of(reader(spark, data, subscribe="mixed", includeHeaders="true").load())
    frame = reader(spark, data, subscribe="mixed", includeHeaders="true", bytesPerPartition="1",
                   minPartitions="24", maxRecordsPerPartition="7").load()
    assert frame.rdd.getNumPartitions() >= 24
    assert rows_of(frame) == whole


def test_offset_ranges_in_json_with_earliest_and_latest_equal_consume(spark, data, consumed):
    frame = reader(spark, data, subscribe="mixed", includeHeaders="true",
                   startingOffsets=json.dumps({"mixed": {"0": 17, "1": -2, "2": 40}}),
                   endingOffsets=json.dumps({"mixed": {"0": 60, "1": -1, "2": 41}})).load()
    expected = consume(data, "mixed", 0, 17, 60 - 17) + consumed[("mixed", 1)] + consumed[("mixed", 2)][40:41]
    assert rows_of(frame) == expected
    assert len(expected) == 43 + len(consumed[("mixed", 1)]) + 1


def test_earliest_and_latest_words_and_the_batch_rules_of_kafka(spark, data, consumed):
    full = reader(spark, data, subscribe="mixed", startingOffsets="earliest", endingOffsets="latest").load()
    assert full.count() == sum(len(consumed[("mixed", p)]) for p in range(PARTITIONS))
    refused = {
        "starting offset can't be latest for batch queries": {"startingOffsets": "latest"},
        "ending offset can't be earliest for batch queries": {"endingOffsets": "earliest"},
        "startingOffsets for mixed-1 can't be latest": {
            "startingOffsets": json.dumps({"mixed": {"0": 0, "1": -1, "2": 0}})},
        "endingOffsets for mixed-0 can't be earliest": {
            "endingOffsets": json.dumps({"mixed": {"0": -2, "1": -1, "2": -1}})},
        "you must specify all TopicPartitions": {"startingOffsets": json.dumps({"mixed": {"0": 0}})},
        "is after the ending offset": {"startingOffsets": json.dumps({"mixed": {"0": 50, "1": 0, "2": 0}}),
                                       "endingOffsets": json.dumps({"mixed": {"0": 10, "1": -1, "2": -1}})},
        "Only one of the following options": {"assign": json.dumps({"mixed": [0]})},
    }
    for message, options in refused.items():
        with pytest.raises(Exception, match=message):
            reader(spark, data, subscribe="mixed", **options).load().collect()


def _timed(spark: Any, data: Path, **options: str) -> list[tuple[int, int, int]]:
    frame = reader(spark, data, subscribe="timed", **options).load()
    return sorted((r["partition"], r["offset"], r["ts"]) for r in
                  frame.select("partition", "offset", F.unix_millis("timestamp").alias("ts")).collect())


def test_timestamp_options_start_and_end_at_the_first_offset_at_or_after_the_time(spark, data):
    t20, t45 = BASE_TS + 20_000, BASE_TS + 45_000
    rows = _timed(spark, data, startingTimestamp=str(t20 + 1), endingTimestamp=str(t45))
    # p0 holds 1000n, p1 1000n+1: p0 starts at n=21 (20000 < t20+1), p1 at n=20 (20001 >= t20+1).
    assert [r for r in rows if r[0] == 0] == [(0, n, BASE_TS + 1000 * n) for n in range(21, 45)]
    assert [r for r in rows if r[0] == 1] == [(1, n, BASE_TS + 1000 * n + 1) for n in range(20, 45)]
    per_partition = _timed(spark, data,
                           startingOffsetsByTimestamp=json.dumps({"timed": {"0": t20, "1": BASE_TS}}),
                           endingOffsetsByTimestamp=json.dumps({"timed": {"0": t45, "1": BASE_TS + 3000}}))
    assert per_partition == [(0, n, BASE_TS + 1000 * n) for n in range(20, 45)] + \
        [(1, n, BASE_TS + 1000 * n + 1) for n in range(0, 3)]
    # The global timestamp takes precedence over offsets, as in Kafka.
    assert _timed(spark, data, startingTimestamp=str(BASE_TS + 58_000), startingOffsets="earliest") == \
        [(0, 58, BASE_TS + 58_000), (0, 59, BASE_TS + 59_000), (1, 58, BASE_TS + 58_001), (1, 59, BASE_TS + 59_001)]
    # No record at or after the time: an error by default, the end with the "latest" strategy...
    future = str(BASE_TS + 10**9)
    with pytest.raises(Exception, match="No offset matched"):
        _timed(spark, data, startingTimestamp=future)
    assert _timed(spark, data, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest") == []
    # ...and an ending time past every record means "latest".
    assert len(_timed(spark, data, endingTimestamp=future)) == 120


def test_a_user_schema_is_a_projection_and_wrong_columns_are_refused(spark, data):
    projected = reader(spark, data, subscribe="mixed").schema("offset BIGINT, key BINARY").load()
    assert projected.columns == ["offset", "key"]
    got = sorted(((r["offset"], r["key"]) for r in projected.where("offset < 5").collect()), key=repr)
    full = reader(spark, data, subscribe="mixed").load().where("offset < 5").select("offset", "key").collect()
    assert got == sorted(((r["offset"], r["key"]) for r in full), key=repr) and len(got) == 5 * PARTITIONS
    for schema, message in (("offset INT", "must be bigint"), ("color STRING", "not a column of the Kafka")):
        with pytest.raises(Exception, match=message):
            reader(spark, data, subscribe="mixed").schema(schema).load().collect()


def test_subscribe_pattern_and_assign_select_partitions(spark, data):
    pattern = reader(spark, data, subscribePattern="t.*ed").load()
    assert {r["topic"] for r in pattern.select("topic").distinct().collect()} == {"timed"}
    assigned = reader(spark, data, assign=json.dumps({"mixed": [1], "timed": [0]})).load()
    assert sorted({(r["topic"], r["partition"]) for r in assigned.collect()}) == [("mixed", 1), ("timed", 0)]
    with pytest.raises(Exception, match="do not exist"):
        reader(spark, data, assign=json.dumps({"mixed": [7]})).load().collect()


def test_read_yields_arrow_batches_of_exactly_sparks_arrow_schema(data):
    from pyspark.sql.pandas.types import to_arrow_schema

    options = parse_source_options({"path": str(data), "subscribe": "mixed", "includeheaders": "true"},
                                   streaming=False)
    source_reader = StratalogBatchReader(options, projection(kafka_schema(True)))
    tasks = source_reader.partitions()
    assert tasks and all(isinstance(t, RangePartition) for t in tasks)
    batches = list(source_reader.read(tasks[0]))
    assert batches and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.schema == to_arrow_schema(kafka_schema(True), timezone="UTC") for b in batches)
    assert arrow_schema(("key", "offset")).names == ["key", "offset"]


@pytest.fixture
def retained(tmp_path: Path) -> Path:
    """A partition whose first segments DeleteRecords removed: the log starts at 40 now."""
    directory = tmp_path / "data"
    with engine(directory) as manager:
        TopicAdmin(manager).create_topic("r", 1, {"segment.bytes": "600"})
        for n in range(80):
            append(manager, "r", 0, [Record(0, BASE_TS + n, b"k", b"value-%d" % n)])
        log = manager.get_log("r", 0)
        delete_records(log, 40)
        assert log.log_start_offset == 40 and log.segments[0].base_offset > 0
    return directory


def test_fail_on_data_loss_raises_when_retention_removed_the_start(spark, retained):
    with pytest.raises(Exception, match="were removed .* before they could be read"):
        reader(spark, retained, subscribe="r", startingOffsets=json.dumps({"r": {"0": 5}})).load().collect()


def test_without_fail_on_data_loss_the_gone_offsets_are_skipped_with_a_warning(spark, retained):
    frame = reader(spark, retained, subscribe="r", failOnDataLoss="false",
                   startingOffsets=json.dumps({"r": {"0": 5}})).load()
    assert [r["offset"] for r in frame.select("offset").collect()] == list(range(40, 80))
    # The warning itself, from the planner (the same code Spark runs in its planner process).
    options = parse_source_options({"path": str(retained), "subscribe": "r", "failondataloss": "false",
                                    "startingoffsets": json.dumps({"r": {"0": 5}})}, streaming=False)
    with pytest.warns(UserWarning, match=r"r-0: offsets 5\.\.39 were removed"):
        tasks = StratalogBatchReader(options, projection(kafka_schema(False))).partitions()
    assert [(t.range.start, t.range.end) for t in tasks] == [(40, 80)]
