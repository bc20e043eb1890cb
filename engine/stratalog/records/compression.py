"""Kafka's four batch codecs, producing and accepting exactly Kafka's stream formats.

A compressed batch stores its records as one compressed stream; to be read by
Kafka (and to read Kafka's files) each codec must use the framing Kafka's Java
code uses, which is not always the codec's "native" one:

* gzip   - a plain gzip stream (``GZIPOutputStream``).
* snappy - snappy-java's *xerial* framing (``SnappyOutputStream``): a 16-byte
  header then blocks of int32 big-endian length + raw snappy block.  Readers
  also accept an unframed raw snappy block, as ``SnappyInputStream`` does.
* lz4    - the standard LZ4 frame format with *independent* blocks (Kafka's
  ``KafkaLZ4BlockInputStream`` rejects linked blocks).  Magic v0 messages were
  written before KIP-57 with a wrong header checksum, so v0 frames are walked
  block by block without checking it.
* zstd   - a zstd frame.

All the actual (de)compression is done by cramjam; only the framing is here.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from stratalog.common.errors import CorruptRecordError


class Compression(IntEnum):
    """Codec ids as stored in attribute bits 0-2 of v2 batches and v0/v1 messages."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """Codec for a Kafka ``compression.type`` name ('uncompressed' = 'none').

        'producer' is a topic setting, not a codec, so it raises ValueError like
        any unknown name; the config layer resolves it.
        """
        try:
            return _BY_NAME[name]
        except KeyError:
            raise ValueError(f"unknown compression codec name {name!r}") from None

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (DumpLogSegments' ``compresscodec:``)."""
        return self.name.lower()


_BY_NAME = {c.name.lower(): c for c in Compression} | {"uncompressed": Compression.NONE}

# Kafka's default levels (compression.{gzip,lz4,zstd}.level, KIP-390): gzip -1
# means Deflater's default, which is 6.
_DEFAULT_LEVEL = {Compression.GZIP: 6, Compression.LZ4: 9, Compression.ZSTD: 3}
_LEVEL_RANGE = {Compression.GZIP: (1, 9), Compression.LZ4: (1, 17), Compression.ZSTD: (-131072, 22)}

# snappy-java's stream header: marker byte -126, "SNAPPY", NUL, then version and
# minimum-compatible version (both 1) as big-endian int32s.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
# A snappy copy element of at most 5 bytes yields at most 64 bytes, so no valid
# block expands more than ~22x; larger claimed sizes are corrupt and would only
# make us allocate huge buffers.
_SNAPPY_MAX_RATIO = 24

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")


def compress(codec: Compression, data: bytes, level: int | None = None) -> bytes:
    """Compress ``data`` in the stream format Kafka writes for ``codec``.

    ``level`` follows Kafka's ``compression.<codec>.level`` ranges (None = Kafka's
    default); snappy has no level.  NONE returns ``data`` unchanged.
    """
    if codec == Compression.NONE:
        return bytes(data)
    if level is not None and codec != Compression.SNAPPY:
        low, high = _LEVEL_RANGE[codec]
        if codec == Compression.GZIP and level == -1:
            level = None
        elif not low <= level <= high:
            raise ValueError(f"{codec.kafka_name} level {level} outside [{low}, {high}]")
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=_or_default(codec, level)))
    if codec == Compression.SNAPPY:
        return _xerial_snappy(data)
    if codec == Compression.LZ4:
        # Independent blocks (KafkaLZ4BlockInputStream rejects linked ones) and
        # no content checksum (Kafka's writer never sets it).  cramjam also adds
        # per-block checksums, which Kafka's reader verifies.
        lz4 = cramjam.lz4.Compressor(level=_or_default(codec, level), content_checksum=False, block_linked=False)
        lz4.compress(data)
        return bytes(lz4.finish())
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_or_default(codec, level)))
    raise ValueError(f"unknown codec {codec!r}")


def decompress(
    codec: Compression,
    data: bytes | bytearray | memoryview,
    *,
    position: int = 0,
    magic: int = 2,
    source: str | None = None,
) -> bytes:
    """Decompress a Kafka compressed record stream.

    ``magic`` is the message format the stream came from (v0 LZ4 used a wrong
    frame header checksum).  Any failure raises CorruptRecordError at
    ``position`` (the caller's position of the compressed data).
    """
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _unxerial_snappy(bytes(data))
        if codec == Compression.LZ4:
            if magic == 0:
                return _lz4_frame_ignoring_header_checksum(bytes(data))
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError, struct.error) as e:
        raise CorruptRecordError(position, f"{codec.kafka_name} decompression failed: {e}", source=source) from e
    raise CorruptRecordError(position, f"unknown compression codec id {int(codec)}", source=source)


def _or_default(codec: Compression, level: int | None) -> int:
    return _DEFAULT_LEVEL[codec] if level is None else level


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _unxerial_snappy(data: bytes) -> bytes:
    if len(data) < len(_XERIAL_HEADER) or not data.startswith(_XERIAL_MAGIC):
        # SnappyInputStream falls back to one raw block when the header is absent.
        return _snappy_raw(data)
    # Version fields are ignored on purpose: some producers write them
    # little-endian, and there has only ever been one block format.
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        # snappy-java reads concatenated streams, each with its own header.
        if data.startswith(_XERIAL_MAGIC, pos) and end - pos >= len(_XERIAL_HEADER):
            pos += len(_XERIAL_HEADER)
            continue
        if end - pos < 4:
            raise ValueError(f"xerial block length truncated at stream offset {pos}")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise ValueError(f"xerial block of {size} bytes at stream offset {pos - 4} overruns the stream")
        out += _snappy_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


def _snappy_raw(block: bytes) -> bytes:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise ValueError(f"snappy block of {len(block)} bytes claims {claimed} uncompressed bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def _lz4_frame_ignoring_header_checksum(data: bytes) -> bytes:
    """Walk an LZ4 frame without checking its header checksum (pre-KIP-57 writers).

    Only the frame layout is parsed here; each block goes to cramjam.  Block and
    content checksums are skipped, as computing them would need xxhash.
    """
    if len(data) < 7 or _UINT32_LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        raise ValueError("not an LZ4 frame (bad magic)")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1 or flg & 0x03 or not flg & 0x20:
        raise ValueError(f"unsupported LZ4 frame flags {flg:#04x} (need version 1, independent blocks)")
    max_block = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if max_block is None or bd & 0x8F:
        raise ValueError(f"bad LZ4 block descriptor {bd:#04x}")
    block_checksum = 4 if flg & 0x10 else 0
    pos = 6 + (8 if flg & 0x08 else 0) + 1  # optional content size, then the checksum byte
    out = bytearray()
    scratch = bytearray(max_block)
    while True:
        if pos + 4 > len(data):
            raise ValueError("LZ4 frame truncated before its end mark")
        (word,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if word == 0:
            return bytes(out)
        size = word & 0x7FFFFFFF
        if size > max_block or pos + size + block_checksum > len(data):
            raise ValueError(f"LZ4 block of {size} bytes overruns the frame")
        block = data[pos : pos + size]
        if word & 0x80000000:  # high bit: block stored uncompressed
            out += block
        else:
            n = cramjam.lz4.decompress_block_into(block, scratch, output_len=max_block)
            out += scratch[:n]
        pos += size + block_checksum
