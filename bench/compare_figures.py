"""The figures of ``bench.compare``: each one's paired runs (Kafka's and stratalog's values and CPU
seconds), their medians' ratio, and the table of every figure the run measures with its ceiling."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from typing import Any

from . import machine
from .workload import MIB, RECORDS_PER_BATCH


@dataclass
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    ceiling: float | None = None
    ceiling_label: str = ""
    kafka: list[float] = field(default_factory=list)
    stratalog: list[float] = field(default_factory=list)
    kafka_cpu: list[float] = field(default_factory=list)  # CPU seconds of the measured span, per run
    stratalog_cpu: list[float] = field(default_factory=list)
    note: str = ""

    def add(self, side: str, value: float, cpu: float | None = None) -> None:
        getattr(self, side).append(value)
        if cpu is not None:
            getattr(self, f"{side}_cpu").append(cpu)

    @property
    def ratio(self) -> float | None:
        if not self.kafka or not self.stratalog:
            return None
        k = statistics.median(self.kafka)
        return statistics.median(self.stratalog) / k if k else None

    @property
    def pair_ratios(self) -> list[float]:
        return [s / k for k, s in zip(self.kafka, self.stratalog) if k]


class FigureSet:
    def __init__(self) -> None:
        self.items: dict[str, Figure] = {}

    def define(self, key: str, label: str, unit: str, higher_is_better: bool, ceiling: float | None = None,
               ceiling_label: str = "", note: str = "") -> Figure:
        figure = Figure(key, label, unit, higher_is_better, ceiling, ceiling_label, note=note)
        self.items[key] = figure
        return figure

    def __getitem__(self, key: str) -> Figure:
        return self.items[key]


def cpu_seconds(result: dict[str, Any]) -> float:
    """A child's CPU seconds (user and system) from its JSON result."""
    return float(result.get("user_cpu_s", 0.0)) + float(result.get("system_cpu_s", 0.0))


def define_figures(args: argparse.Namespace, ceilings: machine.Ceilings) -> FigureSet:
    figures = FigureSet()
    dd_w, dd_r = ceilings.write_mib_s, ceilings.read_mib_s
    batch_bytes = 16_589
    record_share = batch_bytes / RECORDS_PER_BATCH
    size = f"{args.size_mb} MiB" if args.size_mb < 1024 else f"{args.size_mb / 1024:g} GiB"
    csize = f"{args.compact_mb} MiB" if args.compact_mb < 1024 else f"{args.compact_mb / 1024:g} GiB"
    figures.define("append_mib", f"append, 1 KiB records, 16/batch, {size}, no fsync", "MiB/s", True, dd_w, "dd write")
    figures.define("append_rec", "append, records", "rec/s", True, dd_w * MIB / record_share, "dd write / record")
    figures.define("read_mib", f"sequential read, 1 MiB fetches, {size}", "MiB/s", True, dd_r, "dd read")
    figures.define("unclean_open", f"open after unclean shutdown, {size} past the recovery point", "ms", False,
                   args.size_mb / dd_r * 1000, "dd read of the same bytes")
    figures.define("clean_open", f"open after clean shutdown, {args.segments:,} segments", "ms", False, None,
                   "list dir + open/fstat/close each .log")
    for record_bytes, name in ((1024, "1 KiB"), (100, "100-byte")):
        figures.define(f"compact_{record_bytes}_mib", f"compaction, {csize} of {name} records, 10% unique keys",
                       "MiB/s", True, dd_r, "dd read")
        figures.define(f"compact_{record_bytes}_rec", f"compaction, {name} records", "rec/s", True, dd_r * MIB /
                       (record_bytes + 0.0), "dd read / record")
    clients = f"{args.clients} clients"
    for prefix, how in (("", ""), ("wire_", " over the Kafka protocol"), ("lib_", ", library clients"),
                        ("lib_wire_", " over the Kafka protocol, library clients")):
        figures.define(f"{prefix}produce_mib", f"service produce{how}, acks=1, 16 KiB batches, {clients}", "MiB/s",
                       True)
        figures.define(f"{prefix}produce_p99", f"service produce{how}, p99 latency per request", "ms", False)
        figures.define(f"{prefix}fetch_mib", f"service fetch{how}, 16 KiB fetches, {clients}", "MiB/s", True)
        figures.define(f"{prefix}fetch_p99", f"service fetch{how}, p99 latency per request", "ms", False)
        figures.define(f"{prefix}produce_client_us", f"service produce{how}: client CPU per request (this process)",
                       "µs", False)
        figures.define(f"{prefix}fetch_client_us", f"service fetch{how}: client CPU per request (this process)", "µs",
                       False)
    figures.define("kp_produce_mib", "informative: kafka-python KafkaProducer(batch_size=16384, linger_ms=5, acks=1), "
                   "1 KiB records", "MiB/s", True)
    figures.define("kp_produce_p99", "informative: KafkaProducer p99 latency per record (send to ack)", "ms", False)
    figures.define("kp_fetch_mib", "informative: kafka-python KafkaConsumer, max_partition_fetch_bytes=16384",
                   "MiB/s", True)
    return figures
