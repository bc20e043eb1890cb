"""Batch reads: plan ranges from the options (on the driver side), read each range as Arrow (in a task).

Planning resolves the offset options against each partition's current log
start and end, applies ``failOnDataLoss`` to starts that retention already
removed, and cuts the ranges into tasks (``planning``). A task's ``read``
depends on nothing but its ``RangePartition`` and the reader's picklable
settings: it opens the store itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from stratalog.records.transactions import AbortedTransaction, scan_aborted
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .arrow_rows import record_batches
from .offsets import resolve, subscribed
from .options import OptionError, SourceOptions
from .planning import OffsetRange, plan
from .schema import arrow_schema
from .store import Location, PartitionOffsets, data_loss_handler, open_store
from .transactions import AbortedFilter


@dataclass
class RangePartition(InputPartition):
    """One Spark task: offsets [start, end) of one topic-partition."""

    range: OffsetRange


@dataclass(frozen=True)
class ReadSettings:
    """What a task needs to read a range: picklable, small."""

    location: Location
    schema: pa.Schema
    fail_on_data_loss: bool
    read_committed: bool


def read_range(settings: ReadSettings, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    store = open_store(settings.location)
    raw = store.read_batches(r.topic, r.partition, r.start, r.end, data_loss_handler(settings.fail_on_data_loss))
    aborted = None
    if settings.read_committed:
        def scan() -> list[AbortedTransaction]:
            bounds = store.offsets(r.topic, r.partition)
            return scan_aborted(store.read_batches(r.topic, r.partition, bounds.log_start, bounds.end,
                                                   data_loss_handler(False)))

        aborted = AbortedFilter(scan)
    yield from record_batches(raw, settings.schema, r.topic, r.partition, r.start, r.end, aborted=aborted)


def checked_ranges(options: SourceOptions, starts: dict[tuple[str, int], int],
                   ends: dict[tuple[str, int], int], known: dict[tuple[str, int], PartitionOffsets]
                   ) -> list[OffsetRange]:
    """[start, end) per partition after Kafka's checks: data loss below the log start, start after end."""
    handler = data_loss_handler(options.fail_on_data_loss)
    ranges = []
    for tp, start in starts.items():
        bounds = known[tp]
        end = min(ends[tp], bounds.end)
        skipped = False
        if start < bounds.log_start:
            handler(tp[0], tp[1], start, bounds.log_start)  # raises with failOnDataLoss=true
            start, skipped = bounds.log_start, True
        if start > end:
            if skipped:
                continue  # everything asked for is gone
            raise OptionError(f"Beginning offset {start} is after the ending offset {end} for topic {tp[0]} "
                              f"partition {tp[1]}. You either provided an invalid fromOffset, or the Kafka topic "
                              "has been damaged")
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return ranges


class StratalogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, columns: tuple[str, ...]) -> None:
        self.options = options
        self.settings = ReadSettings(options.location, arrow_schema(columns), options.fail_on_data_loss,
                                     options.read_committed)

    def partitions(self) -> list[RangePartition]:
        options = self.options
        store = open_store(options.location)
        partitions = subscribed(store, options.subscription, must_exist=True)
        known = {tp: store.offsets(*tp, read_committed=options.read_committed) for tp in partitions}
        starts = resolve(store, partitions, options.starting, known, starting=True,
                         no_match_latest=options.no_match_latest)
        ends = resolve(store, partitions, options.ending, known, starting=False)
        ranges = checked_ranges(options, starts, ends, known)
        tasks = plan(store, ranges, bytes_per_partition=options.bytes_per_partition,
                     min_partitions=options.min_partitions,
                     max_records_per_partition=options.max_records_per_partition)
        return [RangePartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return  # nothing planned: Spark still runs one task, with a placeholder partition
        yield from read_range(self.settings, partition.range)
