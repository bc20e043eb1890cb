"""Deadlines of waiting requests, kept by one timer on the event loop (the timer of Kafka's purgatories).

An acks=all produce waits for the high watermark up to ``request.timeout.ms``, and a follower's
long poll for new data up to ``replica.fetch.wait.max.ms``; nearly all of them end long before
their deadline. ``asyncio.timeout`` gave each wait a timer of its own, made and cancelled again,
about 4 µs a wait, three times for every replicated produce on the leader's one thread. Here a
wait adds its future and deadline to one heap, and a single loop timer, armed for the earliest
deadline, completes what is due with ``False`` (the waits' own completions give ``True``). A
waiter woken either way checks its state and its deadline again, as after any wake-up.

A waiter that ends before its deadline says so (``finished``): its entry stays where it lies,
and the heap is rebuilt without such entries once they are more than half of it, so that
completed waits do not pile up for the length of their timeouts. Used on the event loop's
thread only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time

# A loop timer may run up to the clock's resolution early (asyncio's ``_run_once``): what is due
# within it is due now, or the timer would be armed again for the same instant.
_EARLY_S = time.get_clock_info("monotonic").resolution
_REBUILD_ABOVE = 64   # finished entries, before the heap is rebuilt without them


class WakeTimer:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, asyncio.Future[bool]]] = []
        self._arrivals = itertools.count()   # breaks ties: futures do not compare
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._finished = 0

    def wake_at(self, deadline: float, future: asyncio.Future[bool]) -> None:
        """Complete ``future`` with False at ``deadline`` (the loop's time) unless it is done by then."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Another loop (one after another, as tests run them): the old one's waits went with it,
            # and its timer will never fire.
            if self._handle is not None:
                self._handle.cancel()
            self._loop, self._heap, self._handle, self._armed_for, self._finished = loop, [], None, math.inf, 0
        heapq.heappush(self._heap, (deadline, next(self._arrivals), future))
        if deadline < self._armed_for:
            self._arm(deadline)

    def finished(self) -> None:
        """A waiter is done with its future (it completed, or it was cancelled)."""
        self._finished += 1
        if self._finished > _REBUILD_ABOVE and self._finished * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if not entry[2].done()]
            heapq.heapify(self._heap)
            self._finished = 0

    def __len__(self) -> int:
        return len(self._heap)

    def _arm(self, deadline: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_for = deadline
        assert self._loop is not None
        self._handle = self._loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._handle, self._armed_for = None, math.inf
        heap = self._heap
        assert self._loop is not None
        due = self._loop.time() + _EARLY_S
        while heap and (heap[0][0] <= due or heap[0][2].done()):
            future = heapq.heappop(heap)[2]
            # Its waiter says ``finished`` once (before this or after it): the count is of entries left.
            self._finished -= 1
            if not future.done():
                future.set_result(False)
        if heap:
            self._arm(heap[0][0])
