"""Wake-ups for fetches waiting at the high watermark (the purgatory of Kafka's DelayedFetch).

A fetch with nothing to return waits on its partition's ``asyncio.Event`` instead of polling;
an append sets (then replaces) it, so the waiting fetch answers as soon as data arrives and
costs nothing while it waits. Used only on the event loop's thread (``awaited`` excepted).

How each wait ended is counted, so that a wake-up that never comes shows as fetches that
only ever expire.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from stratalog.common.names import TopicPartition


@dataclass
class WaitCounts:
    waiting: int = 0
    completed_by_append: int = 0  # woken by an append (or a topic deletion, or shutdown)
    expired: int = 0              # maxWaitMs ran out with nothing new


class AppendSignals:
    """One ``asyncio.Event`` per partition, set when an append lands."""

    def __init__(self, counts: WaitCounts | None = None) -> None:
        """``counts``: shared with another set of signals, to count their waits as one."""
        self._events: dict[TopicPartition, asyncio.Event] = {}
        self.counts = WaitCounts() if counts is None else counts

    def event(self, tp: TopicPartition) -> asyncio.Event:
        """Take the event *before* reading, so an append between the read and the wait is not missed."""
        event = self._events.get(tp)
        if event is None:
            event = self._events[tp] = asyncio.Event()
        return event

    async def wait(self, event: asyncio.Event, timeout_s: float) -> bool:
        """Wait for ``event`` (from ``event()``) at most ``timeout_s``; True if it was set."""
        self.counts.waiting += 1
        try:
            # asyncio.timeout, not wait_for: no task per wait (every acks=all produce and every
            # follower's long poll waits here once).
            async with asyncio.timeout(timeout_s):
                await event.wait()
        except TimeoutError:
            self.counts.expired += 1
            return False
        finally:
            self.counts.waiting -= 1
        self.counts.completed_by_append += 1
        return True

    async def wait_any(self, events: list[asyncio.Event], timeout_s: float) -> bool:
        """Wait until any of ``events`` is set, at most ``timeout_s`` (a fetch of many partitions)."""
        if not events:
            return False
        if len(events) == 1:
            return await self.wait(events[0], timeout_s)
        self.counts.waiting += 1
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            done, _ = await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.counts.waiting -= 1
            for waiter in waiters:
                waiter.cancel()
        if done:
            self.counts.completed_by_append += 1
            return True
        self.counts.expired += 1
        return False

    def awaited(self, tp: TopicPartition) -> bool:
        """Whether anything took ``tp``'s event since its last notify (safe to ask from any thread)."""
        return tp in self._events

    def notify(self, tp: TopicPartition) -> None:
        event = self._events.pop(tp, None)
        if event is not None:
            event.set()

    def notify_all(self) -> None:
        events, self._events = self._events, {}
        for event in events.values():
            event.set()
