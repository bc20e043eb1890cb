"""The broker's data path, whatever transport carried the request (Kafka's ``ReplicaManager``).

Transports (the HTTP server; later the Kafka-protocol server) parse a request, call one method
here and encode what it returns. Everything between — which log, validation and the
all-or-nothing rule, acks, waking fetches that wait at the high watermark, reading whole
batches up to it, offsets by time, DeleteRecords — is decided here, once for every transport.

Blocking engine calls run on thread pools, never on the event loop. Two pools, because their
work differs in kind: ``io`` runs short calls on the request path (appends, fsyncs, reads, topic
admin), ``maintenance`` the long passes (cleaning, retention) one or two at a time, so a slow
pass can never occupy the threads that appends need.

A partition the controller never mentions has one replica, this engine's: it is the leader
and the high watermark follows the log end offset, and acks=all means fsynced. A replicated
partition (``replication.ReplicaSet``) is produced to through its ``Partition``: acks=all then
means "every in-sync replica has it" and waits, without holding a thread, until the high
watermark passes the batch or ``request.timeout.ms`` runs out; a follower refuses produce and
consumer fetches (NOT_LEADER_OR_FOLLOWER: no fetching from followers, KIP-392).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from stratalog.broker.delayed_produce import DelayedProduces
from stratalog.broker.engine import Engine
from stratalog.broker.groups.offsets_records import INTERNAL_TOPICS
from stratalog.broker.fetch import FetchedBatches, read_whole_batches, try_read_whole_batches
from stratalog.broker.partitioner import partition_for_key
from stratalog.broker.partition import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    Partition,
    ReplicaFetch,
    ReplicaFetchResult,
    check_leader_epoch,
    diverging_epoch,
)
from stratalog.broker.produce import Acks, ProduceResult, append_to_log, append_to_logs, try_append_to_log
from stratalog.broker.replication import ReplicaSet
from stratalog.broker.signals import AppendSignals, Signal
from stratalog.broker.wake_timer import WakeTimer
from stratalog.broker.topics import TopicAdmin
from stratalog.common.errors import (
    InvalidTopicError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    StratalogError,
)
from stratalog.common.names import TopicPartition
from stratalog.storage.isolation import FetchIsolation
from stratalog.storage.log import Log
from stratalog.storage.timestamp_search import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
)
from stratalog.storage.retention import delete_records

T = TypeVar("T")


class ReplicaManager:
    def __init__(self, engine: Engine, *, io_threads: int = 16, maintenance_threads: int = 2) -> None:
        self.engine = engine
        self.topics = TopicAdmin(engine.manager)
        self.io = ThreadPoolExecutor(io_threads, thread_name_prefix="stratalog-io")
        self.maintenance = ThreadPoolExecutor(maintenance_threads, thread_name_prefix="stratalog-maintenance")
        self.timer = WakeTimer()   # the deadlines of every wait below
        self.signals = AppendSignals(timer=self.timer)   # consumers' fetches: appends and high-watermark moves wake them
        # Followers' fetches read to the log end, not the high watermark: only appends and news wake them.
        self.replica_signals = AppendSignals(self.signals.counts, self.timer)
        self.delayed_produces = DelayedProduces(self.timer)   # acks=all produces waiting for the high watermark
        # A partition's leadership news (the groups' coordinator waits on it).
        self.news_signals = AppendSignals(timer=self.timer)
        self.shutting_down = False  # waiting fetches answer at once from now on
        self._round_robin: dict[str, Iterator[int]] = {}
        self.replicas: ReplicaSet | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach_replicas(self, replicas: ReplicaSet, loop: asyncio.AbstractEventLoop) -> None:
        """Take part in replication; HW moves (on any thread) wake this loop's waiters."""
        self.replicas = replicas
        self._loop = loop
        replicas.on_high_watermark = self._partition_news
        replicas.on_high_watermark_advanced = self._high_watermark_advanced

    def _partition_news(self, tp: TopicPartition) -> None:
        """Leadership, the ISR or the replica set changed (and perhaps the HW with it): every waiter on
        ``tp`` checks again."""
        # Nobody waiting is the common case on a follower, told of every fetch round it applies; the
        # news is in before this check, so a waiter that registers after it sees the news.
        if not (self.signals.awaited(tp) or self.replica_signals.awaited(tp) or self.delayed_produces.awaited(tp)
                or self.news_signals.awaited(tp)):
            return

        def wake() -> None:
            self.signals.notify(tp)           # consumers waiting for committed data
            self.replica_signals.notify(tp)   # followers: a demoted leader's long polls answer now
            self.delayed_produces.wake(tp)    # acks=all produces
            self.news_signals.notify(tp)

        self._on_loop(wake)

    def _high_watermark_advanced(self, tp: TopicPartition) -> None:
        """Only the HW moved (a follower's fetch acknowledged): consumers and the acks=all produces it
        passed wake; the followers' long polls, which read to the log end, do not."""
        if not (self.signals.awaited(tp) or self.delayed_produces.awaited(tp)):
            return

        def wake() -> None:
            self.signals.notify(tp)
            partition = self.replicas.get(tp) if self.replicas is not None else None
            if partition is None:
                self.delayed_produces.wake(tp)
            else:   # the HW now, not at the move: a later move may have overtaken this wake-up
                self.delayed_produces.complete_below(tp, partition.log.high_watermark)

        self._on_loop(wake)

    def _on_loop(self, wake: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:   # a follower's fetch answered on the loop: no need to wake it through its pipe
            wake()
        else:
            loop.call_soon_threadsafe(wake)

    def _leader_or_refuse(self, tp: TopicPartition, what: str) -> Partition | None:
        """The partition's leader replica here; None for a single-copy engine (no replication).

        With replication on, a partition the controller has not spoken of yet (just after a restart)
        is served by nobody here, and a follower sends clients to its leader.
        """
        if self.replicas is None:
            return None
        partition = self.replicas.get(tp)
        if partition is None:
            self.log(tp)   # no replica here at all: UNKNOWN_TOPIC_OR_PARTITION, as for a single copy
            raise NotLeaderOrFollowerError(f"{what} {tp}: broker {self.replicas.broker_id} awaits the "
                                           "controller's state for it; try again, or ask its leader")
        state = partition.state
        if state is None or not partition.is_leader:
            leader = state.leader if state is not None else -1
            where = self.replicas.endpoints.get(leader) if leader >= 0 else None
            raise NotLeaderOrFollowerError(
                f"{what} {tp}: broker {partition.local_id} is not its leader; its leader is "
                + (f"broker {leader}" + (f" at {where}" if where else "") if leader >= 0 else "none (offline)"),
                leader_id=leader if leader >= 0 else None, leader_url=where,
                leader_epoch=state.leader_epoch if state is not None else None)
        return partition

    def _wake_fetches(self, tp: TopicPartition) -> None:
        """Wake the fetches waiting on ``tp``, consumers' and followers': an append, or its deletion."""
        self.signals.notify(tp)
        self.replica_signals.notify(tp)

    # -- running blocking work ----------------------------------------------------------------
    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking engine call on the io pool."""
        return await asyncio.get_running_loop().run_in_executor(self.io, functools.partial(fn, *args))

    async def run_maintenance(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.maintenance, functools.partial(fn, *args))

    def log(self, tp: TopicPartition) -> Log:
        return self.engine.manager.log_of(tp)

    # -- produce --------------------------------------------------------------------------------
    async def append_records(self, tp: TopicPartition, batches: Sequence[bytes | bytearray], acks: Acks,
                             now_ms: int, *, internal: bool = False) -> ProduceResult:
        """One partition's batches, contiguous, all or none. Internal topics (``__consumer_offsets``)
        take only the engine's own writes (``internal``), as Kafka's appendToLocalLog."""
        if not internal:
            refuse_internal(tp.topic, "produce to")
        partition = self._leader_or_refuse(tp, "produce to")
        if partition is not None:
            return await self._append_replicated(partition, batches, acks)
        log = self.log(tp)
        result = try_append_to_log(log, batches, acks, now_ms)   # on the loop when it need not block
        if result is None:
            result = await self.run(append_to_log, log, batches, acks, now_ms)
        self._wake_fetches(tp)
        return result

    async def _append_replicated(self, partition: Partition, batches: Sequence[bytes | bytearray],
                                 acks: Acks) -> ProduceResult:
        tp = partition.log.topic_partition
        required = -1 if acks is Acks.ALL else 1

        def append() -> tuple[ProduceResult, int]:
            with partition.lock:
                infos = partition.append_as_leader(batches, required_acks=required)
                assert partition.state is not None
                return ProduceResult.of(infos, partition.log.log_start_offset), partition.state.leader_epoch

        # On the loop when nothing would block (most appends: a write to the page cache), saving
        # the hop to the io pool and back that every acks=all round trip would otherwise pay.
        inline = partition.try_append_as_leader(batches, required_acks=required)
        if inline is not None:
            result, epoch = ProduceResult.of(inline[0], partition.log.log_start_offset), inline[1]
        else:
            result, epoch = await self.run(append)
        self._wake_fetches(tp)
        if acks is Acks.ALL:
            await self._await_high_watermark(partition, result.last_offset, epoch)
        return result

    async def _await_high_watermark(self, partition: Partition, last_offset: int, epoch: int) -> None:
        """Kafka's DelayedProduce: until the ISR has the batch, the leadership moves, or the timeout."""
        tp = partition.log.topic_partition
        loop = asyncio.get_running_loop()
        timeout_ms = self.engine.config.request_timeout_ms
        deadline = loop.time() + timeout_ms / 1000
        woken = self.delayed_produces.watch(tp, last_offset)   # before the check: a move in between wakes it
        try:
            while True:
                if partition.acks_all_complete(last_offset, epoch):
                    return
                remaining = deadline - loop.time()
                if remaining <= 0 or self.shutting_down:
                    why = "before this engine began to shut down" if self.shutting_down else \
                        f"within request.timeout.ms={timeout_ms}"
                    raise RequestTimedOutError(
                        f"produce to {tp}: the in-sync replicas did not all have offset {last_offset} {why}; "
                        "the batch is in the leader's log and may still commit")
                if woken.done():   # news that did not commit it: listed again before the next check
                    woken = self.delayed_produces.watch(tp, last_offset)
                    continue
                await self.delayed_produces.wait(woken, deadline)
        finally:
            # Not taken out by a move or news (its deadline came, or it gave up): still listed.
            if not woken.done() or woken.cancelled() or not woken.result():
                self.delayed_produces.discard(tp, woken)

    async def append_to_partitions(self, topic: str, batches: Mapping[int, bytes | bytearray], acks: Acks,
                                   now_ms: int) -> dict[int, ProduceResult]:
        """One batch per partition of ``topic``; one refused batch refuses the whole request."""
        refuse_internal(topic, "produce to")
        if self.replicas is not None:
            return await self._append_each_replicated(topic, batches, acks, now_ms)
        logs = {self.log(TopicPartition(topic, p)): [batch] for p, batch in sorted(batches.items())}
        results = await self.run(append_to_logs, logs, acks, now_ms)
        out = {}
        for log, result in results.items():
            self._wake_fetches(log.topic_partition)
            out[log.topic_partition.partition] = result
        return out

    async def _append_each_replicated(self, topic: str, batches: Mapping[int, bytes | bytearray], acks: Acks,
                                      now_ms: int) -> dict[int, ProduceResult]:
        # Every batch is validated before the first is appended, so a bad one still refuses all.
        def validate() -> None:
            for p, batch in batches.items():
                self.log(TopicPartition(topic, p)).prepare_append([batch], now_ms=now_ms)

        await self.run(validate)
        results = await asyncio.gather(*(self.append_records(TopicPartition(topic, p), [batch], acks, now_ms)
                                         for p, batch in sorted(batches.items())))
        return {p: r for p, r in zip(sorted(batches), results)}

    def held_partitions(self, topic: str) -> list[int]:
        return sorted(self.topics.describe_topic(topic).partitions)

    def partition_for(self, topic: str, key: bytes | None, partitions: int) -> int:
        """Kafka's default partitioner: murmur2 of the key, round-robin for records without one."""
        if key is not None:
            return partition_for_key(key, partitions)
        counter = self._round_robin.get(topic)
        if counter is None:
            counter = self._round_robin[topic] = itertools.count()
        return next(counter) % partitions

    # -- fetch ----------------------------------------------------------------------------------
    async def fetch(self, tp: TopicPartition, offset: int | None, max_bytes: int, max_wait_ms: int,
                    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, *,
                    zero_copy: bool = False) -> FetchedBatches:
        """Whole batches from ``offset`` (the log start offset if None), up to the high watermark (the
        last stable offset for read_committed): ``fetch_many`` of one partition, its error raised.

        With nothing to return it waits up to ``max_wait_ms`` for an append (Kafka's DelayedFetch),
        then reads again; ``read_seconds`` is the time of the read that answered.
        """
        if offset is None:
            self._leader_or_refuse(tp, "fetch from")
            offset = self.log(tp).log_start_offset
        [answer] = await self.fetch_many([(tp, offset, max_bytes)], max_wait_ms, 1, max_bytes, isolation,
                                         zero_copy=zero_copy)
        if isinstance(answer, StratalogError):
            raise answer
        return answer

    async def fetch_many(self, reads: Sequence[tuple[TopicPartition, int, int]], max_wait_ms: int, min_bytes: int,
                         max_bytes: int, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, *,
                         zero_copy: bool = False) -> list[FetchedBatches | StratalogError]:
        """A consumer's fetch of several partitions (Kafka's DelayedFetch across them): each (partition,
        offset, partition max bytes) read in order until ``max_bytes`` is used up -- the first batch
        always, so one larger than the limits still moves the consumer -- then, while fewer than
        ``min_bytes`` came back and nothing failed, a wait of up to ``max_wait_ms`` for an append to
        any of them, and the reads again. ``zero_copy``: the batches are file regions, which the
        caller sends and closes (reads not returned are closed here)."""
        # The first pass reads on the loop, without events: most fetches (a consumer keeping up, one
        # that may not wait) are answered by it, and nothing more is set up for them. The tail of a
        # log is read here on the loop (Log.try_read): a hop to the io pool and back costs more than
        # the read, and each hop waits its turn for the interpreter lock.
        results = self._read_in_order(reads, [], max_bytes, isolation, zero_copy, blocking=False)
        if len(results) == len(reads) and (max_wait_ms <= 0 or self._answered(results, min_bytes)):
            return results
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        # One that must wait takes its events and reads again before it waits, so that an append
        # between the read and the wait still wakes it.
        events: list[Signal] | None = None
        while True:
            if len(results) < len(reads):
                results = await self._read_off_loop(reads, results, max_bytes, isolation, zero_copy)
            remaining = deadline - loop.time()
            if self._answered(results, min_bytes) or remaining <= 0 or not reads:
                return results
            _release(results)   # read again, after taking the events or after the wait
            if events is not None:
                await self.signals.wait_any(events, remaining)
            # Taken before the reads they guard, and only for partitions that exist: a request naming
            # made-up ones must not leave a signal behind for each.
            logs = self.engine.manager.logs_view()
            events = [self.signals.event(tp) for tp, _, _ in reads if tp in logs]
            results = self._read_in_order(reads, [], max_bytes, isolation, zero_copy, blocking=False)

    async def _read_off_loop(self, reads: Sequence[tuple[TopicPartition, int, int]],
                             out: list[FetchedBatches | StratalogError], max_bytes: int, isolation: FetchIsolation,
                             zero_copy: bool) -> list[FetchedBatches | StratalogError]:
        """``_read_in_order`` on the io pool, going on from ``out``. A fetch cancelled meanwhile (its
        client went) leaves the read running: the regions it holds, and those the read adds to
        ``out``, are closed once it ends, not left open until their objects are collected. A pool
        already shut down (the server stopping) refuses the read: ``out``'s regions are closed then."""
        try:
            job = self.io.submit(self._read_in_order, reads, out, max_bytes, isolation, zero_copy, True)
        except RuntimeError:
            _release(out)
            raise
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            job.add_done_callback(lambda _: _release(out))   # at once if the read never began
            raise

    def _answered(self, results: Sequence[FetchedBatches | StratalogError], min_bytes: int) -> bool:
        """Whether a fetch's reads are its answer without a wait: ``min_bytes`` came, or one failed, or
        the server is stopping."""
        size = 0
        for result in results:
            if not isinstance(result, FetchedBatches):
                return True
            size += result.size
        return size >= min_bytes or self.shutting_down

    def _read_in_order(self, reads: Sequence[tuple[TopicPartition, int, int]],
                       out: list[FetchedBatches | StratalogError], max_bytes: int, isolation: FetchIsolation,
                       zero_copy: bool, blocking: bool) -> list[FetchedBatches | StratalogError]:
        """``fetch_many``'s reads from ``len(out)`` on, appended to ``out``; without ``blocking``, it stops
        at the first that might block, for a thread to finish."""
        budget, min_one_message = max_bytes, True
        for r in out:
            if isinstance(r, FetchedBatches) and r.size:
                budget, min_one_message = budget - r.size, False
        budget = max(0, budget)
        read = read_whole_batches if blocking else try_read_whole_batches
        try:
            for tp, offset, partition_max in reads[len(out):] if out else reads:
                try:
                    self._leader_or_refuse(tp, "fetch from")
                    fetched = read(self.log(tp), offset, min(partition_max, budget), isolation,
                                   min_one_message=min_one_message, zero_copy=zero_copy)
                except StratalogError as error:
                    out.append(error)
                    continue
                if fetched is None:
                    return out
                if fetched.size:
                    min_one_message = False
                budget = max(0, budget - fetched.size)
                out.append(fetched)
        except BaseException:
            _release(out)
            raise
        return out

    # -- replication: a follower's fetch ----------------------------------------------------------
    async def replica_fetch(self, tp: TopicPartition, fetch: ReplicaFetch, max_wait_ms: int,
                            min_bytes: int = 1) -> ReplicaFetchResult:
        """A follower's fetch of one partition: ``replica_fetch_many`` with one entry, its error raised."""
        [answer] = await self.replica_fetch_many([(tp, fetch)], max_wait_ms, min_bytes)
        if isinstance(answer, StratalogError):
            raise answer
        return answer

    async def replica_fetch_many(self, fetches: Sequence[tuple[TopicPartition, ReplicaFetch]], max_wait_ms: int,
                                 min_bytes: int = 1, max_bytes: int = 1 << 30
                                 ) -> list[ReplicaFetchResult | StratalogError]:
        """A follower's fetch of every partition it follows here, in one request (Kafka's FetchRequest
        from a replica): each partition's answer or error, in order. With fewer than ``min_bytes`` in
        all, it waits for an append to any of them, up to ``max_wait_ms``. ``max_bytes`` bounds the
        whole answer; the first partition with data always gets some, as in Kafka."""
        replicas = self.replicas
        if replicas is None:
            raise NotLeaderOrFollowerError("replica fetch: this engine takes no part in replication")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000

        def fetch_all(out: list[ReplicaFetchResult | StratalogError], *, blocking: bool, acknowledge: bool
                      ) -> list[ReplicaFetchResult | StratalogError]:
            """Answers ``fetches`` from ``len(out)`` on; without ``blocking``, stops at the first that
            would block (a busy lock, data off the tail), for a thread to finish. ``acknowledge``: the
            first pass, which takes each fetch offset as the follower's acknowledgement; after a wait
            the fetches only read again."""
            budget = max_bytes - sum(len(r.data) for r in out if isinstance(r, ReplicaFetchResult)) if out else max_bytes
            for tp, fetch in fetches[len(out):]:
                try:
                    one = fetch if 0 <= fetch.max_bytes <= budget else \
                        dataclasses.replace(fetch, max_bytes=max(min(fetch.max_bytes, budget), 0))
                    if blocking:
                        result = replicas.fetch_for_follower(tp, one, acknowledge=acknowledge)
                    else:
                        maybe = replicas.try_fetch_for_follower(tp, one, acknowledge=acknowledge)
                        if maybe is None:
                            return out
                        result = maybe
                except StratalogError as error:
                    out.append(error)
                    continue
                budget -= len(result.data)
                out.append(result)
            return out

        acknowledge = True
        while True:
            events = [self.replica_signals.event(tp) for tp, _ in fetches]
            # The tail of a log is read here on the loop: a hop to the io pool and back costs a
            # follower's round more than the read, and every acks=all produce waits for two rounds.
            results = fetch_all([], blocking=False, acknowledge=acknowledge)
            if len(results) < len(fetches):
                results = await self.run(functools.partial(fetch_all, results, blocking=True,
                                                           acknowledge=acknowledge))
            acknowledge = False
            remaining = deadline - loop.time()
            size, urgent = 0, False
            for r in results:   # a loop, not sum() and any() of generators: every follower's round passes here
                if isinstance(r, StratalogError) or r.diverging_epoch or r.out_of_range:
                    urgent = True
                else:
                    size += len(r.data)
            if size >= min_bytes or urgent or remaining <= 0 or self.shutting_down:
                return results
            await self.replica_signals.wait_any(events, remaining)

    # -- offsets --------------------------------------------------------------------------------
    async def list_offsets(self, tp: TopicPartition, timestamp: int,
                           isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> OffsetAndTimestamp | None:
        """Kafka's ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, or a time.

        Nothing at or past the high watermark is committed, so none of it is listed; for read_committed
        nothing at or past the last stable offset either (latest is the LSO), as Kafka's isolation level.
        ``LOG_END`` (a follower's question) lists from the whole log: latest is the log end offset.
        """
        partition = self._leader_or_refuse(tp, "list offsets of")
        log = self.log(tp)
        found = await self.run(log.offset_for_timestamp, timestamp)
        if isolation is FetchIsolation.LOG_END:
            return found
        if isolation is FetchIsolation.TXN_COMMITTED:
            bound = await self.run(log.last_stable_offset)
        elif partition is not None:
            bound = log.high_watermark
        else:
            return found   # one copy: its high watermark is its log end
        if found is None or timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return found
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(bound, -1)
        return found if found.offset < bound else None

    def check_consumer_position(self, tp: TopicPartition, fetch_offset: int, current_leader_epoch: int = -1,
                                last_fetched_epoch: int = -1) -> tuple[int, int] | None:
        """A consumer's fetch position, checked as Kafka's ``Partition.fetchRecords`` does before it
        reads: the leader epoch the consumer believes in (raises FENCED_LEADER_EPOCH if older,
        UNKNOWN_LEADER_EPOCH if newer) and, when it names the epoch of the last batch it fetched,
        whether its log diverged from this one there (KIP-320): (epoch, end offset) to move back to,
        or None to read. Cheap: the epoch cache only, no I/O."""
        partition = self._leader_or_refuse(tp, "fetch from")
        log = self.log(tp)
        current = partition.state.leader_epoch if partition is not None and partition.state else log.leader_epoch
        check_leader_epoch(current_leader_epoch, current, f"fetch from {tp}")
        diverged = diverging_epoch(log, fetch_offset, last_fetched_epoch)
        if diverged == (UNDEFINED_EPOCH, UNDEFINED_OFFSET):
            raise OffsetOutOfRangeError(f"fetch from {tp}: the end of the last fetched epoch {last_fetched_epoch} "
                                        "is not known here")
        if last_fetched_epoch >= 0 and fetch_offset < log.log_start_offset:
            raise OffsetOutOfRangeError(f"fetch from {tp}: offset {fetch_offset} is below the log start offset "
                                        f"{log.log_start_offset}")
        return diverged

    async def end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int,
                                   current_leader_epoch: int = -1) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch for a client: (the largest epoch at or below ``leader_epoch``
        in the leader's log, the offset where it ends), or (-1, -1) for an epoch the log does not
        know. A consumer asks it after a leader change to learn whether its position survived."""
        partition = self._leader_or_refuse(tp, "offsets for leader epoch of")
        log = self.log(tp)
        current = partition.state.leader_epoch if partition is not None and partition.state else log.leader_epoch
        check_leader_epoch(current_leader_epoch, current, f"offsets for leader epoch of {tp}")

        def look_up() -> tuple[int, int] | None:
            with log.lock:
                return log.epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
        return await self.run(look_up) or (-1, -1)

    def leader_epoch_of(self, tp: TopicPartition, offset: int) -> int:
        """The leader epoch of the batch holding ``offset`` (Kafka's ListOffsets answers it); -1 unknown."""
        return self.log(tp).epoch_cache.epoch_for_offset(offset)

    async def delete_records(self, tp: TopicPartition, before_offset: int) -> tuple[int, int]:
        """Kafka's DeleteRecords (-1: the high watermark); (the new log start offset, segments left)."""
        self._leader_or_refuse(tp, "delete records of")
        log = self.log(tp)

        def run() -> tuple[int, int]:
            target = log.high_watermark if before_offset == -1 else before_offset
            if target > log.high_watermark:
                raise OffsetOutOfRangeError(f"{tp}: beforeOffset {target} is past the high watermark "
                                            f"{log.high_watermark}")
            return delete_records(log, target), len(log.segments)

        return await self.run(run)

    # -- topics ---------------------------------------------------------------------------------
    async def delete_topic(self, topic: str) -> tuple[list[int], list[str]]:
        """Delete ``topic``; fetches waiting on its partitions answer now. (partitions, renamed dirs)

        With replication on, its partitions first stop being replicas here (Kafka's StopReplica with
        deletion, as the operator's agent does it): no fetcher appends to a log being deleted, and an
        acks=all produce waiting on one answers NOT_LEADER_OR_FOLLOWER now, not at request.timeout.ms."""
        refuse_internal(topic, "delete")
        def run() -> tuple[list[int], list[str]]:
            partitions = self.held_partitions(topic)   # an unknown topic is refused here, before anything

            def delete() -> list[str]:
                return [str(p) for p in self.topics.delete_topic(topic)]

            return partitions, delete() if self.replicas is None else self.replicas.remove_topic_then(topic, delete)

        partitions, renamed = await self.run(run)
        for partition in partitions:
            self._wake_fetches(TopicPartition(topic, partition))
        return partitions, renamed

    # -- shutdown -------------------------------------------------------------------------------
    def begin_shutdown(self) -> None:
        """Answer every waiting fetch now; new ones do not wait."""
        self.shutting_down = True
        self.signals.notify_all()
        self.replica_signals.notify_all()
        # acks=all produces are left to finish: their followers may still acknowledge them while the
        # engine drains, and an answer of "timed out" now would make producers without idempotence
        # write them twice.

    def shutdown_pools(self) -> None:
        """Wait for every engine call already running (appends in flight finish), then stop the pools."""
        self.io.shutdown(wait=True)
        self.maintenance.shutdown(wait=True)


def refuse_internal(topic: str, what: str) -> None:
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"{what} {topic!r}: it is an internal topic, written only by the engine's group "
                                "coordinator")


def _release(results: Sequence[FetchedBatches | StratalogError]) -> None:
    for result in results:
        if isinstance(result, FetchedBatches):
            result.release()
