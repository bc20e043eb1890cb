# Types of the native record kernel (src/lib.rs); maturin installs this stub beside the module.
from collections.abc import Buffer

class RecordError(ValueError):
    """Damaged records: ``args`` are (byte position, reason), as ``CorruptRecordError`` takes them."""

def crc32c(data: Buffer) -> int: ...
def summarize_records(data: Buffer, start: int, end: int, count: int, base_timestamp: int,
                      last_offset_delta: int) -> tuple[int, int, int, int]: ...
