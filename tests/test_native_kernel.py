"""The native record kernel against its pure-Python twin: same answers, same errors at the same bytes.

Every case runs both kernels on the same input: well-formed batches of any shape and codec,
then batches damaged anywhere in their records or in the header fields the walk trusts (record
count, last offset delta, base timestamp), and records of random bytes. For damage both must
raise ``CorruptRecordError`` with the same position and reason. The suite requires the native
kernel to be built (``scripts/setup`` builds it): without it these tests fail rather than skip.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import stratalog_native
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stratalog.broker.topics import TopicAdmin
from stratalog.common.config import EngineConfig, LogConfig
from stratalog.common.errors import CorruptRecordError, StratalogError
from stratalog.common.names import TopicPartition
from stratalog.records.batch_header import compute_crc
from stratalog.records.control import ControlRecordType, build_end_txn_marker_batch
from stratalog.records import (
    Compression,
    Header,
    Record,
    build_batch,
    checked_batch,
    decode_records,
    encode_varint,
    native,
    native_walk,
    summarize_records,
    validate_batch,
)
from stratalog.storage.cleaner.manager import LogCleaner
from stratalog.storage import validation
from stratalog.storage.loader import load_log
from stratalog.storage.log_manager import LogManager

from kernel_choice import kernel

T0 = 1_700_000_000_000
RECORDS_START = 61
COUNT_AT, LAST_DELTA_AT, BASE_TS_AT, ATTRIBUTES_AT = 57, 23, 27, 21

_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=2),
              st.integers(-(1 << 20), 1 << 20)),
    min_size=1, max_size=12)


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


def test_the_native_crc_agrees_with_the_reference_at_every_length_and_not_one_bit_off():
    """The native CRC-32C folds 64, 128 or 512 bits at a time: every length of the checked range up to
    a few folds and past a page, so each remainder path runs, must give the reference's value, and a
    CRC off by any one bit must be refused."""
    rng = random.Random(7)
    for value_size in [*range(0, 1100), 4096, 4097, 16_384, 65_535]:
        data = batch([(b"k", rng.randbytes(value_size), [], 0)])
        stored = struct.unpack_from(">I", data, 17)[0]
        assert stored == compute_crc(data, 0, len(data))   # the reference wrote it
        assert stratalog_native.check_batch(data) is not None, f"value of {value_size} bytes"
        bit = 1 << (value_size % 32)
        wrong = data[:17] + struct.pack(">I", stored ^ bit) + data[21:]
        assert stratalog_native.check_batch(wrong) is None, f"value of {value_size} bytes, bit {bit:#x}"


def test_the_kernels_own_rust_tests_pass():
    """native/src's unit tests (the CRC against its bitwise definition at every alignment, among
    them), run by cargo as a developer runs them: otherwise nothing in CI would."""
    native = Path(__file__).resolve().parents[1] / "native"
    result = subprocess.run(["cargo", "test", "--release", "--lib", "--manifest-path", str(native / "Cargo.toml")],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Every #[test] in the sources ran and passed: a run of none would also say "ok".
    written = sum(path.read_text().count("#[test]") for path in (native / "src").rglob("*.rs"))
    assert written > 0 and f"test result: ok. {written} passed; 0 failed" in result.stdout, result.stdout[-3000:]


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


def test_the_installed_kernel_has_the_interface_this_package_expects():
    assert stratalog_native.INTERFACE == native.INTERFACE


@pytest.mark.parametrize("stale", ["", "INTERFACE = 0\n"])
def test_a_kernel_built_from_other_sources_is_refused_by_native_and_passed_over_by_auto(tmp_path, stale):
    # A stand-in (a Python module, not a build) for an extension built from older sources, found
    # first on the path: without the INTERFACE attribute (before it existed) or with another number.
    (tmp_path / "stratalog_native.py").write_text(f"# stand-in for an old build\n{stale}def scan_log(*a): pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    code = "from stratalog.records import native; print(native.name())"
    run = [sys.executable, "-c", code]
    refused = subprocess.run(run, env={**env, "STRATALOG_KERNEL": "native"}, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0
    found = "0" if stale else "None"
    assert f"has interface {found}, this stratalog needs {native.INTERFACE}" in refused.stderr
    assert "rebuild it with `scripts/setup`" in refused.stderr
    passed_over = subprocess.run(run, env={**env, "STRATALOG_KERNEL": "auto"}, capture_output=True, text=True,
                                 timeout=60)
    assert passed_over.returncode == 0, passed_over.stderr
    assert passed_over.stdout.strip() == "python"
    assert "running the pure-Python record kernel meanwhile" in passed_over.stderr


# -- the cleaner: its offset map, and its walks over batches ------------------------------------------
def _write_log(root: Path, seed: int, clock_ms: int) -> Path:
    """A compacted partition of random batches (keyless records, tombstones, headers, several codecs,
    LogAppendTime batches, idempotent producers' batches, transactions committed and aborted), over
    several segments; the same seed writes the same bytes."""
    rng = random.Random(seed)
    manager = LogManager([root], EngineConfig.from_properties({}), clock=lambda: clock_ms).open()
    config = {"segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}
    # Written as a delete topic, then made compacted: keyless records get in only that way.
    if rng.random() < 0.3:
        config["message.timestamp.type"] = "LogAppendTime"
    TopicAdmin(manager).create_topic("c", 1, {**config, "cleanup.policy": "delete"})
    log = manager.get_log("c", 0)
    for _ in range(rng.randint(20, 60)):
        records = [Record(i, clock_ms - rng.randint(0, 5000),
                          None if rng.random() < 0.05 else b"key-%d" % rng.randrange(12),
                          None if rng.random() < 0.15 else rng.randbytes(rng.randint(0, 40)),
                          tuple(Header(f"h{j}", rng.choice([None, b"x"])) for j in range(rng.choice([0, 0, 1, 2]))))
                   for i in range(rng.randint(1, 6))]
        codec = rng.choice([Compression.NONE] * 4 + [Compression.GZIP, Compression.LZ4])
        if rng.random() < 0.15:   # a transaction's batch, and its marker (an open one would stop the cleaner)
            producer, base = rng.randrange(3), log.log_end_offset
            records = [Record(base + r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
            log.append_raw(build_batch(records, base_offset=base, compression=codec,
                                       producer_id=producer, producer_epoch=0, base_sequence=rng.randrange(1000),
                                       is_transactional=True))
            log.append_raw(build_end_txn_marker_batch(
                rng.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT]), producer_id=producer,
                producer_epoch=0, coordinator_epoch=0, base_offset=log.log_end_offset, timestamp=clock_ms))
            continue
        if rng.random() < 0.2:   # an idempotent producer's: its last batch stays even when emptied
            base = log.log_end_offset
            records = [Record(base + r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
            log.append_raw(build_batch(records, base_offset=base, compression=codec, producer_id=3 + rng.randrange(2),
                                       producer_epoch=0, base_sequence=rng.randrange(1000)))
            continue
        log.append(build_batch(records, compression=codec))
    log.roll()
    TopicAdmin(manager).alter_topic_config("c", {**config, "cleanup.policy": "compact"})
    manager.close()
    return root


def _clean_with(module: ModuleType | None, root: Path, clock_ms: int) -> tuple[dict[str, bytes], list[object]]:
    with kernel(module):
        manager = LogManager([root], EngineConfig.from_properties({}), clock=lambda: clock_ms).open()
        stats = []
        for now in (clock_ms, clock_ms + 1000, clock_ms + 10_000):   # then at, and past, the horizon
            manager.clock = lambda: now   # noqa: B023 - used at once
            if now != clock_ms:   # something new to clean, so the pass reaches the old tombstones
                log = manager.get_log("c", 0)
                log.append(build_batch([Record(0, now, b"fresh-%d" % now, b"x")]))
                log.roll()
            for report in LogCleaner(manager).run_pass(force=True):
                s = report.stats
                stats.append((report.end_offset, s.records_read, s.records_retained, s.records_removed,
                              s.invalid_records, s.map_records))
        manager.close()
    return {p.name: p.read_bytes() for p in sorted((root / "c-0").glob("*.log"))}, stats


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 1 << 30))
def test_a_log_cleaned_by_either_kernel_is_the_same_bytes(tmp_path_factory, seed):
    clock_ms = 1_700_000_000_000
    python = _clean_with(None, _write_log(tmp_path_factory.mktemp("python"), seed, clock_ms), clock_ms)
    rust = _clean_with(stratalog_native, _write_log(tmp_path_factory.mktemp("native"), seed, clock_ms), clock_ms)
    assert rust == python
    assert python[1], "the cleaner ran"


def test_keys_that_share_one_hash_in_the_native_map_keep_their_own_offsets():
    offset_map = stratalog_native.OffsetMap(1 << 20, colliding=True)
    for i in range(300):
        assert offset_map.try_put(b"key-%d" % i, i)
    assert offset_map.try_put(b"key-7", 1000)
    assert [offset_map.get(b"key-%d" % i) for i in range(300)] == [1000 if i == 7 else i for i in range(300)]
    assert offset_map.get(b"key-300") == -1


def test_the_native_map_holds_a_short_key_in_about_32_bytes_and_never_outgrows_its_budget():
    memory = 4 << 20
    offset_map = stratalog_native.OffsetMap(memory, 0.9)
    keys = 0
    while offset_map.try_put(b"key-%08d" % keys, keys):   # 12 bytes, as the benchmark's keys
        keys += 1
    assert offset_map.used_bytes <= memory * 0.9 and offset_map.peak_bytes <= memory * 0.9
    assert memory * 0.9 / keys <= 34, f"{memory * 0.9 / keys:.1f} bytes a key"
    assert offset_map.try_put(b"key-00000000", -5) and offset_map.get(b"key-00000000") == -5   # known keys still move


# -- recovery: the scan of a segment after an unclean shutdown ------------------------------------------
def _segment_bytes(rng: random.Random) -> bytes:
    """Batches of rising leader epochs (some without one), then damage: a flipped byte, a cut, garbage."""
    out = bytearray()
    offset, epoch = 0, rng.choice([-1, 0])
    for _ in range(rng.randint(1, 30)):
        if rng.random() < 0.2:
            epoch += rng.randint(1, 3)
        records = [Record(offset + i, T0 + rng.randint(-2, 2), b"k", rng.randbytes(rng.randint(0, 300)))   # ties too
                   for i in range(rng.randint(1, 5))]
        out += build_batch(records, base_offset=offset, partition_leader_epoch=epoch)
        offset += len(records)
    damage = rng.choice(["none", "flip", "cut", "garbage"])
    if damage == "flip":
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif damage == "cut":
        del out[rng.randrange(len(out)):]
    elif damage == "garbage":
        out += rng.randbytes(rng.randint(1, 100))
    return bytes(out)


def _recover_with(module: ModuleType | None, root: Path, segment: bytes) -> dict[str, object]:
    directory = root / "t-0"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(segment)
    with kernel(module):
        try:
            log, report = load_log(directory, TopicPartition("t", 0),
                                   LogConfig.from_overrides({"index.interval.bytes": "500"}),
                                   recovery_point=0, had_clean_shutdown=False, clock=lambda: T0)
        except StratalogError as error:   # offsets out of order (a base offset is outside the CRC)
            return {"refused": type(error).__name__, "why": str(error).replace(str(root), "<root>")}
        state = {"log_end_offset": log.log_end_offset, "truncated": report.truncated_bytes,
                 "epochs": log.epoch_cache.entries, "max_timestamp": log.active_segment.max_timestamp_so_far,
                 "offset_of_max_timestamp": log.active_segment.offset_of_max_timestamp}
        log.close()
    state.update({p.name: p.read_bytes() for p in sorted(directory.iterdir())})
    return state


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1 << 30))
def test_a_segment_recovered_by_either_kernel_ends_in_the_same_state(tmp_path_factory, seed):
    segment = _segment_bytes(random.Random(seed))
    python = _recover_with(None, tmp_path_factory.mktemp("python"), segment)
    rust = _recover_with(stratalog_native, tmp_path_factory.mktemp("native"), segment)
    assert rust == python


# -- the append path: a whole producer batch in one call -------------------------------------------------
@settings(max_examples=400, deadline=None)
@given(_records, st.sampled_from(list(Compression)), st.data())
def test_a_batch_checked_in_one_native_call_agrees_with_validate_and_summarize(fields, codec, draw):
    data = bytearray(batch(fields, codec))
    if draw.draw(st.booleans()):   # damage anywhere: header, CRC, records
        position = draw.draw(st.integers(0, len(data) - 1))
        data[position] = draw.draw(st.integers(0, 255))
    with kernel(None):
        try:
            header = validate_batch(data, 0)
        except CorruptRecordError:
            header = None
        try:
            summary = summarize_records(data, 0) if header is not None else None
        except CorruptRecordError:
            summary = "refused"
    with kernel(stratalog_native):
        checked = checked_batch(data)
    if header is None:
        assert checked is None
    elif header.compression != Compression.NONE:
        assert checked == (header, None)   # its records are summarized after decompression, in Python
    elif summary == "refused":
        assert checked is None
    else:
        assert checked == (header, summary)


@pytest.mark.parametrize("memory", [500, 100_000, 2 << 20, 8 << 20, 10 << 20])
def test_the_native_map_never_allocates_past_its_budget_even_when_a_key_is_refused(memory):
    offset_map = stratalog_native.OffsetMap(memory, 0.9)
    keys = 0
    while offset_map.try_put(b"key-%08d" % keys, keys):
        keys += 1
    used = offset_map.used_bytes
    assert keys > 0 and used <= memory * 0.9 and offset_map.peak_bytes <= memory * 0.9
    assert not offset_map.try_put(b"one more", 1) and offset_map.used_bytes == used   # a refusal allocates nothing


def test_a_native_map_without_a_positive_budget_is_refused_as_the_python_one_is():
    with pytest.raises(ValueError, match="positive memory budget"):
        stratalog_native.OffsetMap(-1)


def test_a_delete_horizon_past_int64_is_refused_by_both_kernels(tmp_path):
    # delete.retention.ms = Long.MAX: the horizon of a kept tombstone does not fit a batch.
    outcomes = []
    for module in (None, stratalog_native):
        manager = LogManager([tmp_path / str(module is None)], EngineConfig.from_properties({}),
                             clock=lambda: T0).open()
        TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                                  "delete.retention.ms": str((1 << 63) - 1)})
        log = manager.get_log("c", 0)
        log.append(build_batch([Record(0, T0 - 1000, b"a", b"1"), Record(1, T0 - 1000, b"b", None)]))
        log.append(build_batch([Record(0, T0 - 1000, b"a", b"2")]))
        log.roll()
        with kernel(module), pytest.raises(ValueError) as refused:
            LogCleaner(manager).run_pass(force=True)
        outcomes.append(str(refused.value))
        manager.close()
    assert outcomes[0] == outcomes[1] and "does not fit in a varlong" in outcomes[0]


@pytest.mark.parametrize("length", [-1, 0, 5, 6, 200])
def test_a_record_length_below_the_minimum_body_or_past_the_records_fails_alike(length):
    data = bytearray(batch([(b"k", b"v", [], 0), (b"k2", b"v2", [], 0)]))
    data[RECORDS_START] = encode_varint(length)[0] if -64 <= length < 64 else data[RECORDS_START]
    if length >= 64:
        data[RECORDS_START:RECORDS_START + 1] = encode_varint(length)
        struct.pack_into(">i", data, 8, len(data) - 12)
    error = both(data)
    assert isinstance(error, tuple) and error[0] == "CorruptRecordError" and error[1] == RECORDS_START
    with kernel(stratalog_native):   # the full walk (the cleaner's) agrees with decode_records too
        native_error = _decode_error(data)
    with kernel(None):
        assert native_error == _decode_error(data)


def _decode_error(data: bytearray) -> tuple[int, str]:
    offset_map = stratalog_native.OffsetMap(1 << 20)
    try:
        if native.kernel is None:
            decode_records(bytes(data), verify_crc=False)
        else:
            native_walk(bytes(data), 0, lambda records, begin, end, h: offset_map.map_records(
                records, begin, end, h.records_count, h.base_offset, 0), verify_crc=False)
    except CorruptRecordError as error:
        return error.position, error.reason
    raise AssertionError("accepted")


def _plain_batches(first_offset: int, keys: list[list[bytes]]) -> list[bytes]:
    out, offset = [], first_offset
    for batch_keys in keys:
        out.append(build_batch([Record(offset + i, T0, key, b"v") for i, key in enumerate(batch_keys)],
                               base_offset=offset))
        offset += len(batch_keys)
    return out


def test_the_native_map_pass_over_a_chunk_stops_where_the_python_path_must_take_over():
    plain = _plain_batches(0, [[b"a", b"b"], [b"c"]])
    gzip = build_batch([Record(3, T0, b"d", b"v")], base_offset=3, compression=Compression.GZIP)
    after = _plain_batches(4, [[b"e"]])
    chunk = b"".join(plain + [gzip] + after)
    offset_map = stratalog_native.OffsetMap(1 << 20)
    # Two plain batches mapped; the compressed one is left where it starts.
    assert offset_map.map_batches(chunk, 0, 0, 100) == (len(plain[0]) + len(plain[1]), 3, 1)
    assert offset_map.latest_offset == 2 and offset_map.get(b"c") == 2 and offset_map.get(b"d") == -1
    # From past the compressed batch: the last batch, then the end of the chunk.
    resume = len(chunk) - len(after[0])
    assert offset_map.map_batches(chunk, resume, 0, 100) == (len(after[0]), 1, 0)
    assert offset_map.latest_offset == 4


def test_the_native_map_pass_steps_over_batches_before_the_dirty_start_and_stops_at_its_end():
    batches = _plain_batches(0, [[b"a"], [b"b"], [b"c"], [b"d"]])
    chunk = b"".join(batches)
    broken = bytearray(batches[0])
    broken[-1] ^= 0xFF   # a CRC that fails: never read, since the batch ends before the start
    offset_map = stratalog_native.OffsetMap(1 << 20)
    assert offset_map.map_batches(bytes(broken) + chunk[len(batches[0]):], 0, 1, 3) == (
        sum(map(len, batches[:3])), 2, 3)
    assert (offset_map.get(b"a"), offset_map.get(b"b"), offset_map.get(b"c"), offset_map.latest_offset) == (-1, 1, 2, 2)


def test_the_native_map_pass_leaves_a_damaged_or_cut_batch_to_the_python_path():
    batches = _plain_batches(0, [[b"a"], [b"b"]])
    damaged = bytearray(batches[1])
    damaged[-1] ^= 0xFF
    offset_map = stratalog_native.OffsetMap(1 << 20)
    assert offset_map.map_batches(batches[0] + bytes(damaged), 0, 0, 100) == (len(batches[0]), 1, 1)
    assert offset_map.map_batches(batches[0] + batches[1][:-1], 0, 0, 100) == (len(batches[0]), 1, 0)


def test_a_native_map_that_fills_in_a_chunk_keeps_the_latest_offset_of_the_last_whole_batch():
    offset_map = stratalog_native.OffsetMap(1 << 20)
    keys = 0
    while offset_map.try_put(b"filler-%08d" % keys, -1):
        keys += 1
    offset_map.update_latest_offset(-1)
    batches = _plain_batches(0, [[b"filler-00000001"], [b"filler-00000002", b"new-key", b"filler-00000003"]])
    consumed, walked, stop = offset_map.map_batches(b"".join(batches), 0, 0, 100)
    assert (consumed, walked, stop) == (len(batches[0]) + len(batches[1]), 3, 2)
    assert offset_map.latest_offset == 0   # the filled batch is not the map's latest


# -- the transaction and producer scan: only producers' batches, stepped to natively ------------------
def _scanned_with(module: ModuleType | None, root: Path) -> object:
    with kernel(module):
        manager = LogManager([root], EngineConfig.from_properties({})).open()
        try:
            log = manager.get_log("c", 0)
            state = log.transactions()
            return (dict(state.ongoing), list(state._ended), list(state._aborted),
                    dict(log.producer_state.producers.producers) if log.producer_state.producers is not None else None)
        finally:
            manager.close()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 1 << 30), st.sampled_from(["as written", "large batches", "a torn tail"]))
def test_the_transaction_scan_finds_the_same_state_with_either_kernel(tmp_path_factory, seed, shape):
    roots = [tmp_path_factory.mktemp(name) for name in ("python", "native")]
    for root in roots:
        _write_log(root, seed, 1_700_000_000_000)
        manager = LogManager([root], EngineConfig.from_properties({})).open()
        log = manager.get_log("c", 0)
        if shape == "large batches":   # past the size where the scan reads headers alone
            TopicAdmin(manager).alter_topic_config("c", {"cleanup.policy": "compact", "segment.bytes": str(8 << 20),
                                                         "max.message.bytes": str(1 << 20)})
            base = log.log_end_offset
            log.append_raw(build_batch([Record(base, T0, b"big", b"x" * (200 << 10))], base_offset=base,
                                       producer_id=5, producer_epoch=0, base_sequence=0))
            log.append(build_batch([Record(0, T0, b"big", os.urandom(100 << 10))]))
        manager.close()
        if shape == "a torn tail":
            last = sorted((root / "c-0").glob("*.log"))[-2]   # the active one is empty, after a roll
            last.write_bytes(last.read_bytes() + build_batch([Record(0, T0, b"k", b"v")], producer_id=6,
                                                              producer_epoch=0, base_sequence=0)[:66])
    python, rust = _scanned_with(None, roots[0]), _scanned_with(stratalog_native, roots[1])
    assert rust == python


def _plain_and_gzip_log(root: Path, batches: int, *, gzip: bool = True) -> Path:
    """A compacted partition whose batches alternate between uncompressed and gzip (or are all uncompressed)."""
    manager = LogManager([root], EngineConfig.from_properties({})).open()
    # A sparse index: a batch's wrong offset then meets no index entry that would refuse it.
    config = {"segment.bytes": str(64 << 20), "min.cleanable.dirty.ratio": "0.01", "index.interval.bytes": str(1 << 20)}
    TopicAdmin(manager).create_topic("c", 1, {**config, "cleanup.policy": "delete"})
    log = manager.get_log("c", 0)
    for i in range(batches):
        records = [Record(5 * i + j, T0, b"key-%d" % (j % 7), b"v" * 30) for j in range(5)]
        log.append_raw(build_batch(records, base_offset=5 * i,
                                   compression=Compression.GZIP if gzip and i % 2 else Compression.NONE))
    log.roll()
    TopicAdmin(manager).alter_topic_config("c", {**config, "cleanup.policy": "compact"})
    manager.close()
    return root


def test_a_segment_mixing_plain_and_compressed_batches_is_read_once_per_pass(tmp_path, monkeypatch):
    """The native chunk walk hands the Python path its batches from the chunk it read, not from the file again."""
    from stratalog.storage.file_records import FileRecords

    root = _plain_and_gzip_log(tmp_path, 4000)
    segment_bytes = sum(p.stat().st_size for p in (root / "c-0").glob("*.log"))
    read = [0]
    original = FileRecords.read

    def counting(self: FileRecords, position: int, size: int) -> bytes:
        data = original(self, position, size)
        read[0] += len(data)
        return data

    monkeypatch.setattr(FileRecords, "read", counting)
    manager = LogManager([root], EngineConfig.from_properties({})).open()
    assert LogCleaner(manager).run_pass(force=True)
    manager.close()
    # the map pass, the producers' scan and the filter pass: one read of the segment each
    assert segment_bytes * 2 < read[0] <= segment_bytes * 3 + (1 << 20), (read[0], segment_bytes)


def test_a_base_offset_damaged_mid_segment_stops_the_cleaner_with_either_kernel(tmp_path):
    """Outside the CRC, a base offset can be wrong: the cleaned copy then cannot hold it, and is never swapped in."""
    outcomes = []
    for module in (None, stratalog_native):
        root = _plain_and_gzip_log(tmp_path / str(module is None), 300, gzip=False)
        segment = sorted((root / "c-0").glob("*.log"))[0]
        data = bytearray(segment.read_bytes())
        position = 0
        while position < len(data) // 2:   # a batch mid-segment, amid a run of plain ones
            position += int.from_bytes(data[position + 8 : position + 12], "big") + 12
        data[position + 3] ^= 0x40   # the batch's base offset, far past int32 of the segment's base
        segment.write_bytes(bytes(data))
        with kernel(module):
            manager = LogManager([root], EngineConfig.from_properties({})).open()
            reports = LogCleaner(manager).run_pass(force=True)
            manager.close()
        outcomes.append((reports, segment.read_bytes() == bytes(data)))
    assert outcomes[0] == outcomes[1] == ([], True)


# -- the leader's validation: the one-call path decides only what the reference accepts unchanged -----------
def _leader_outcome(validate, data: bytes, config: LogConfig, now_ms: int) -> object:
    try:
        v = validate(data, config, TopicPartition("t", 0), now_ms)
    except StratalogError as error:
        return (type(error).__name__, str(error))
    return (bytes(v.data), *v[1:])


_leader_configs = st.fixed_dictionaries({}, optional={
    "cleanup.policy": st.sampled_from(["compact", "delete"]),
    "max.message.bytes": st.integers(100, 3000),
    "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
    "message.timestamp.before.max.ms": st.integers(0, 10_000),
    "message.timestamp.after.max.ms": st.integers(0, 10_000),
    "compression.type": st.sampled_from(["producer", "uncompressed", "gzip"]),
})


@settings(max_examples=600, deadline=None)
@given(_records, st.sampled_from([Compression.NONE, Compression.GZIP]), _leader_configs,
       st.sampled_from([(-1, -1, -1), (7, 0, 0), (7, 0, -1)]), st.booleans(), st.sampled_from([0, 0, 0, 5]),
       st.integers(-3, 3), st.data())
def test_a_producer_batch_is_accepted_as_sent_only_where_the_reference_accepts_it_unchanged(
        fields, codec, overrides, producer, transactional, base_offset, header_max_shift, draw):
    producer_id, producer_epoch, base_sequence = producer
    real_max = T0 + max(ts for *_, ts in fields)
    data = bytearray(build_batch(
        [Record(i, T0 + ts, k, v, tuple(Header(hk, hv) for hk, hv in hs)) for i, (k, v, hs, ts) in enumerate(fields)],
        compression=codec, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=transactional, max_timestamp=real_max + header_max_shift))
    data[0:8] = base_offset.to_bytes(8, "big")   # outside the CRC
    edit = draw.draw(st.sampled_from(["none", "damage", "attributes", "count", "last offset delta"]))
    if edit == "damage":   # anywhere: header, CRC, records
        data[draw.draw(st.integers(0, len(data) - 1))] = draw.draw(st.integers(0, 255))
    elif edit != "none":   # a header field changed under a CRC that still matches: only the rules can refuse it
        at = {"attributes": ATTRIBUTES_AT, "count": COUNT_AT, "last offset delta": LAST_DELTA_AT}[edit]
        width = 2 if edit == "attributes" else 4
        value = int.from_bytes(data[at:at + width], "big") ^ draw.draw(st.sampled_from([1, 0x08, 0x10, 0x20, 0x40, 0x100]))
        data[at:at + width] = value.to_bytes(width, "big")
        data[17:21] = compute_crc(data, 0, len(data)).to_bytes(4, "big")
    config = LogConfig.from_overrides(overrides)
    real_min = T0 + min(ts for *_, ts in fields)
    now_ms = draw.draw(st.sampled_from([   # anywhere, or at either timestamp bound and one past it
        real_max + draw.draw(st.integers(-12_000, 12_000)),
        real_min + config.message_timestamp_before_max_ms, real_min + config.message_timestamp_before_max_ms + 1,
        real_max - config.message_timestamp_after_max_ms, real_max - config.message_timestamp_after_max_ms - 1]))
    assume(now_ms < 1 << 62)   # a clock, not the default bound's Long.MAX
    sent = bytes(data)
    with kernel(None):
        reference = _leader_outcome(validation._validate_step_by_step, sent, config, now_ms)
    with kernel(stratalog_native):
        quick = validation._accepted_as_sent(sent, config, now_ms)
        full = _leader_outcome(validation.validate_leader_batch, sent, config, now_ms)
    assert full == reference   # whichever path decides, the caller sees the same result
    if quick is not None:
        assert quick.data is sent   # the producer's own bytes, not a copy
        assert (bytes(quick.data), *quick[1:]) == reference and reference[0] == sent
