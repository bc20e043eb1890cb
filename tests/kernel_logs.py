"""For tests that run both record kernels over a log and compare what they leave: a log on a clock
of the test's own, and its files' digests."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stratalog.common.config import LogConfig
from stratalog.common.names import TopicPartition
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log

from kernel_choice import kernel

T0 = 1_700_000_000_000


class Clock:
    """Milliseconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path, config: LogConfig, clock: Clock) -> Log:
    directory.mkdir(parents=True)
    log, _ = load_log(directory, TopicPartition("t", 0), config, recovery_point=0, had_clean_shutdown=False,
                      clock=clock)
    return log


def files(directory: Path) -> dict[str, str]:
    """Each file's SHA-256, by name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def on_both_kernels(root: Path, seed: int, native: Any,
                    config: Callable[[random.Random], LogConfig],
                    scenario: Callable[[Log, Clock, random.Random], object]) -> list[tuple[object, dict[str, str]]]:
    """``scenario`` on a new log under the pure-Python kernel, then under ``native`` (the native
    kernel, or a wrapper of it that counts), each from ``seed``: what each run saw, and the files it
    left."""
    outcomes = []
    for module in (None, native):
        directory = root / f"{seed}-{'native' if module else 'python'}" / "t-0"
        rng, clock = random.Random(seed), Clock()
        with kernel(module):
            log = open_log(directory, config(rng), clock)
            seen = scenario(log, clock, rng)
            log.close()
        outcomes.append((seen, files(directory)))
    return outcomes
