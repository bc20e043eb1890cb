"""Prometheus metrics of the service, in a private registry.

Two kinds:

* request-path series the handlers update as they go: bytes and records
  appended, bytes fetched, append / fetch latency histograms, HTTP requests by
  route and status (plain numbers, ``server/request_series.py``: no lock per
  update); error responses by Kafka error code, waiting long polls;
* engine series read at scrape time by ``EngineCollector``: per-partition
  size, offsets, segment count; the cleaner's totals and dirty ratio; retention
  deletions; checkpoint-file age; the schedule's task runs. Reading the logs
  when scraped (instead of updating gauges on every change) keeps the append
  path free of metric bookkeeping and can never report a stale partition.

The registry is private (not prometheus_client's global one) so two servers
in one process, as in tests, never share or collide on series.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stratalog.common.names import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from stratalog.server.request_series import CounterSeries, HistogramSeries, RequestSeriesCollector

if TYPE_CHECKING:
    from stratalog.broker.engine import Engine
    from stratalog.broker.replication import ReplicaSet
    from stratalog.broker.signals import WaitCounts

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_CHECKPOINT_FILES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                     CLEANER_OFFSET_CHECKPOINT)


class ServerMetrics:
    def __init__(self, engine: Engine, waits: WaitCounts,
                 replicas: Callable[[], ReplicaSet | None] = lambda: None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        registry = self.registry
        tp = ["topic", "partition"]
        # The request path's series, updated on every produce and fetch (server/request_series.py).
        self.append_bytes = CounterSeries("stratalog_append_bytes", "Bytes of record batches appended through the API",
                                          tp)
        self.append_records = CounterSeries("stratalog_append_records", "Records appended through the API", tp)
        self.fetch_bytes = CounterSeries("stratalog_fetch_bytes", "Bytes of record batches served by fetches", tp)
        self.append_latency = HistogramSeries(
            "stratalog_append_latency_seconds",
            "Time to append one produce request's batches (and fsync them when acks=all)",
            ["acks"], _LATENCY_BUCKETS)
        self.fetch_latency = HistogramSeries(
            "stratalog_fetch_latency_seconds", "Time to read one fetch, long-poll waiting excluded", [],
            _LATENCY_BUCKETS)
        self.requests = CounterSeries("stratalog_http_requests", "HTTP requests by method, route and status",
                                      ["method", "route", "status"])
        registry.register(RequestSeriesCollector([self.append_bytes, self.append_records, self.fetch_bytes,
                                                  self.append_latency, self.fetch_latency, self.requests]))
        self.errors = Counter("stratalog_errors", "Error responses by Kafka error code", ["code"], registry=registry)
        self.access_denied = Counter("stratalog_access_denied", "Requests refused by authorization, by verb "
                                     "(both listeners)", ["verb"], registry=registry)
        registry.register(EngineCollector(engine))
        registry.register(FetchWaitCollector(waits))
        registry.register(ReplicationCollector(replicas))

    def error(self, code: str) -> None:
        self.errors.labels(code).inc()

    def count_request(self, method: str, route: str, status: int) -> None:
        self.requests.inc((method, route, str(status)), 1)

    def count_append(self, topic: str, partition: int, size: int, records: int) -> None:
        labels = (topic, str(partition))
        self.append_bytes.inc(labels, size)
        self.append_records.inc(labels, records)

    def observe_append(self, acks: str, seconds: float) -> None:
        self.append_latency.observe((acks,), seconds)

    def count_fetch(self, topic: str, partition: int, size: int, seconds: float) -> None:
        self.fetch_bytes.inc((topic, str(partition)), size)
        self.fetch_latency.observe((), seconds)

    def forget_topic(self, topic: str, partitions: Iterable[int]) -> None:
        """Drop a deleted topic's request-path series, so deleted names do not pile up."""
        for partition in partitions:
            for counter in (self.append_bytes, self.append_records, self.fetch_bytes):
                counter.remove((topic, str(partition)))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class FetchWaitCollector(Collector):
    """Fetches waiting at the high watermark now, and how the waits so far ended."""

    def __init__(self, waits: WaitCounts) -> None:
        self.waits = waits

    def collect(self) -> Iterator[Metric]:
        waiting = GaugeMetricFamily("stratalog_fetch_long_polls_waiting", "Fetches waiting for new data now")
        waiting.add_metric([], float(self.waits.waiting))
        ended = CounterMetricFamily("stratalog_fetch_long_polls", "Long-poll waits that ended, by how: woken "
                                    "by an append (or a deletion, or shutdown), or expired", labels=["outcome"])
        ended.add_metric(["woken"], float(self.waits.completed_by_append))
        ended.add_metric(["expired"], float(self.waits.expired))
        yield from (waiting, ended)


class ReplicationCollector(Collector):
    """Kafka's ReplicaManager figures for the partitions this engine replicates (nothing without replication)."""

    def __init__(self, replicas: Callable[[], ReplicaSet | None]) -> None:
        self.replicas = replicas

    def collect(self) -> Iterator[Metric]:
        replicas = self.replicas()
        if replicas is None:
            return
        partitions = list(replicas.partitions.values())
        leading = [p for p in partitions if p.is_leader and p.state is not None]
        figures = (
            ("stratalog_replica_partition_count", "Replicated partitions on this engine (Kafka's PartitionCount)",
             len(partitions)),
            ("stratalog_replica_leader_count", "Partitions this engine leads (Kafka's LeaderCount)", len(leading)),
            ("stratalog_under_replicated_partitions",
             "Led partitions whose ISR is smaller than their replicas (Kafka's UnderReplicatedPartitions)",
             sum(1 for p in leading if p.state is not None and len(p.state.isr) < len(p.state.replicas))),
            ("stratalog_under_min_isr_partition_count",
             "Led partitions whose ISR is below min.insync.replicas (Kafka's UnderMinIsrPartitionCount)",
             sum(1 for p in leading if p.state is not None and len(p.state.isr) < p.min_insync_replicas)),
        )
        for name, text, value in figures:
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], float(value))
            yield gauge
        for name, text, attribute in (
                ("stratalog_isr_shrinks", "ISR shrinks committed while leading (Kafka's IsrShrinksPerSec)",
                 "isr_shrinks"),
                ("stratalog_isr_expands", "ISR expansions committed while leading (Kafka's IsrExpandsPerSec)",
                 "isr_expands")):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], float(sum(getattr(p, attribute) for p in partitions)))
            yield counter


class EngineCollector(Collector):
    """Reads the engine's logs, cleaner and tasks at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        ready = GaugeMetricFamily("stratalog_engine_ready", "1 once the engine has opened its directories")
        ready.add_metric([], 1.0 if engine.ready else 0.0)
        yield ready
        if not engine.ready:
            return
        yield from self._log_dirs()
        yield from self._partitions()
        yield from self._cleaner()
        yield from self._tasks()
        yield from self._checkpoints()

    def _log_dirs(self) -> Iterator[Metric]:
        offline = self.engine.offline_dirs()
        # Kafka's kafka.log:type=LogManager,name=OfflineLogDirectoryCount
        count = GaugeMetricFamily("stratalog_offline_log_directory_count",
                                  "Log directories taken offline by an I/O error (back only after a restart)")
        count.add_metric([], float(len(offline)))
        yield count
        each = GaugeMetricFamily("stratalog_log_directory_offline", "1 if the log directory is offline",
                                 labels=["dir"])
        for path in self.engine.manager.data_dirs:
            each.add_metric([str(path)], 1.0 if path in offline else 0.0)
        yield each

    def _partitions(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        families = {
            "size": GaugeMetricFamily("stratalog_log_size_bytes", "Bytes in the partition's segments", labels=labels),
            "start": GaugeMetricFamily("stratalog_log_start_offset", "Log start offset", labels=labels),
            "end": GaugeMetricFamily("stratalog_log_end_offset", "Log end offset", labels=labels),
            "hw": GaugeMetricFamily("stratalog_log_high_watermark", "High watermark", labels=labels),
            "recovery": GaugeMetricFamily("stratalog_log_recovery_point", "Recovery point (flushed up to)",
                                          labels=labels),
            "segments": GaugeMetricFamily("stratalog_log_segments", "Number of segments", labels=labels),
        }
        for tp, log in sorted(self.engine.manager.logs().items()):
            key = [tp.topic, str(tp.partition)]
            try:
                values = {"size": log.size, "start": log.log_start_offset, "end": log.log_end_offset,
                          "hw": log.high_watermark, "recovery": log.recovery_point,
                          "segments": len(log.segments)}
            except Exception:  # noqa: BLE001 - a log closed by a concurrent topic deletion: skip it
                continue
            for name, value in values.items():
                families[name].add_metric(key, float(value))
        yield from families.values()

    def _cleaner(self) -> Iterator[Metric]:
        engine = self.engine
        cleaner = engine.cleaner
        labels = ["topic", "partition"]
        dirty = GaugeMetricFamily("stratalog_cleaner_dirty_ratio", "Cleanable bytes / (clean + cleanable bytes) "
                                  "of a compacted partition", labels=labels)
        last = GaugeMetricFamily("stratalog_cleaner_last_clean_timestamp_seconds",
                                 "When the cleaner last cleaned the partition", labels=labels)
        read = CounterMetricFamily("stratalog_cleaner_bytes_read", "Bytes the cleaner read", labels=labels)
        written = CounterMetricFamily("stratalog_cleaner_bytes_written", "Bytes the cleaner wrote", labels=labels)
        removed = CounterMetricFamily("stratalog_cleaner_records_removed", "Records compaction removed",
                                      labels=labels)
        passes = CounterMetricFamily("stratalog_cleaner_passes", "Cleanings of the partition", labels=labels)
        uncleanable = GaugeMetricFamily("stratalog_cleaner_uncleanable", "1 if the cleaner gave up on the "
                                        "partition after an error", labels=labels)
        now = engine.manager.clock()
        for tp, log in sorted(engine.manager.logs().items()):
            if not log.config.compact:
                continue
            key = [tp.topic, str(tp.partition)]
            try:
                dirty.add_metric(key, engine.cleanable(log, now).dirty_ratio)
            except Exception:  # noqa: BLE001 - closed under us by a topic deletion
                continue
            status = cleaner.status.get(tp) if cleaner is not None else None
            if status is None:
                continue
            if status.last_clean_ms is not None:
                last.add_metric(key, status.last_clean_ms / 1000)
            read.add_metric(key, float(status.bytes_read_total))
            written.add_metric(key, float(status.bytes_written_total))
            removed.add_metric(key, float(status.records_removed_total))
            passes.add_metric(key, float(status.passes))
            uncleanable.add_metric(key, 1.0 if status.uncleanable_reason else 0.0)
        yield from (dirty, last, read, written, removed, passes, uncleanable)
        deletions = CounterMetricFamily("stratalog_retention_deleted_segments",
                                        "Segments deleted by retention passes")
        deletions.add_metric([], float(engine.retention_deletions_total))
        yield deletions

    def _tasks(self) -> Iterator[Metric]:
        runs = CounterMetricFamily("stratalog_task_runs", "Runs of each maintenance task", labels=["task"])
        last = GaugeMetricFamily("stratalog_task_last_run_timestamp_seconds", "When each task last ran",
                                 labels=["task"])
        failing = GaugeMetricFamily("stratalog_task_failing", "1 if the task's last run failed", labels=["task"])
        for name, record in sorted(self.engine.tasks.items()):
            runs.add_metric([name], float(record.runs))
            if record.last_run_ms is not None:
                last.add_metric([name], record.last_run_ms / 1000)
            failing.add_metric([name], 1.0 if record.last_error else 0.0)
        yield from (runs, last, failing)

    def _checkpoints(self) -> Iterator[Metric]:
        # The files' own age, whoever wrote them (schedule, API trigger, topic deletion):
        # what an operator needs to know is how much recovery a crash now would cost.
        age = GaugeMetricFamily("stratalog_checkpoint_age_seconds", "Seconds since each checkpoint file was written",
                                labels=["dir", "file"])
        now = time.time()
        for directory in self.engine.manager.data_dirs:
            for name in _CHECKPOINT_FILES:
                try:
                    mtime = os.stat(directory / name).st_mtime
                except OSError:
                    continue
                age.add_metric([str(directory), name], max(now - mtime, 0.0))
        yield age
