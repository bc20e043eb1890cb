"""A write-only data source that turns sorted ``(partition, offset)`` rows into compaction plans.

Plans are written where the rows are: each task streams its rows - sorted by
partition, then offset, one topic-partition never split across tasks - into
one keep file per partition (``stratalog.storage.cleaner.plan_file.KeepFileWriter``,
constant memory). Files are written under attempt-unique temporary names and
published by the driver's ``commit`` only when every task succeeded, so a
failed or retried job never leaves a half plan under the final name; ``abort``
removes them. A partition without any keyed record gets an empty plan: the
engine then drops its keyless records, as its cleaner does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from stratalog.storage.cleaner.plan_file import KeepFileWriter, PlanHeader, keep_file_name, publish_keep_file

NAME = "stratalog_keep_files"
SUMMARY_SUFFIX = ".plan-summary.json"


@dataclass
class WrittenPlans(WriterCommitMessage):
    """(partition, temporary file, offsets kept, records scanned) per partition a task wrote."""

    files: list[tuple[int, str, int, int]] = field(default_factory=list)


class KeepFilesDataSource(DataSource):
    """Options: ``dir``, ``topic``, ``bounds`` = JSON ``{"partition": [highWatermark, logStartOffset]}``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        names = [f.name for f in schema.fields]
        if names[:2] != ["partition", "offset"]:
            raise ValueError(f"{NAME}: expected columns partition, offset[, records], got {names}")
        bounds = {int(p): (int(h), int(s)) for p, (h, s) in json.loads(self.options["bounds"]).items()}
        return KeepFilesWriter(Path(self.options["dir"]), self.options["topic"], bounds)


class KeepFilesWriter(DataSourceArrowWriter):
    def __init__(self, directory: Path, topic: str, bounds: dict[int, tuple[int, int]]) -> None:
        self.directory = directory
        self.topic = topic
        self.bounds = bounds

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenPlans:
        written = WrittenPlans()
        attempt = uuid.uuid4().hex
        current: tuple[int, KeepFileWriter] | None = None
        scanned = 0
        try:
            for batch in iterator:
                partitions = batch.column("partition").to_pylist()
                offsets = batch.column("offset").to_pylist()
                counts = batch.column("records").to_pylist() if "records" in batch.schema.names else None
                i, n = 0, len(partitions)
                while i < n:  # one run of rows per topic-partition (the rows are sorted)
                    partition = partitions[i]
                    j = i
                    while j < n and partitions[j] == partition:
                        j += 1
                    if current is None or current[0] != partition:
                        if current is not None:
                            written.files.append(self._close(current, scanned))
                            scanned = 0
                        current = self._open(partition, attempt)
                    current[1].write(offsets[i:j])
                    scanned += sum(counts[i:j]) if counts is not None else j - i
                    i = j
            if current is not None:
                written.files.append(self._close(current, scanned))
                current = None
        except BaseException:
            if current is not None:
                current[1].abort()
            for _, path, _, _ in written.files:
                Path(path).unlink(missing_ok=True)
            raise
        return written

    def _open(self, partition: int, attempt: str) -> tuple[int, KeepFileWriter]:
        if partition not in self.bounds:
            raise ValueError(f"{NAME}: partition {partition} is not one of {sorted(self.bounds)}")
        path = self.directory / f"{keep_file_name(self.topic, partition)}.{attempt}.tmp"
        return partition, KeepFileWriter(path)

    def _close(self, current: tuple[int, KeepFileWriter], scanned: int) -> tuple[int, str, int, int]:
        partition, writer = current
        count = writer.close()
        if writer.last >= self.bounds[partition][0]:
            raise ValueError(f"{NAME}: offset {writer.last} of partition {partition} is past the plan's high "
                             f"watermark {self.bounds[partition][0]}")
        return partition, str(writer.path), count, scanned

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, WrittenPlans) for f in m.files]
        seen = [f[0] for f in files]
        if len(seen) != len(set(seen)):
            raise ValueError(f"{NAME}: a partition was written by two tasks (rows not partitioned by 'partition')")
        summary = {}
        for partition, (high, start) in sorted(self.bounds.items()):
            found = next((f for f in files if f[0] == partition), None)
            if found is None:  # no keyed record in the partition: an empty plan
                empty = self.directory / f"{keep_file_name(self.topic, partition)}.empty.tmp"
                empty.write_bytes(b"")
                found = (partition, str(empty), 0, 0)
            header = PlanHeader(self.topic, partition, high, found[2], start)
            keep = publish_keep_file(Path(found[1]), self.directory, header)
            summary[str(partition)] = {"plan": str(keep), "highWatermark": high, "logStartOffset": start,
                                       "keptOffsets": found[2], "recordsScanned": found[3]}
        (self.directory / f"{self.topic}{SUMMARY_SUFFIX}").write_text(json.dumps(summary))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for message in messages:
            if isinstance(message, WrittenPlans):
                for _, path, _, _ in message.files:
                    Path(path).unlink(missing_ok=True)
