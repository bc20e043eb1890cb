"""A ``.txnindex`` file read raw: Kafka's aborted-transaction entries, for dump-log and verify."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path


ABORTED_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """A ``.txnindex`` entry; ``version_byte`` is the entry's first byte, which is what Kafka's
    ``AbortedTxn.version()`` returns (it reads one byte of the int16 version field)."""

    number: int
    version_byte: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_txn_index(path: Path) -> tuple[list[AbortedTxn], int]:
    """The entries and the count of trailing bytes too few for an entry (Kafka ignores them)."""
    data = path.read_bytes()
    whole = len(data) - len(data) % ABORTED_TXN_ENTRY.size
    entries = [
        AbortedTxn(number, int.from_bytes(data[number * ABORTED_TXN_ENTRY.size : number * ABORTED_TXN_ENTRY.size + 1],
                                          "big", signed=True), pid, first, last, lso)
        for number, (_, pid, first, last, lso) in enumerate(ABORTED_TXN_ENTRY.iter_unpack(data[:whole]))
    ]
    return entries, len(data) - whole
