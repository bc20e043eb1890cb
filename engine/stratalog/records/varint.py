"""ZigZag varints, the length/delta encoding of every v2 record field.

Kafka's v2 record (``DefaultRecord.java``) stores lengths, offset deltas and
timestamp deltas as protobuf-style varints: ZigZag (so small negatives stay
short) followed by unsigned LEB128, at most 5 bytes for an int32 ("varint") and
10 for an int64 ("varlong").  Decoding sits on the hot path of every record
walk, so the common one-byte case returns before entering the loop.
"""

from __future__ import annotations

from typing import TypeAlias

from stratalog.common.errors import CorruptRecordError
from stratalog.common.limits import INT64_MAX, INT64_MIN

#: Anything records can be read from without copying.
Buffer: TypeAlias = bytes | bytearray | memoryview

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10


# Most varints in real batches (attributes-adjacent deltas, short keys) are one
# byte; a table of ready-made bytes objects avoids building them each time.
_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def encode_varint(n: int) -> bytes:
    """ZigZag + LEB128 encoding of ``n``; serves for both varint and varlong.

    Raises ValueError for values outside int64 (a caller bug, not bad data).
    """
    if n >= 0:
        if n < 0x40:
            return _ONE_BYTE[n << 1]
        if n > INT64_MAX:
            raise ValueError(f"{n} does not fit in a varlong")
        v = n << 1
    else:
        if n < INT64_MIN:
            raise ValueError(f"{n} does not fit in a varlong")
        v = ((-n) << 1) - 1
        if v < 0x80:
            return _ONE_BYTE[v]
    if v < 0x4000:
        return bytes(((v & 0x7F) | 0x80, v >> 7))
    return encode_unsigned_varint(v)


def encode_unsigned_varint(v: int) -> bytes:
    """LEB128 of a non-negative ``v``, without ZigZag: the Kafka protocol's unsigned varint (the
    sizes and counts of flexible versions)."""
    if v < 0x80:
        return _ONE_BYTE[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode_varint(
    buf: Buffer,
    pos: int,
    *,
    limit: int = VARINT_MAX_BYTES,
    end: int | None = None,
) -> tuple[int, int]:
    """Decode one ZigZag varint at ``pos``; return ``(value, position after it)``.

    ``limit`` is the longest encoding allowed (5 for a varint, 10 for a varlong);
    ``end`` bounds the readable region (default: the end of ``buf``) so a record
    cannot read into its neighbour.  A varint that runs past ``end``, is longer
    than ``limit`` or encodes a value wider than 32/64 bits raises
    CorruptRecordError naming ``pos``.
    """
    stop = len(buf) if end is None else end
    if pos < stop:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    else:
        raise CorruptRecordError(pos, "varint truncated: no bytes left")
    start = pos
    last = min(stop, pos + limit)
    result = 0
    shift = 0
    while pos < last:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # Kafka's reader silently drops bits past 32/64; a value that needs
            # them was never written by a correct producer, so call it corrupt.
            if result >> (32 if limit <= VARINT_MAX_BYTES else 64):
                raise CorruptRecordError(start, f"varint value {result:#x} wider than {limit}-byte range")
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    if pos - start >= limit:
        raise CorruptRecordError(start, f"varint longer than {limit} bytes")
    raise CorruptRecordError(start, f"varint truncated after {pos - start} bytes")
