"""The one timer behind every waiting request's deadline, and the partitions' signals that wake them
sooner: waits end at their deadlines, what ended earlier is left alone, nothing piles up."""

from __future__ import annotations

import asyncio

from stratalog.broker.signals import AppendSignals
from stratalog.broker.wake_timer import WakeTimer
from stratalog.common.names import TopicPartition

TP = TopicPartition("t", 0)
IDLE = TopicPartition("t", 1)


def test_each_future_is_completed_with_false_at_its_own_deadline_in_deadline_order_and_none_sooner():
    async def run() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        timer = WakeTimer()
        order: list[str] = []
        early: list[str] = []   # completed before its deadline
        start = loop.time()
        for name, after in (("late", 0.06), ("early", 0.02), ("middle", 0.04)):
            future: asyncio.Future[bool] = loop.create_future()

            def done(f: asyncio.Future[bool], name: str = name, deadline: float = start + after) -> None:
                order.append(f"{name}={f.result()}")
                if loop.time() < deadline:
                    early.append(name)

            future.add_done_callback(done)
            timer.wake_at(start + after, future)
        await asyncio.sleep(0.1)
        return order, early

    assert asyncio.run(run()) == (["early=False", "middle=False", "late=False"], [])


def test_a_future_completed_before_its_deadline_keeps_its_own_result():
    async def run() -> bool:
        loop = asyncio.get_running_loop()
        timer = WakeTimer()
        future: asyncio.Future[bool] = loop.create_future()
        timer.wake_at(loop.time() + 0.01, future)
        future.set_result(True)
        await asyncio.sleep(0.03)
        return future.result()

    assert asyncio.run(run()) is True


def test_waits_that_end_early_do_not_pile_up_until_their_deadlines():
    async def run() -> int:
        loop = asyncio.get_running_loop()
        timer = WakeTimer()
        for _ in range(10_000):
            future: asyncio.Future[bool] = loop.create_future()
            timer.wake_at(loop.time() + 30, future)
            future.set_result(True)
            timer.finished()
        return len(timer)

    assert asyncio.run(run()) <= 200


def test_a_timer_used_by_one_event_loop_and_then_another_still_ends_the_second_ones_waits():
    timer = WakeTimer()

    async def wait(after: float) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        timer.wake_at(loop.time() + after, future)
        return await asyncio.wait_for(future, 5)

    async def abandon() -> None:   # armed on this loop, which closes before it fires
        loop = asyncio.get_running_loop()
        timer.wake_at(loop.time() + 0.02, loop.create_future())

    asyncio.run(abandon())
    assert asyncio.run(wait(0.05)) is False   # woken at its deadline, not left to wait_for's 5 s


def test_a_wait_on_many_partitions_is_woken_by_any_of_them_and_then_listed_on_none():
    async def run() -> tuple[bool, list[int]]:
        signals = AppendSignals()
        taken = [signals.event(TopicPartition("t", p)) for p in range(3)]
        asyncio.get_running_loop().call_later(0.01, signals.notify, TopicPartition("t", 1))
        woken = await signals.wait_any(taken, 5)
        return woken, [len(s) for s in taken]

    assert asyncio.run(run()) == (True, [0, 0, 0])


def test_long_polls_that_expire_on_an_idle_partition_leave_nothing_behind():
    async def run() -> tuple[list[bool], int, int, int]:
        signals = AppendSignals()
        ended = [await signals.wait_any([signals.event(IDLE)], 0.001) for _ in range(50)]
        return ended, len(signals.event(IDLE)), signals.counts.expired, signals.counts.waiting

    assert asyncio.run(run()) == ([False] * 50, 0, 50, 0)


def test_a_signal_set_before_the_wait_answers_it_without_waiting():
    async def run() -> tuple[bool, int]:
        signals = AppendSignals()
        taken = signals.event(TP)
        signals.notify(TP)   # an append between the read and the wait
        return await signals.wait_any([taken], 30), signals.counts.completed_by_append

    assert asyncio.run(run()) == (True, 1)
