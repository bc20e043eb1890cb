"""Structured Streaming reads: micro-batches of offsets, checkpointed in Kafka's form.

Spark keeps one instance of this reader alive in its streaming runner on the
driver; it answers ``initialOffset`` (a new query only - a restarted query
resumes from its checkpoint), ``latestOffset`` (where the next micro-batch
ends) and ``partitions`` (the tasks of a micro-batch). Tasks run ``read`` in
other processes, from their ``RangePartition`` alone.

Offsets are ``{"topic": {"partition": nextOffset}}``, built canonically
because Spark compares them as JSON text. A micro-batch covers
[previous end, end) per partition, and a restart replays exactly the batches
the checkpoint says were planned but not committed, so every record is read
once. Admission control follows Kafka's source:

* ``maxOffsetsPerTrigger`` is the default read limit (``ReadMaxRows``), shared
  across partitions in proportion to their backlog;
* whatever limit Spark passes is obeyed (``ReadAllAvailable`` included);
* ``Trigger.AvailableNow``: ``prepareForTriggerAvailableNow`` records the ends
  at that moment and no micro-batch goes past them, so the query drains what
  was there in rate-limited batches and stops;
* partitions that appear later start at their earliest offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from stratalog.common.errors import UnknownTopicOrPartitionError

from .offsets import StreamOffsets, from_json, rate_limit, resolve, subscribed, to_json
from .options import SourceOptions, TopicPartition
from .planning import OffsetRange, plan
from .reader import RangePartition, ReadSettings, read_range
from .schema import arrow_schema
from .store import LogStore, PartitionOffsets, data_loss_handler, open_store


class StratalogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, columns: tuple[str, ...]) -> None:
        self.options = options
        self.settings = ReadSettings(options.location, arrow_schema(columns), options.fail_on_data_loss,
                                     options.read_committed)
        self._store: LogStore | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's end

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_store"] = None  # reopened where it is needed
        return state

    @property
    def store(self) -> LogStore:
        if self._store is None:
            self._store = open_store(self.options.location)
        return self._store

    def _current(self) -> dict[TopicPartition, PartitionOffsets]:
        partitions = subscribed(self.store, self.options.subscription, must_exist=False)
        return {tp: self.store.offsets(*tp, read_committed=self.options.read_committed) for tp in partitions}

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> StreamOffsets:
        known = self._current()
        starts = resolve(self.store, sorted(known), self.options.starting, known, starting=True,
                         no_match_latest=self.options.no_match_latest)
        return to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: bounds.end for tp, bounds in self._current().items()}

    def latestOffset(self, start: StreamOffsets, limit: ReadLimit) -> StreamOffsets:
        begin = from_json(start)
        known = self._current()
        if self._target is not None:  # AvailableNow: nothing past the ends recorded at its start
            known = {tp: b for tp, b in known.items() if tp in self._target}
            latest = {tp: min(b.end, self._target[tp]) for tp, b in known.items()}
        else:
            latest = {tp: b.end for tp, b in known.items()}
        # Never behind the start: a vanished or truncated partition is data loss, reported by partitions().
        for tp, offset in begin.items():
            latest[tp] = max(latest.get(tp, offset), offset)
        if isinstance(limit, ReadMaxRows):
            from_offsets = {tp: begin.get(tp, known[tp].log_start if tp in known else offset)
                            for tp, offset in latest.items()}
            latest = rate_limit(limit.max_rows, from_offsets, latest)
        return to_json(latest)

    def reportLatestOffset(self) -> StreamOffsets:
        return to_json({tp: b.end for tp, b in self._current().items()})

    # -- micro-batches ---------------------------------------------------------------------
    def partitions(self, start: StreamOffsets, end: StreamOffsets) -> list[RangePartition]:
        begin, finish = from_json(start), from_json(end)
        handler = data_loss_handler(self.options.fail_on_data_loss)
        ranges = []
        for tp, stop in sorted(finish.items()):
            try:
                bounds = self.store.offsets(*tp)
            except UnknownTopicOrPartitionError:
                handler(tp[0], tp[1], begin.get(tp, 0), stop)  # deleted: nothing left to read
                continue
            first = begin.get(tp, bounds.log_start)  # a new partition starts at its earliest offset
            if first < bounds.log_start:
                handler(tp[0], tp[1], first, bounds.log_start)
                first = bounds.log_start
            if stop > first:
                ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        tasks = plan(self.store, ranges, bytes_per_partition=self.options.bytes_per_partition,
                     min_partitions=self.options.min_partitions,
                     max_records_per_partition=self.options.max_records_per_partition)
        return [RangePartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return  # nothing planned: Spark still runs one task, with a placeholder partition
        yield from read_range(self.settings, partition.range)

    def commit(self, end: StreamOffsets) -> None:
        """Nothing to release: the engine keeps no consumer state for this reader."""
