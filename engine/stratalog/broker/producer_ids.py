"""Producer ids for InitProducerId: never handed out twice, across restarts and across engines.

Kafka's controller hands brokers blocks of ids and records each block in its metadata log. An
engine reserves blocks the same way in a file of its first data directory
(``producer-id-block``: the end of the last reserved block), written atomically before any id
of a new block is given out, so a crash can skip ids but never repeat one. Engines that take
part in replication put their broker id above bit 32, so two engines' ids never meet: broker ids
are below 2^31 (an agent's is a 31-bit hash of its LogDir's name), so every id fits Kafka's
int64, and each engine has 2^32 ids of its own.
"""

from __future__ import annotations

import threading
from pathlib import Path

from stratalog.common.errors import StratalogError
from stratalog.common.files import atomic_write

BLOCK_FILE = "producer-id-block"
BLOCK_SIZE = 1000
BROKER_SHIFT = 32


class ProducerIdBlockError(StratalogError):
    """The block file holds something other than the end of the last block."""

    code = "KAFKA_STORAGE_ERROR"


class ProducerIdAllocator:
    def __init__(self, data_dir: Path, broker_id: int = 0) -> None:
        if not 0 <= broker_id < 1 << 31:
            raise ValueError(f"broker id {broker_id} is not in [0, 2^31): producer ids would not fit in an int64")
        self.path = data_dir / BLOCK_FILE
        self.base = broker_id << BROKER_SHIFT
        self._lock = threading.Lock()
        self._next = self._end = 0

    def generate(self) -> int:
        """A new producer id (blocking when a new block is reserved: off the event loop)."""
        with self._lock:
            if self._next >= self._end:
                self._next = self._reserved_end()
                self._end = self._next + BLOCK_SIZE
                atomic_write(self.path, f"{self._end}\n".encode())
            self._next += 1
            return self.base + self._next - 1

    def _reserved_end(self) -> int:
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError) as error:
            raise ProducerIdBlockError(f"{self.path}: cannot read the producer-id block file: {error}") from None
        if not text.isdigit() or int(text) >= 1 << BROKER_SHIFT:
            raise ProducerIdBlockError(f"{self.path}: expected the end of the last producer-id block, a number "
                                       f"below 2^{BROKER_SHIFT}, found {text[:40]!r}")
        return int(text)
