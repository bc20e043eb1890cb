"""The request path's plain-number series read as prometheus_client's own Counter and Histogram would."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from stratalog.server.request_series import CounterSeries, HistogramSeries, RequestSeriesCollector

BUCKETS = (0.0005, 0.001, 0.0025, 0.01, 1.0, 10.0)
LABELS = st.sampled_from([("a", "0"), ("a", "1"), ("b", "0")])
ACKS = st.sampled_from([("1",), ("-1",)])
# Values on the bounds too: a bucket holds what is at most its bound.
VALUES = st.one_of(st.sampled_from(BUCKETS), st.floats(0, 20, allow_nan=False))
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("inc"), LABELS, st.integers(0, 1 << 20)),
    st.tuples(st.just("remove"), LABELS, st.just(0)),
    st.tuples(st.just("observe"), ACKS, VALUES),
    st.tuples(st.just("observe_plain"), st.just(()), VALUES),
), max_size=40)


def masked(registry: CollectorRegistry) -> tuple[str, list[float]]:
    """The exposition with each creation time replaced by a mark, and those times."""
    lines, created = [], []
    for line in generate_latest(registry).decode().splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name.endswith("_created") and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            lines.append(head + " CREATED")
            created.append(float(value))
        else:
            lines.append(line)
    return "\n".join(lines), created


def families(operations):
    """Our series and prometheus_client's, each in a registry of its own, after ``operations``."""
    ours, theirs = CollectorRegistry(auto_describe=False), CollectorRegistry(auto_describe=False)
    counter = CounterSeries("t_bytes", "bytes", ["topic", "partition"])
    latency = HistogramSeries("t_latency_seconds", "latency", ["acks"], BUCKETS)
    plain = HistogramSeries("t_plain_seconds", "plain latency", [], BUCKETS)
    ours.register(RequestSeriesCollector([counter, latency, plain]))
    their_counter = Counter("t_bytes", "bytes", ["topic", "partition"], registry=theirs)
    their_latency = Histogram("t_latency_seconds", "latency", ["acks"], buckets=BUCKETS, registry=theirs)
    their_plain = Histogram("t_plain_seconds", "plain latency", buckets=BUCKETS, registry=theirs)
    for operation, labels, value in operations:
        if operation == "inc":
            counter.inc(labels, value)
            their_counter.labels(*labels).inc(value)
        elif operation == "remove":
            counter.remove(labels)
            if labels in their_counter._metrics:   # prometheus_client raises on an unknown child
                their_counter.remove(*labels)
        elif operation == "observe":
            latency.observe(labels, value)
            their_latency.labels(*labels).observe(value)
        else:
            plain.observe((), value)
            their_plain.observe(value)
    return ours, theirs


@given(OPERATIONS)
def test_the_series_expose_what_prometheus_clients_own_families_expose(operations) -> None:
    started = time.time()
    ours, theirs = families(operations)
    our_text, our_created = masked(ours)
    their_text, their_created = masked(theirs)
    assert our_text == their_text
    assert len(our_created) == len(their_created)
    assert all(started <= created <= time.time() for created in our_created)


def test_creation_times_are_left_out_where_prometheus_client_is_told_to() -> None:
    operations = [("inc", ("a", "0"), 5), ("observe", ("1",), 0.001), ("observe_plain", (), 0.2)]
    disable_created_metrics()
    try:
        ours, theirs = families(operations)
        assert "_created" not in generate_latest(ours).decode()
        assert generate_latest(ours) == generate_latest(theirs)
    finally:
        enable_created_metrics()
    assert "_created" in generate_latest(families(operations)[0]).decode()
