"""Log compaction: Kafka's log cleaner, with a collision-safe offset map.

``manager.LogCleaner`` chooses logs and keeps checkpoints and statistics;
``cleaner.Cleaner`` compacts one log; ``selection`` says what is cleanable;
``offset_map``, ``throttler`` and ``transactions`` are its parts.
"""

from stratalog.storage.cleaner.cleaner import Cleaner, CleanerStats, CleanResult
from stratalog.storage.cleaner.manager import CleanReport, LogCleaner, PartitionCleanerStatus
from stratalog.storage.cleaner.offset_map import OffsetMap
from stratalog.storage.cleaner.selection import LogToClean, log_to_clean

__all__ = ["Cleaner", "CleanerStats", "CleanResult", "CleanReport", "LogCleaner", "PartitionCleanerStatus",
           "OffsetMap", "LogToClean", "log_to_clean"]
