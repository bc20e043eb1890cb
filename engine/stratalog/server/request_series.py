"""The request path's counters and latency histograms: plain numbers, read when scraped.

Every produce and fetch updates three or four series. prometheus_client's ``Counter`` and
``Histogram`` take a lock and check their state on each update: about 4.3 µs of every produce
on this project's machines against 1.4 µs here (measured alternately in one process), for
series updated on the event loop's thread only.
These series are that thread's plain numbers instead, and ``collect`` (a scrape, on any thread)
reads a copy of them, producing the same samples as prometheus_client's own families would
(``_total`` and ``_created`` of a counter; the cumulative buckets, count, sum and ``_created``
of a histogram).

Only the event loop's thread updates a series: its handlers run there. A scrape copies each
table with one ``dict.copy`` (a C call that runs no Python code, so no other thread runs amid
it) and reads the copy: it never sees a table change size under it. A histogram's cell can be
read between its bucket's count and its sum moving, as prometheus_client's own lock would not
allow: that scrape's sum then lags its count by one observation, and the next scrape agrees.
``_created`` samples follow prometheus_client's switch (``disable_created_metrics``, or
``PROMETHEUS_DISABLE_CREATED_SERIES``), as its own families do.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class CounterSeries:
    """A labelled counter: its value and creation time per label values."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, tuple(labels)
        self.values: dict[tuple[str, ...], list[float]] = {}   # label values -> [total, created]

    def inc(self, labels: tuple[str, ...], amount: float) -> None:
        cell = self.values.get(labels)
        if cell is None:
            self.values[labels] = [amount, time.time()]
        else:
            cell[0] += amount

    def remove(self, labels: tuple[str, ...]) -> None:
        self.values.pop(labels, None)

    def metric(self) -> Metric:
        metric = Metric(self.name, self.documentation, "counter")
        series = [(values, cell[0], cell[1]) for values, cell in self.values.copy().items()]
        for values, total, _ in series:
            metric.add_sample(self.name + "_total", dict(zip(self.labels, values)), total)
        if _created_shown():
            for values, _, created in series:
                metric.add_sample(self.name + "_created", dict(zip(self.labels, values)), created)
        return metric


class HistogramSeries:
    """A histogram, labelled or not, with prometheus_client's bucket bounds and an unlabelled one's
    series present from the start (as prometheus_client shows them)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str], buckets: Sequence[float]) -> None:
        self.name, self.documentation, self.labels = name, documentation, tuple(labels)
        self.bounds = tuple(float(b) for b in buckets)
        self._le = [str(floatToGoString(b)) for b in self.bounds] + ["+Inf"]   # type: ignore[no-untyped-call]
        # label values -> [count per bucket (the last: above every bound)..., sum, created]
        self.values: dict[tuple[str, ...], list[float]] = {}
        if not self.labels:
            self.values[()] = self._fresh()

    def _fresh(self) -> list[float]:
        return [0.0] * (len(self.bounds) + 1) + [0.0, time.time()]

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        cell = self.values.get(labels)
        if cell is None:
            cell = self.values[labels] = self._fresh()
        cell[bisect_left(self.bounds, value)] += 1   # a bucket holds what is at most its bound
        cell[-2] += value

    def metric(self) -> Metric:
        metric = Metric(self.name, self.documentation, "histogram")
        series = [(values, list(cell)) for values, cell in self.values.copy().items()]
        buckets = len(self._le)
        for values, cell in series:
            named = dict(zip(self.labels, values))
            running = 0.0
            for le, count in zip(self._le, cell[:buckets]):
                running += count
                metric.add_sample(self.name + "_bucket", {**named, "le": le}, running)
            metric.add_sample(self.name + "_count", named, running)
            metric.add_sample(self.name + "_sum", named, cell[-2])
        if _created_shown():
            for values, cell in series:
                metric.add_sample(self.name + "_created", dict(zip(self.labels, values)), cell[-1])
        return metric


def _created_shown() -> bool:
    """prometheus_client's own switch for ``_created`` samples (its families read it the same way)."""
    return bool(getattr(prometheus_metrics, "_use_created", True))


class RequestSeriesCollector(Collector):
    def __init__(self, families: Sequence[CounterSeries | HistogramSeries]) -> None:
        self.families = tuple(families)

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield family.metric()
