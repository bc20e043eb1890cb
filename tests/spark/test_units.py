"""The data source's plain-Python parts, without a JVM: decoding, offsets, planning, directory listings."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stratalog_spark.offsets import from_json, to_json
from stratalog_spark.options import OptionError, parse_sink_options, parse_source_options
from stratalog_spark.planning import OffsetRange, group_chunks, split_min_partitions
from stratalog_spark.store import Chunk
from stratalog_spark.store.segments import list_segments


def test_stream_offsets_are_kafkas_checkpoint_json_in_canonical_order():
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 2): 7, ("a", 0): 3}
    assert list(to_json(offsets)) == ["a", "b"] and list(to_json(offsets)["b"]) == ["2", "10"]
    assert from_json(to_json(offsets)) == offsets


def test_options_follow_kafkas_forms_and_refuse_what_kafka_refuses():
    parsed = parse_source_options({"path": "/a, /b", "assign": '{"t":[1,0]}', "startingoffsets": '{"t":{"0":-2,"1":9}}',
                                   "failondataloss": "false", "minpartitions": "4"}, streaming=False)
    assert parsed.location.paths == ("/a", "/b") and parsed.subscription.assigned == (("t", 0), ("t", 1))
    assert parsed.starting.offsets == {("t", 0): -2, ("t", 1): 9} and not parsed.fail_on_data_loss
    assert parse_source_options({"url": "http://h:1/", "subscribepattern": "a.*"}, streaming=True).location.url \
        == "http://h:1"
    for options, message in (
            ({"subscribe": "t"}, "exactly one of the options 'path'"),
            ({"path": "/a"}, "One of the following options must be specified"),
            ({"path": "/a", "subscribe": "t", "failondataloss": "maybe"}, "true or false"),
            ({"path": "/a", "subscribe": "t", "endingoffsets": "latest"}, "not valid in streaming"),
            ({"path": "/a", "subscribe": "t", "maxoffsetspertrigger": "0"}, "positive integer")):
        with pytest.raises(OptionError, match=message):
            parse_source_options(options, streaming=True)
    with pytest.raises(OptionError, match="kafka.compression.type"):
        parse_sink_options({"path": "/a", "kafka.compression.type": "brotli"})


def test_planning_groups_whole_segments_and_min_partitions_divides_as_kafka_does():
    chunks = [Chunk(0, 100, 40), Chunk(100, 200, 40), Chunk(200, 250, 40), Chunk(250, 260, 1)]
    assert group_chunks("t", 0, chunks, 64) == [OffsetRange("t", 0, 0, 200), OffsetRange("t", 0, 200, 260)]
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100)]
    # Kafka's KafkaOffsetRangeCalculator: parts in proportion to size, the last part takes the rounding.
    assert split_min_partitions(ranges, 10) == [OffsetRange("t", 0, 100 * i, 100 * (i + 1)) for i in range(9)] + \
        [OffsetRange("t", 1, 0, 100)]
    assert split_min_partitions(ranges, 2) == ranges


def test_a_listing_is_taken_only_once_a_swap_in_progress_has_completed(tmp_path: Path):
    for base in (0, 100, 200):
        (tmp_path / f"{base:020d}.log").write_bytes(b"")
    (tmp_path / f"{0:020d}.log.swap").write_bytes(b"")  # a cleaner swap half way: 0 and 100 are being merged

    def finish() -> None:
        time.sleep(0.2)
        (tmp_path / f"{100:020d}.log").rename(tmp_path / f"{100:020d}.log.deleted")
        (tmp_path / f"{0:020d}.log.swap").replace(tmp_path / f"{0:020d}.log")

    finishing = threading.Thread(target=finish)
    finishing.start()
    listed = list_segments(tmp_path)
    finishing.join()
    assert [s.base_offset for s in listed] == [0, 200]
