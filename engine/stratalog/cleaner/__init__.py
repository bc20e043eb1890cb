"""Log compaction: Kafka's log cleaner, with a collision-safe offset map.

``manager.LogCleaner`` chooses logs and keeps checkpoints and statistics;
``cleaner.Cleaner`` compacts one log; ``selection`` says what is cleanable;
``offset_map``, ``throttler`` and ``transactions`` are its parts.
"""

from .cleaner import Cleaner, CleanerStats, CleanResult
from .manager import CleanReport, LogCleaner, PartitionCleanerStatus
from .offset_map import OffsetMap
from .selection import LogToClean, log_to_clean

__all__ = ["Cleaner", "CleanerStats", "CleanResult", "CleanReport", "LogCleaner", "PartitionCleanerStatus",
           "OffsetMap", "LogToClean", "log_to_clean"]
