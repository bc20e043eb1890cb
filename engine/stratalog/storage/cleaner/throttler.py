"""A shared read+write rate limit for the cleaner (Kafka's ``Throttler``, tightened).

Every read buffer and every write of every cleaner thread reports its bytes.
Kafka checks the observed rate once per 300 ms window and sleeps off any
excess then, so the last window of a pass runs at full speed and a short pass
can overshoot the cap by a lot. Here the debt is checked on every report: as
soon as the bytes seen in the window would need more than 10 ms longer at
``log.cleaner.io.max.bytes.per.second`` than the time that has passed, the
caller sleeps that difference. Windows restart every 300 ms so that idle time
never builds up credit for a later burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WINDOW_S = 0.3
MIN_SLEEP_S = 0.01
UNLIMITED = 1.7e308  # Kafka's default is Double.MAX_VALUE


class Throttler:
    def __init__(self, bytes_per_second: float, *, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.bytes_per_second = bytes_per_second
        self._sleep = sleep
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._window_start = monotonic()
        self._observed = 0
        self.slept_seconds = 0.0

    @property
    def unlimited(self) -> bool:
        return self.bytes_per_second >= UNLIMITED

    def maybe_throttle(self, size: int) -> None:
        if self.unlimited or size <= 0:
            return
        with self._lock:
            now = self._monotonic()
            elapsed = now - self._window_start
            if elapsed > WINDOW_S and self._observed / self.bytes_per_second <= elapsed:
                # On or under budget at the end of a window: start a new one (no banked credit).
                self._window_start, self._observed, elapsed = now, 0, 0.0
            self._observed += size
            pause = self._observed / self.bytes_per_second - elapsed
            if pause > MIN_SLEEP_S:
                self._sleep(pause)
                self.slept_seconds += pause
