"""The native record kernel against its pure-Python twin: same answers, same errors at the same bytes.

Every case runs both kernels on the same input: well-formed batches of any shape and codec,
then batches damaged anywhere in their records or in the header fields the walk trusts (record
count, last offset delta, base timestamp), and records of random bytes. For damage both must
raise ``CorruptRecordError`` with the same position and reason. The suite requires the native
kernel to be built (``scripts/setup`` builds it): without it these tests fail rather than skip.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
import stratalog_native
from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CorruptRecordError
from stratalog.records import Compression, Header, Record, build_batch, native, summarize_records

T0 = 1_700_000_000_000
RECORDS_START = 61
COUNT_AT, LAST_DELTA_AT, BASE_TS_AT = 57, 23, 27

_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2),
              st.integers(-(1 << 20), 1 << 20)),
    min_size=1, max_size=12)


@contextlib.contextmanager
def kernel(module: ModuleType | None) -> Iterator[None]:
    saved, native.kernel = native.kernel, module
    try:
        yield
    finally:
        native.kernel = saved


def outcome(module: ModuleType | None, data: bytes | bytearray) -> object:
    """What ``summarize_records`` makes of ``data`` with this kernel: the summary, or the error."""
    with kernel(module):
        try:
            return summarize_records(data, 0, source="test")
        except CorruptRecordError as error:
            return ("CorruptRecordError", error.position, error.reason, str(error))


def both(data: bytes | bytearray) -> object:
    python, rust = outcome(None, data), outcome(stratalog_native, data)
    assert rust == python
    return python


def batch(fields: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
          codec: Compression = Compression.NONE) -> bytes:
    return build_batch([Record(i, T0 + ts, k, v, tuple(Header(hk, hv) for hk, hv in hs))
                        for i, (k, v, hs, ts) in enumerate(fields)], compression=codec)


def test_the_suite_runs_the_native_kernel():
    assert native.kernel is stratalog_native and native.name() == "native"


@settings(max_examples=200, deadline=None)
@given(_records, st.sampled_from(list(Compression)))
def test_any_well_formed_batch_is_summarized_alike(fields, codec):
    summary = both(batch(fields, codec))
    assert not isinstance(summary, tuple) and summary.count == len(fields)


@settings(max_examples=500, deadline=None)
@given(_records, st.data())
def test_a_byte_damaged_anywhere_in_the_records_fails_alike(fields, draw):
    data = bytearray(batch(fields))
    for _ in range(draw.draw(st.integers(1, 3))):
        position = draw.draw(st.integers(RECORDS_START, len(data) - 1))
        data[position] = draw.draw(st.integers(0, 255))
    both(data)
    both(bytes(data))


@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_a_lying_header_fails_alike(fields, draw):
    data = bytearray(batch(fields))
    struct.pack_into(">i", data, COUNT_AT, draw.draw(st.integers(0, len(fields) + 3)))
    struct.pack_into(">i", data, LAST_DELTA_AT, draw.draw(st.integers(-2, len(fields) + 3)))
    struct.pack_into(">q", data, BASE_TS_AT, draw.draw(st.sampled_from([0, T0, (1 << 63) - 1, -(1 << 63)])))
    both(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.integers(0, 40))
def test_records_of_random_bytes_fail_alike(records, count):
    data = bytearray(batch([(b"k", b"v", [], 0)]))
    data[RECORDS_START:] = records
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, COUNT_AT, count)
    struct.pack_into(">i", data, LAST_DELTA_AT, max(count - 1, 0))
    both(data)


@pytest.mark.parametrize("varint", [b"\xff\xff\xff\xff\xff\x01", b"\xff\xff\xff\xff\x1f", b"\x80", b"\xff" * 11])
def test_overlong_wide_and_cut_varints_fail_alike(varint):
    data = bytearray(batch([(b"k", b"v", [], 0)]))
    # the record's length, then its timestamp delta (a varlong: 10 bytes allowed)
    for at in (RECORDS_START, RECORDS_START + 2):
        damaged = data[:at] + varint + data[at + 1:]
        struct.pack_into(">i", damaged, 8, len(damaged) - 12)
        error = both(damaged)
        assert isinstance(error, tuple) and error[0] == "CorruptRecordError"


def _kernel_in_a_new_process(setting: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from stratalog.records import native; print(native.name())"],
                          env={**os.environ, "STRATALOG_KERNEL": setting}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("setting", "expected"), [("python", "python"), ("native", "native"),
                                                   ("auto", "native"), ("", "native")])
def test_the_environment_chooses_the_kernel(setting, expected):
    result = _kernel_in_a_new_process(setting)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_an_unknown_kernel_setting_is_refused_by_name():
    result = _kernel_in_a_new_process("rust")
    assert result.returncode != 0
    assert "STRATALOG_KERNEL='rust': expected one of auto, python, native" in result.stderr
