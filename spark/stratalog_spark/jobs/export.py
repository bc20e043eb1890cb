"""``export``: a topic, or an offset or time range of it, to Parquet.

The read is the data source's (same options, same columns, Arrow all the
way), written with Spark's Parquet writer, partitioned by ``partition`` so a
reader can prune partitions. Offsets, timestamps and headers are kept, so an
export can be checked against the log record by record.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import SparkSession

from ..store import Location
from .compaction_plan import location_options


def export_topic(spark: SparkSession, location: Location, topic: str, out: str, *,
                 read_options: dict[str, str], mode: str = "errorifexists") -> dict[str, Any]:
    started = time.monotonic()
    frame = (spark.read.format("stratalog").options(**location_options(location)).option("subscribe", topic)
             .options(**read_options).load())
    frame.write.mode(mode).partitionBy("partition").parquet(out)
    seconds = time.monotonic() - started
    rows = spark.read.parquet(out).count()  # from the Parquet footers: no second scan of the log
    return {"topic": topic, "out": out, "rows": rows, "seconds": round(seconds, 3)}
