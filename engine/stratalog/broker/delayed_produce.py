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

from stratalog.common.names import TopicPartition

_Waiter = tuple[int, int, "asyncio.Future[None]"]   # (last offset, arrival, future): arrival breaks ties


class DelayedProduces:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, list[_Waiter]] = {}
        self._arrivals = itertools.count()
        self._discarded: dict[TopicPartition, int] = {}   # entries given up on since the last compaction

    def watch(self, tp: TopicPartition, last_offset: int) -> asyncio.Future[None]:
        """A future that completes once the high watermark passes ``last_offset`` (or on news)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting.setdefault(tp, []), (last_offset, next(self._arrivals), future))
        return future

    async def wait(self, future: asyncio.Future[None], timeout_s: float) -> bool:
        """Wait for ``future`` (from ``watch``) at most ``timeout_s``; True if it completed. A future
        given up on stays in the heap, cancelled, until ``discard``, the high watermark or news clears it."""
        try:
            async with asyncio.timeout(timeout_s):
                await future
        except TimeoutError:
            return False
        return True

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

    def discard(self, tp: TopicPartition, future: asyncio.Future[None]) -> None:
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


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():   # cancelled: its produce gave up (timed out or was cancelled)
        future.set_result(None)
