"""A consumer's fetch across partitions on a real engine: tails read on the event loop, older data
on a thread, one budget and one order across both, file regions or bytes alike."""

from __future__ import annotations

import asyncio

import pytest

from conftest import batch, region_bytes
from stratalog.broker.fetch import FetchedBatches, read_whole_batches, try_read_whole_batches
from stratalog.common.names import TopicPartition

OLD, TAIL = TopicPartition("t", 0), TopicPartition("t", 1)


def _old_segments_and_a_tail(broker) -> None:
    """Two partitions of small segments: OLD read from its first (a thread's read), TAIL from its active one."""
    broker.topics.create_topic("t", 2, {"segment.bytes": "1024"})
    for tp in (OLD, TAIL):
        for _ in range(12):
            broker.log(tp).append(batch(3, value_size=60))


def _reads_on_the_loop(monkeypatch) -> list[FetchedBatches]:
    """What the broker's reads on the event loop return from now on, as they return it."""
    from stratalog.broker import replica_manager

    read: list[FetchedBatches] = []

    def remembered(*args, **kwargs):
        fetched = try_read_whole_batches(*args, **kwargs)
        if fetched is not None:
            read.append(fetched)
        return fetched

    monkeypatch.setattr(replica_manager, "try_read_whole_batches", remembered)
    return read


@pytest.mark.parametrize("zero_copy", [False, True])
def test_a_fetch_reads_tails_on_the_loop_and_older_segments_on_a_thread_in_order_within_one_budget(
        started_broker, zero_copy):
    broker = started_broker()
    _old_segments_and_a_tail(broker)
    assert len(broker.log(OLD).segments) > 2
    tail = broker.log(TAIL).active_segment.base_offset
    # The first read is a tail (on the loop), the second starts in an old segment (a thread goes on
    # from there), the third is a tail again; the budget runs out inside the second.
    reads = [(TAIL, tail, 1 << 20), (OLD, 0, 1 << 20), (TAIL, tail, 1 << 20)]
    first = read_whole_batches(broker.log(TAIL), tail, 1 << 20).data
    budget = len(first) + 700

    async def fetch() -> list:
        return await broker.fetch_many(reads, 0, 1, budget, zero_copy=zero_copy)

    results = asyncio.run(fetch())
    assert all(isinstance(r, FetchedBatches) for r in results)
    try:
        sent = [region_bytes(r.region) if r.region is not None else r.data for r in results]
    finally:
        for r in results:
            r.release()
    # As one blocking reader would give them: each partition's whole batches within what is left.
    expected, left = [], budget
    for tp, offset, _ in reads:
        data = read_whole_batches(broker.log(tp), offset, left, min_one_message=not any(expected)).data
        expected.append(data)
        left = max(0, left - len(data))
    assert sent == expected
    assert sent[0] == first and 0 < len(sent[1]) <= 700 and sent[2] == b""


def test_an_append_that_lands_just_after_a_long_polls_empty_read_answers_it_at_once(started_broker):
    """The first read of a long poll finds nothing; an append lands before the poll starts waiting. The
    poll must not sleep through it (Kafka's DelayedFetch checks again once it is registered): its
    wake-up is taken before a read that can still see the append."""
    broker = started_broker()
    broker.topics.create_topic("t", 1)
    log = broker.log(OLD)
    reads: list[bool] = []
    real_try_read = log.try_read

    def read_then_append(*args, **kwargs):
        found = real_try_read(*args, **kwargs)
        reads.append(found is not None and bool(found.data))
        if len(reads) == 1:   # just after the first, empty read: an append, as a producer's would land
            log.append(batch(2))
            broker.signals.notify(OLD)
        return found

    log.try_read = read_then_append   # type: ignore[method-assign]
    waits: list[float] = []
    real_wait_any = broker.signals.wait_any

    async def recorded_wait_any(events, timeout_s):
        waits.append(timeout_s)
        return await real_wait_any(events, timeout_s)

    broker.signals.wait_any = recorded_wait_any   # type: ignore[method-assign]

    async def long_poll() -> int:
        fetched = await broker.fetch(OLD, 0, 1 << 20, 5_000)
        return fetched.next_offset

    assert asyncio.run(long_poll()) == 2
    # The second read, after the events were taken, found the append: the poll never waited (one
    # that took its events after that read would have slept until the 5 s max wait).
    assert reads == [False, True] and waits == []


def test_a_read_handed_on_without_its_region_keeps_every_other_fact():
    # FetchInfo.without_region lists the fields by hand (dataclasses.replace costs a fetch more):
    # a field added to FetchInfo and not to it would be dropped silently.
    import dataclasses
    from stratalog.records import BatchInfo
    from stratalog.records.transactions import AbortedTransaction
    from stratalog.storage.log_results import FetchInfo
    values = {"requested_offset": 7, "data": b"x", "high_watermark": 9, "log_start_offset": 1, "log_end_offset": 10,
              "first_entry_incomplete": True, "last_stable_offset": 8,
              "aborted_transactions": (AbortedTransaction(3, 4, 5),), "region": object(),
              "start_batch": BatchInfo(0, 80, 2, 7, 8, 1, 2)}
    assert set(values) == {f.name for f in dataclasses.fields(FetchInfo)}, "a FetchInfo field this test lacks"
    info = FetchInfo(**values)
    assert info.without_region() == dataclasses.replace(info, region=None)


def test_a_fetch_cancelled_while_its_read_runs_on_a_thread_closes_the_regions_that_read_leaves(
        started_broker, monkeypatch):
    """A client that goes while its fetch reads an old segment on the io pool cancels the fetch, not the
    read: the regions read before the hop and by the read itself are closed once the read ends, not left
    holding descriptors until their objects are collected."""
    import threading

    from stratalog.broker import replica_manager

    broker = started_broker()
    _old_segments_and_a_tail(broker)
    reading, finish = threading.Event(), threading.Event()
    read_here: list[FetchedBatches] = []

    def slow_read(*args, **kwargs):
        fetched = read_whole_batches(*args, **kwargs)
        read_here.append(fetched)
        reading.set()
        finish.wait(30)
        return fetched

    ahead = _reads_on_the_loop(monkeypatch)   # read before the hop
    monkeypatch.setattr(replica_manager, "read_whole_batches", slow_read)
    tail = broker.log(TAIL).active_segment.base_offset

    async def fetch_then_go() -> None:
        # the tail is read on the loop (a region), the old segment on a thread
        task = asyncio.ensure_future(broker.fetch_many([(TAIL, tail, 1 << 20), (OLD, 0, 1 << 20)], 0, 1, 1 << 20,
                                                       zero_copy=True))
        await asyncio.get_running_loop().run_in_executor(None, reading.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(fetch_then_go())
    finish.set()
    broker.io.shutdown(wait=True)   # every worker has ended: the read, and the callbacks it ran on finishing
    regions = [r.region for r in ahead + read_here if r.region is not None]
    assert len(regions) >= 2   # the tail's, read before the hop, and the old segment's
    assert all(region.file.closed for region in regions)


def test_a_fetch_refused_by_a_stopped_io_pool_closes_the_regions_it_read_before(started_broker, monkeypatch):
    """A server stopping shuts the io pool: a fetch whose next read would go there is refused, and the
    regions its first pass read on the loop are closed, not left to the collector."""
    broker = started_broker()
    _old_segments_and_a_tail(broker)
    ahead = _reads_on_the_loop(monkeypatch)
    tail = broker.log(TAIL).active_segment.base_offset
    broker.io.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        asyncio.run(broker.fetch_many([(TAIL, tail, 1 << 20), (OLD, 0, 1 << 20)], 0, 1, 1 << 20, zero_copy=True))
    regions = [r.region for r in ahead if r.region is not None]
    assert regions and all(region.file.closed for region in regions)
