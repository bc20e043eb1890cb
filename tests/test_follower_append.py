"""A follower's append of its leader's batches: the native kernel's one-call path leaves every answer
and every file as the batch-by-batch reference path does, and takes the common case itself."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

stratalog_native = pytest.importorskip("stratalog_native")

from kernel_choice import kernel  # noqa: E402
from kernel_logs import T0, Clock, on_both_kernels, open_log  # noqa: E402
from stratalog.common.config import LogConfig  # noqa: E402
from stratalog.common.errors import CorruptRecordError, StratalogError  # noqa: E402
from stratalog.records import Compression, ControlRecordType, Record, build_batch  # noqa: E402
from stratalog.records.batch_header import compute_crc  # noqa: E402
from stratalog.records.control import build_end_txn_marker_batch  # noqa: E402
from stratalog.storage import follower_append  # noqa: E402
from stratalog.storage.log import Log  # noqa: E402

@pytest.fixture
def one_call_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many fetches the one-call path wrote (``follower_append._append_at_once`` answering, not
    declining), counted around the real function."""
    written = [0]
    real = follower_append._append_at_once

    def counted(log: Log, data: bytes) -> int | None:
        end = real(log, data)
        written[0] += end is not None
        return end

    monkeypatch.setattr(follower_append, "_append_at_once", counted)
    return written


def random_config(rng: random.Random) -> LogConfig:
    overrides: dict[str, object] = {"segment.bytes": rng.choice([rng.randint(300, 1500), 1 << 20]),
                                    "index.interval.bytes": rng.choice([1, 200, 4096])}
    if rng.random() < 0.3:
        overrides["segment.ms"] = rng.randint(1, 5000)
    if rng.random() < 0.3:
        overrides["segment.index.bytes"] = rng.randint(1, 6) * 12   # an index that fills: a roll
    if rng.random() < 0.3:
        overrides["flush.messages"] = rng.randint(1, 30)
    return LogConfig.from_overrides(overrides)


class Leader:
    """The leader's log as batches: offsets and epochs as it wrote them, now and then an idempotent
    producer's batch, a transaction and its marker, a compressed batch, a gap (compaction)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.next_offset, self.epoch, self.sequence = rng, 0, rng.randint(0, 3), 0

    def batch(self, now: int) -> bytes:
        rng = self.rng
        if rng.random() < 0.1:
            self.epoch += 1
        if rng.random() < 0.05:
            self.next_offset += rng.randint(1, 5)   # the leader's log was compacted here
        base, count = self.next_offset, rng.randint(1, 6)
        pick = rng.random()
        if pick < 0.05:
            marker = bytearray(build_end_txn_marker_batch(
                rng.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT]), producer_id=9, producer_epoch=0,
                coordinator_epoch=0, base_offset=base, timestamp=now, partition_leader_epoch=self.epoch))
            if rng.random() < 0.3:   # records that do not parse, under a CRC that matches
                marker[61:] = b"\xff" * (len(marker) - 61)
                recrc(marker)
            self.next_offset = base + 1
            return bytes(marker)
        producer: dict[str, Any] = {}
        if pick < 0.35:
            producer = {"producer_id": 7 if pick < 0.25 else 9, "producer_epoch": 0, "base_sequence": self.sequence,
                        "is_transactional": pick >= 0.25}
            self.sequence += count
        elif pick < 0.4:
            producer = {"is_transactional": True}   # transactional without a producer id: the state still counts it
        shift = rng.randint(-3000, 3000) if rng.random() < 0.2 else rng.randint(0, 50)
        records = [Record(base + i, now + shift + i, b"k%d" % i, b"v" * rng.randint(0, 40)) for i in range(count)]
        compression = Compression.GZIP if rng.random() < 0.1 else Compression.NONE
        self.next_offset = base + count
        data = build_batch(records, base_offset=base, partition_leader_epoch=self.epoch, compression=compression,
                           **producer)
        if rng.random() < 0.02:   # a last offset delta below zero, under a CRC that matches
            damaged = bytearray(data)
            struct.pack_into(">i", damaged, 23, -rng.randint(1, 3))
            recrc(damaged)
            return bytes(damaged)
        return data


def recrc(batch: bytearray) -> None:
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")


def spoil(rng: random.Random, fetch: bytes) -> bytes:
    """A fetch as no leader sends it: a flipped byte under a CRC, a cut tail, a batch again, garbage."""
    data = bytearray(fetch)
    how = rng.choice(["flip", "cut", "again", "garbage", "magic"])
    if how == "flip":
        data[rng.randrange(21, len(data))] ^= 0xFF
    elif how == "cut":
        del data[rng.randrange(1, len(data)):]
    elif how == "again":
        data += fetch[:struct.unpack_from(">i", fetch, 8)[0] + 12]
    elif how == "garbage":
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 80)))
    else:
        data[16] = 7
    return bytes(data)


def follow(log: Log, clock: Clock, rng: random.Random, fetches: int) -> list[object]:
    """Fetches of one to four batches applied as a follower applies them, with now and then a tick of
    the clock or a fetch that is damaged: each answer (or error), the log's ends after it, and the
    transaction state as read_committed sees it."""
    leader, seen = Leader(rng), []
    for _ in range(fetches):
        if rng.random() < 0.15:
            clock.now += rng.randint(0, 4000)
        fetch = b"".join(leader.batch(clock.now) for _ in range(rng.choice([1, 1, 1, 2, 4])))
        if rng.random() < 0.08:
            fetch = spoil(rng, fetch)
        try:
            answer: object = log.append_as_follower(fetch)
        except StratalogError as error:   # named as the same file in both runs' directories
            answer = (type(error).__name__, str(error).replace(str(log.dir), "<log dir>"))
        log.set_high_watermark(log.log_end_offset)   # the leader's, which the follower follows
        seen.append((answer, log.log_end_offset, log.recovery_point, len(log.segments),
                     log.epoch_cache.entries, transactions(log)))
    return seen


def transactions(log: Log) -> object:
    """The last stable offset and the open transactions (their scan of the log never fails: a marker
    whose records do not parse is refused before it is written)."""
    return log.last_stable_offset(), dict(log.transactions().ongoing)


def test_the_one_call_follower_append_leaves_every_answer_and_file_as_the_reference_path_does(
        tmp_path, one_call_writes):
    for seed in range(60):
        python, native = on_both_kernels(tmp_path, seed, stratalog_native, random_config,
                                         lambda log, clock, rng: follow(log, clock, rng, 40))
        assert python == native, f"seed {seed}"
    # Worth something only where the one-call path wrote many fetches (the rest roll the small
    # segments, fill the small indexes, or are not plain; the reference run has no kernel).
    assert one_call_writes[0] >= 60 * 40 // 2, one_call_writes


def test_a_fetch_of_whole_plain_batches_is_written_in_one_call_and_indexed_as_batch_by_batch(
        tmp_path, one_call_writes):
    leader = Leader(random.Random(1))
    with kernel(stratalog_native):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"index.interval.bytes": "1"}), Clock())
        first = log.append_as_follower(leader.batch(T0))
        fetch = b"".join(leader.batch(T0) for _ in range(3))
        end = log.append_as_follower(fetch)
        entries = log.active_segment.offset_index.entries
        log.close()
    assert one_call_writes == [2]
    assert end == leader.next_offset and first < end
    assert entries == 3   # one entry for each batch after the first, as index.interval.bytes=1 has it


@pytest.mark.parametrize("what, refused, whole", [
    ("a damaged batch", "CorruptRecordError", 0),
    ("a partial tail", None, 2),              # the reference keeps the whole batches before it
    ("offsets that go back", "OffsetOutOfRangeError", 3),
])
def test_a_fetch_the_kernel_does_not_take_whole_is_left_to_the_reference_path(tmp_path, one_call_writes, what,
                                                                              refused, whole):
    leader = Leader(random.Random(2))
    batches = [leader.batch(T0) for _ in range(3)]
    ends = [struct.unpack_from(">q", b)[0] + struct.unpack_from(">i", b, 23)[0] + 1 for b in batches]
    fetch = b"".join(batches)
    if what == "a damaged batch":
        fetch = fetch[:-1] + bytes([fetch[-1] ^ 1])
    elif what == "a partial tail":
        fetch = fetch[:-5]
    with kernel(stratalog_native):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        if what == "offsets that go back":
            log.append_as_follower(fetch)   # batch by batch too: several into an empty segment
        try:
            log.append_as_follower(fetch)
        except StratalogError as error:
            answer: str | None = type(error).__name__
        else:
            answer = None
        end = log.log_end_offset
        log.close()
    assert answer == refused
    assert end == ([0] + ends)[whole]
    assert one_call_writes == [0]


def damaged_marker(base_offset: int, epoch: int, how: str) -> tuple[bytes, int]:
    """An ABORT marker whose CRC matches but whose record, key or value does not parse, and the byte
    where it stops parsing."""
    marker = bytearray(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=9, producer_epoch=0,
                                                  coordinator_epoch=0, base_offset=base_offset, timestamp=T0,
                                                  partition_leader_epoch=epoch))
    key = marker.find(b"\x00\x00\x00\x00", 61)   # the key: version 0, type ABORT (0)
    value = len(marker) - 7                         # the value (6 bytes), then the headers' count
    if how == "records":
        marker[61:] = b"\xff" * (len(marker) - 61)
        where = 61
    elif how == "key version":
        marker[key:key + 2] = b"\xff\xff"
        where = key
    else:
        marker[value:value + 2] = b"\xff\xff"
        where = value
    recrc(marker)
    return bytes(marker), where


@pytest.mark.parametrize("scanned", [False, True], ids=["state unread", "state read"])
@pytest.mark.parametrize("how, reason", [
    ("records", "varint"),
    ("key version", "Invalid version found for control record"),
    ("value version", "Invalid version found for end transaction marker"),
])
def test_a_fetch_with_a_transaction_marker_that_does_not_parse_is_refused_before_anything_is_written(
        tmp_path, how, reason, scanned):
    leader = Leader(random.Random(3))
    first = leader.batch(T0)
    before = leader.batch(T0)
    marker, where = damaged_marker(leader.next_offset, leader.epoch, how)
    leader.next_offset += 1
    after = leader.batch(T0)
    with kernel(stratalog_native):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        end = log.append_as_follower(first)
        if scanned:
            log.transactions()   # the state known: a marker would be read right after its write
        size = log.size
        with pytest.raises(CorruptRecordError) as refused:
            log.append_as_follower(before + marker + after)
        assert (log.log_end_offset, log.size) == (end, size)
        log.set_high_watermark(log.log_end_offset)
        assert log.last_stable_offset() == end   # the scan of the transactions still reads the log
        following = log.append_as_follower(before)   # the batch before the marker still follows
        log.close()
    assert following == struct.unpack_from(">q", marker)[0]
    assert refused.value.source == f"replicated batch of t-0 at offset {struct.unpack_from('>q', marker)[0]}"
    assert (refused.value.position, reason in refused.value.reason) == (where, True), refused.value


def test_an_empty_log_starting_inside_the_first_batch_keeps_its_start_when_the_fetch_is_refused(tmp_path):
    leader = Leader(random.Random(4))
    first = build_batch([Record(10 + i, T0, b"k", b"v") for i in range(4)], base_offset=10,
                        partition_leader_epoch=leader.epoch)   # offsets 10..13
    leader.next_offset = 14
    damaged = bytearray(leader.batch(T0))
    damaged[-1] ^= 1   # its CRC no longer matches
    with kernel(stratalog_native):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        log.truncate_fully_and_start_at(12)   # the leader's log start moved inside that batch
        with pytest.raises(CorruptRecordError):
            log.append_as_follower(first + bytes(damaged))
        refused = (log.log_start_offset, log.log_end_offset)
        taken = log.append_as_follower(first)   # the batch alone: taken whole, the log restarted at its base
        log.close()
    assert refused == (12, 12)
    assert taken == 14
