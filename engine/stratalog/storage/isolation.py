"""How far a read may go: Kafka's ``FetchIsolation``.

A follower copies everything its leader has (the log end); a consumer reads what is committed
(below the high watermark), and a ``read_committed`` consumer only what is also stable (below the
last stable offset: no open transaction's records, which may yet abort).
"""

from __future__ import annotations

from enum import Enum


class FetchIsolation(Enum):
    LOG_END = "log_end"
    HIGH_WATERMARK = "read_uncommitted"
    TXN_COMMITTED = "read_committed"

    @classmethod
    def for_consumer(cls, isolation_level: str) -> FetchIsolation:
        """A consumer's ``isolation.level`` (read_uncommitted or read_committed)."""
        return cls.TXN_COMMITTED if isolation_level == "read_committed" else cls.HIGH_WATERMARK
