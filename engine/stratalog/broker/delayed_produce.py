"""acks=all produces waiting for the high watermark (the purgatory of Kafka's DelayedProduce).

Each waiting produce is kept under its partition with the last offset it appended, in a heap. A
move of the high watermark completes the produces it passed and wakes no other. With several
requests in flight, waking every waiter on every move cost each of the others a task switch, a
check and a new wait, on the leader's busiest thread. News that may end a wait in another way (a
leadership change, the ISR, removal) wakes all of the partition's waiters, which then check for
themselves.

Used only on the event loop's thread (``awaited`` excepted). A produce registers before it checks
the high watermark, as a fetch takes its event before it reads: a move in between still wakes it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from stratalog.broker.wake_timer import WakeTimer
from stratalog.common.names import TopicPartition

_Waiter = tuple[int, int, "asyncio.Future[bool]"]   # (last offset, arrival, future): arrival breaks ties


class DelayedProduces:
    def __init__(self, timer: WakeTimer | None = None) -> None:
        """``timer``: the deadlines' timer, shared with the engine's other waits."""
        self.timer = WakeTimer() if timer is None else timer
        self._waiting: dict[TopicPartition, list[_Waiter]] = {}
        self._arrivals = itertools.count()
        self._discarded: dict[TopicPartition, int] = {}   # entries given up on since the last compaction

    def watch(self, tp: TopicPartition, last_offset: int) -> asyncio.Future[bool]:
        """A future that completes (True) once the high watermark passes ``last_offset`` (or on news)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting.setdefault(tp, []), (last_offset, next(self._arrivals), future))
        return future

    async def wait(self, future: asyncio.Future[bool], deadline: float) -> bool:
        """Wait for ``future`` (from ``watch``) until ``deadline`` (the loop's time); True if a move of
        the high watermark or news completed it (and took it out of its partition's heap), False if
        the deadline came first: the timer completes it so, and it stays listed until ``discard``."""
        self.timer.wake_at(deadline, future)
        try:
            return await future
        finally:
            self.timer.finished()

    def awaited(self, tp: TopicPartition) -> bool:
        """Whether any produce waits on ``tp`` (safe to ask from any thread)."""
        return tp in self._waiting

    def complete_below(self, tp: TopicPartition, high_watermark: int) -> None:
        """The high watermark of ``tp`` is now ``high_watermark``: complete the produces it passed."""
        heap = self._waiting.get(tp)
        if heap is None:
            return
        while heap and heap[0][0] < high_watermark:
            _complete(heapq.heappop(heap)[2])
        if not heap:
            del self._waiting[tp]
            self._discarded.pop(tp, None)

    def discard(self, tp: TopicPartition, future: asyncio.Future[bool]) -> None:
        """A produce no longer waits on ``future`` (it was complete at its check, gave up, or failed).

        Its entry is cancelled where it lies; a move of the high watermark past it drops it, and once
        more than half of a partition's entries are such, the heap is rebuilt without them: a mass
        timeout (followers gone) costs each produce O(1) on average, not a search of the heap."""
        future.cancel()
        heap = self._waiting.get(tp)
        if heap is None:
            return
        discarded = self._discarded.get(tp, 0) + 1
        if discarded * 2 <= len(heap):
            self._discarded[tp] = discarded
            return
        self._discarded.pop(tp, None)
        live = [entry for entry in heap if not entry[2].done()]
        if live:
            heapq.heapify(live)
            self._waiting[tp] = live
        else:
            del self._waiting[tp]

    def wake(self, tp: TopicPartition) -> None:
        """News for ``tp``: every produce waiting on it checks again."""
        self._discarded.pop(tp, None)
        for _, _, future in self._waiting.pop(tp, ()):
            _complete(future)


def _complete(future: asyncio.Future[bool]) -> None:
    if not future.done():   # given up on (cancelled), or its deadline came (the timer completed it)
        future.set_result(True)
