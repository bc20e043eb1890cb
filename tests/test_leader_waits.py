"""What a leader's waiting requests wake for: acks=all produces for the high watermark passing their
batch, followers' long polls for new data (Kafka's DelayedProduce and DelayedFetch purgatories)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stratalog.broker.controller import InProcessController
from stratalog.broker.delayed_produce import DelayedProduces
from stratalog.broker.partition import ReplicaFetch
from stratalog.broker.produce import Acks
from stratalog.broker.replication import ReplicaSet, ReplicationSettings
from stratalog.common.errors import NotLeaderOrFollowerError, RequestTimedOutError
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.server.replication import LeaderSession

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
NOWHERE = {b: "http://127.0.0.1:9" for b in range(3)}   # the followers' endpoints: never asked


def one_record(value: bytes = b"v") -> bytes:
    return build_batch([Record(0, int(time.time() * 1000), None, value)])


# -- the purgatory on its own ---------------------------------------------------------------------
def test_a_high_watermark_move_completes_the_produces_it_passed_and_no_other():
    async def run() -> list[bool]:
        waiters = DelayedProduces()
        at_0, at_1, at_5 = (waiters.watch(TP, offset) for offset in (0, 1, 5))
        elsewhere = waiters.watch(OTHER, 0)
        waiters.complete_below(TP, 2)   # offsets 0 and 1 are below the high watermark now
        return [at_0.done(), at_1.done(), at_5.done(), elsewhere.done(), waiters.awaited(TP)]

    assert asyncio.run(run()) == [True, True, False, False, True]


def test_news_of_a_partition_wakes_every_produce_waiting_on_it():
    async def run() -> list[bool]:
        waiters = DelayedProduces()
        ahead = [waiters.watch(TP, offset) for offset in (3, 9)]
        elsewhere = waiters.watch(OTHER, 0)
        waiters.wake(TP)
        return [f.done() for f in ahead] + [elsewhere.done(), waiters.awaited(TP), waiters.awaited(OTHER)]

    assert asyncio.run(run()) == [True, True, False, False, True]


def test_a_produce_whose_deadline_came_is_dropped_when_the_high_watermark_passes_it():
    async def run() -> tuple[bool, bool, bool, bool]:
        waiters = DelayedProduces()
        gave_up = waiters.watch(TP, 0)
        timed_out = not await waiters.wait(gave_up, asyncio.get_running_loop().time() + 0.01)
        listed = waiters.awaited(TP)
        waiters.complete_below(TP, 1)            # passes it: its entry goes, its False stays
        return timed_out, listed, gave_up.result(), waiters.awaited(TP)

    assert asyncio.run(run()) == (True, True, False, False)


def test_a_produce_that_stops_waiting_is_cancelled_and_never_completed_by_a_later_move():
    async def run() -> tuple[bool, bool, bool, bool]:
        waiters = DelayedProduces()
        staying, leaving = waiters.watch(TP, 4), waiters.watch(TP, 2)
        waiters.discard(TP, leaving)
        waiters.complete_below(TP, 3)            # passes the one that left: it stays cancelled
        still_listed = waiters.awaited(TP)
        waiters.discard(TP, staying)
        return leaving.cancelled(), staying.cancelled(), still_listed, waiters.awaited(TP)

    assert asyncio.run(run()) == (True, True, True, False)


def test_produces_given_up_on_do_not_pile_up_while_the_high_watermark_stands_still():
    """Followers gone: every produce times out above a high watermark that never moves. Each one
    given up on is dropped in time (the heap is rebuilt once more than half are such), so that
    nothing is left listed once all have gone."""
    async def run() -> list[bool]:
        waiters = DelayedProduces()
        futures = [waiters.watch(TP, 10 + i) for i in range(100)]
        listed = []
        for future in futures:
            waiters.discard(TP, future)
            listed.append(waiters.awaited(TP))
        return listed

    listed = asyncio.run(run())
    assert all(listed[:-1]) and not listed[-1]


# -- on a real engine leading a partition whose followers are this test ---------------------------
@pytest.fixture
def replicated(started_broker: Callable[..., Any]
               ) -> Iterator[Callable[..., tuple[Any, InProcessController, ReplicaSet]]]:
    """A real engine (``settings`` its config) with a replica set under the in-process controller, the
    replica set stopped after the test (before the engine)."""
    made: list[ReplicaSet] = []

    def make(**settings: str) -> tuple[Any, InProcessController, ReplicaSet]:
        broker = started_broker(**settings)
        controller = InProcessController()
        made.append(ReplicaSet(broker.engine.manager, ReplicationSettings(0), controller, LeaderSession,
                               clock=broker.engine.clock))
        return broker, controller, made[-1]

    yield make
    for replicas in made:
        replicas.stop()


def test_a_followers_long_poll_answers_new_data_and_not_a_high_watermark_move(replicated):
    """Follower 1's fetch that finds nothing waits; follower 2's acknowledgement moves the high
    watermark (the acks=all produce answers), which does not concern follower 1's wait: it goes on
    waiting, without a wake-up, until the next append gives it data."""
    broker, controller, replicas = replicated()

    async def fetch(replica: int, offset: int, epoch: int, wait_ms: int = 0) -> tuple[int, bytes]:
        [answer] = await broker.replica_fetch_many(
            [(TP, ReplicaFetch(replica, offset, epoch if offset else -1, 0, 1 << 20))], wait_ms)
        assert not isinstance(answer, Exception)
        return answer.high_watermark, answer.data

    async def run() -> None:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        replicas.apply_state(TP, controller.create(TP, (0, 1, 2)), NOWHERE)   # this engine, 0, leads
        produce = asyncio.ensure_future(broker.append_records(TP, [one_record()], Acks.ALL, 0))
        await asyncio.sleep(0.05)
        assert not produce.done()
        for follower in (1, 2):
            assert (await fetch(follower, 0, 0))[1]          # the batch, not yet committed
        waiting = asyncio.ensure_future(fetch(1, 1, 0, wait_ms=30_000))
        await asyncio.sleep(0.05)
        woken_before = broker.replica_signals.counts.completed_by_append
        assert await fetch(2, 1, 0) == (1, b"")              # follower 2 has it: the HW moves to 1
        result = await asyncio.wait_for(produce, 5)
        assert (result.base_offset, result.last_offset) == (0, 0)
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert broker.replica_signals.counts.completed_by_append == woken_before
        await broker.append_records(TP, [one_record(b"w")], Acks.LEADER, 0)
        high_watermark, data = await asyncio.wait_for(waiting, 5)
        assert high_watermark == 1 and data                  # the new batch, answered at once

    asyncio.run(run())


def test_a_followers_long_poll_is_its_acknowledgement_once_when_it_arrives(replicated):
    """The append that ends a follower's wait gives it the new batch; the read after the wait does not
    count as another fetch of the follower's (Kafka's DelayedFetch): what the leader knows of the
    follower is what its fetch said when it arrived, the leader's log end then included."""
    broker, controller, replicas = replicated()

    async def run() -> None:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        replicas.apply_state(TP, controller.create(TP, (0, 1)), NOWHERE)
        await broker.append_records(TP, [one_record()], Acks.LEADER, 0)
        await broker.replica_fetch_many([(TP, ReplicaFetch(1, 0, -1, 0, 1 << 20))], 0)
        waiting = asyncio.ensure_future(broker.replica_fetch_many([(TP, ReplicaFetch(1, 1, 0, 0, 1 << 20))], 30_000))
        await asyncio.sleep(0.05)
        arrived = replicas.partitions[TP].remotes[1]
        assert (arrived.log_end_offset, arrived.last_fetch_leader_leo) == (1, 1)
        await broker.append_records(TP, [one_record(b"w")], Acks.LEADER, 0)
        [answer] = await asyncio.wait_for(waiting, 5)
        assert not isinstance(answer, Exception) and answer.data and answer.log_end_offset == 2
        assert replicas.partitions[TP].remotes[1] == arrived

    asyncio.run(run())


def test_an_acks_all_produce_that_no_follower_acknowledges_times_out_after_the_request_timeout(replicated):
    broker, controller, replicas = replicated(**{"request.timeout.ms": "200"})

    async def run() -> float:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        replicas.apply_state(TP, controller.create(TP, (0, 1)), NOWHERE)
        started = time.monotonic()
        try:
            await broker.append_records(TP, [one_record()], Acks.ALL, 0)
        except RequestTimedOutError:
            return time.monotonic() - started
        raise AssertionError("the produce was acknowledged without its follower")

    assert asyncio.run(run()) >= 0.2
    assert not broker.delayed_produces.awaited(TP)   # the produce that gave up is no longer listed


def test_an_acks_all_produce_still_waiting_when_shutdown_began_says_so_at_its_next_wake_up(replicated):
    """Shutdown leaves waiting produces to finish (their followers may still acknowledge them); one that
    news wakes meanwhile without committing it is refused naming the shutdown, not a timeout that did
    not happen."""
    broker, controller, replicas = replicated()

    async def run() -> str:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        state = controller.create(TP, (0, 1, 2))
        replicas.apply_state(TP, state, NOWHERE)
        produce = asyncio.ensure_future(broker.append_records(TP, [one_record()], Acks.ALL, 0))
        await asyncio.sleep(0.05)
        broker.begin_shutdown()
        await asyncio.sleep(0.05)
        assert not produce.done()                            # shutdown alone does not answer it
        replicas.apply_state(TP, controller.alter_partition(TP, 0, state.leader_epoch, (0, 1, 2),
                                                            state.partition_epoch), NOWHERE)   # news
        try:
            await asyncio.wait_for(produce, 5)
        except RequestTimedOutError as error:
            return str(error)
        raise AssertionError("the produce was acknowledged without its followers")

    message = asyncio.run(run())
    assert "shut down" in message and "request.timeout.ms" not in message


def test_deleting_a_topic_answers_its_waiting_acks_all_produce_at_once_and_stops_replicating_it(replicated):
    """A topic deleted through the engine's own API stops being replicated here before its logs go
    (Kafka's StopReplica with deletion): an acks=all produce still waiting on it answers
    NOT_LEADER_OR_FOLLOWER now, not when request.timeout.ms (30 s) runs out."""
    broker, controller, replicas = replicated()

    async def run() -> tuple[str, float, bool]:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        replicas.apply_state(TP, controller.create(TP, (0, 1, 2)), NOWHERE)   # followers never fetch
        produce = asyncio.ensure_future(broker.append_records(TP, [one_record()], Acks.ALL, 0))
        await asyncio.sleep(0.05)
        assert not produce.done()
        started = time.monotonic()
        await broker.delete_topic(TP.topic)
        try:
            await asyncio.wait_for(produce, 10)
        except NotLeaderOrFollowerError as error:
            return str(error), time.monotonic() - started, TP in replicas.partitions
        raise AssertionError("the produce was acknowledged without its followers")

    message, waited, still_a_replica = asyncio.run(run())
    assert "leadership moved" in message and waited < 10 and not still_a_replica


def test_a_state_applied_while_a_topic_is_deleted_waits_until_its_logs_are_gone(replicated):
    """The removal from the replica set and the deletion are one step for the controller's states: one
    arriving between them would make a replica again of a log being deleted."""
    broker, controller, replicas = replicated()
    state = controller.create(TP, (0, 1, 2))
    replicas.apply_state(TP, state, NOWHERE)
    seen: list[str] = []

    def apply_again() -> None:
        replicas.apply_state(TP, state, NOWHERE)
        seen.append("state applied")

    racing = threading.Thread(target=apply_again)

    def delete() -> list[str]:
        racing.start()
        racing.join(0.3)   # it has the time to slip in, if the replica set's lock lets it
        deleted = [str(p) for p in broker.topics.delete_topic(TP.topic)]
        seen.append(f"logs deleted; the state waiting: {racing.is_alive()}; a replica: {TP in replicas.partitions}")
        return deleted

    deleted = replicas.remove_topic_then(TP.topic, delete)
    racing.join(10)
    assert len(deleted) == 1
    assert seen == ["logs deleted; the state waiting: True; a replica: False", "state applied"]


def test_a_followers_fetcher_made_before_the_transport_attached_reports_to_the_transport(replicated):
    """Rounds a follower applies are news for its waiters; a fetcher started while the replica set had
    no transport yet reports to the engine attached after it. (The round itself needs a leader: the
    fetcher's callback is called as its thread calls it after applying one.)"""
    broker, controller, replicas = replicated()

    async def run() -> bool:
        replicas.apply_state(TP, controller.create(TP, (1, 0)), NOWHERE)   # broker 1 leads: a fetcher here
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        news = broker.news_signals.event(TP)
        replicas.fetchers[TP].on_applied(TP)
        return news.is_set()

    assert asyncio.run(run())
