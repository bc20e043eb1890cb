"""Wake-ups for fetches waiting at the high watermark (the purgatory of Kafka's DelayedFetch).

A fetch with nothing to return waits on its partition's ``Signal`` instead of polling; an
append sets (then replaces) it, so the waiting fetch answers as soon as data arrives and
costs nothing while it waits. Used only on the event loop's thread (``awaited`` excepted).

How each wait ended is counted, so that a wake-up that never comes shows as fetches that
only ever expire.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from stratalog.broker.wake_timer import WakeTimer
from stratalog.common.names import TopicPartition


@dataclass
class WaitCounts:
    waiting: int = 0
    completed_by_append: int = 0  # woken by an append (or a topic deletion, or shutdown)
    expired: int = 0              # maxWaitMs ran out with nothing new


class Signal:
    """One partition's news since the fetches waiting on it took it: set once, then replaced.

    asyncio.Event's job, with the waits' deadlines on the shared ``WakeTimer`` and one future for
    a wait on many partitions (an Event wait is a future each, and a wait on several a task each)."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[bool]] = []

    def is_set(self) -> bool:
        return self._set

    def __len__(self) -> int:
        """The waits listed on it."""
        return len(self._waiters)

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(True)

    async def wait(self) -> None:
        """Until it is set, with no deadline (a waiter that keeps no timer of its own)."""
        if self._set:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        finally:
            self._forget(future)

    def _forget(self, future: asyncio.Future[bool]) -> None:
        try:
            self._waiters.remove(future)
        except ValueError:   # taken by ``set``
            pass


class AppendSignals:
    """One ``Signal`` per partition, set when an append lands."""

    def __init__(self, counts: WaitCounts | None = None, timer: WakeTimer | None = None) -> None:
        """``counts``: shared with another set of signals, to count their waits as one; ``timer``:
        shared with the engine's other waits."""
        self._signals: dict[TopicPartition, Signal] = {}
        self.counts = WaitCounts() if counts is None else counts
        self.timer = WakeTimer() if timer is None else timer

    def event(self, tp: TopicPartition) -> Signal:
        """Take the signal *before* reading, so an append between the read and the wait is not missed."""
        signal = self._signals.get(tp)
        if signal is None:
            signal = self._signals[tp] = Signal()
        return signal

    async def wait_any(self, signals: list[Signal], timeout_s: float) -> bool:
        """Wait until any of ``signals`` (from ``event()``) is set, at most ``timeout_s``; True if one was."""
        if not signals:
            return False
        counts = self.counts
        for signal in signals:
            if signal._set:
                counts.completed_by_append += 1
                return True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        for signal in signals:
            signal._waiters.append(future)
        self.timer.wake_at(loop.time() + timeout_s, future)
        counts.waiting += 1
        woken = False
        try:
            woken = await future
        finally:
            counts.waiting -= 1
            self.timer.finished()
            if not woken or len(signals) > 1:   # still listed where no ``set`` took it
                for signal in signals:
                    signal._forget(future)
        if woken:
            counts.completed_by_append += 1
        else:
            counts.expired += 1
        return woken

    def awaited(self, tp: TopicPartition) -> bool:
        """Whether anything took ``tp``'s signal since its last notify (safe to ask from any thread)."""
        return tp in self._signals

    def notify(self, tp: TopicPartition) -> None:
        signal = self._signals.pop(tp, None)
        if signal is not None:
            signal.set()

    def notify_all(self) -> None:
        signals, self._signals = self._signals, {}
        for signal in signals.values():
            signal.set()
