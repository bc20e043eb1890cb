"""A leader's append in one native call (``Log._append_as_sent``) leaves the log exactly as the
reference path does: same offsets, same answers and errors, same files, byte for byte.

Both kernels run the same operations on two logs with the same clock: appends of plain, damaged,
compressed, idempotent, out-of-bounds and re-headed batches, on a thread's path and an event loop's,
across size, time and full-index rolls, index entries, flushes, leader epoch changes and
alter-configs.
"""

from __future__ import annotations

import errno
import os
import random
import struct
import threading
from typing import Any

import pytest
import stratalog_native

from filesystems import Tmpfs
from kernel_choice import kernel
from kernel_logs import T0, Clock, on_both_kernels, open_log
from stratalog.common.config import LogConfig
from stratalog.common.errors import KafkaStorageError, StratalogError
from stratalog.records import Compression, Record, build_batch
from stratalog.records.batch_header import compute_crc
from stratalog.storage.log import Log

class CountingKernel:
    """The native kernel, counting the batches its one-call append wrote."""

    def __init__(self) -> None:
        self.calls = self.written = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(stratalog_native, name)

    def append_as_sent(self, *args: Any) -> Any:
        self.calls += 1
        accepted = stratalog_native.append_as_sent(*args)
        self.written += accepted is not None
        return accepted


def producer_batch(count: int, *, value_size: int = 10, keyless: bool = False, timestamp: int = T0,
                   compression: Compression = Compression.NONE, producer: tuple[int, int, int] = (-1, -1, -1)
                   ) -> bytes:
    """``count`` records; ``producer``: an idempotent producer's id, epoch and first sequence."""
    records = [Record(i, timestamp + i if timestamp >= 0 else -1, None if keyless else b"k%d" % i, b"v" * value_size)
               for i in range(count)]
    producer_id, producer_epoch, base_sequence = producer
    return build_batch(records, compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


def random_config(rng: random.Random) -> LogConfig:
    """Small segments and index intervals; each other setting left at its default three times in
    four, so that most batches stay plain."""
    overrides: dict[str, object] = {
        "segment.bytes": rng.choice([rng.randint(500, 2000), rng.randint(4000, 16000)]),
        "index.interval.bytes": rng.choice([1, 100, 4096]),
    }
    choices: dict[str, object] = {
        "segment.ms": rng.randint(1, 5000),
        "flush.messages": rng.randint(1, 40),
        "max.message.bytes": rng.randint(100, 2000),
        "cleanup.policy": "compact",
        "message.timestamp.before.max.ms": rng.randint(0, 10_000),
        "message.timestamp.after.max.ms": rng.randint(0, 10_000),
        "compression.type": rng.choice(["producer", "uncompressed", "gzip"]),
        "message.timestamp.type": rng.choice(["CreateTime", "LogAppendTime"]),
        "segment.index.bytes": rng.randint(5, 30) * 12,   # an index that fills: a roll
    }
    overrides.update((name, value) for name, value in choices.items() if rng.random() < 0.25)
    return LogConfig.from_overrides(overrides)


class Sequences:
    """An idempotent producer's next sequence, and the batches it sends: in order as a rule, now and
    then a resend, a gap, a new epoch or a fenced old one."""

    def __init__(self) -> None:
        self.epoch, self.next, self.last = 0, 0, (0, 0)

    def next_batch(self, rng: random.Random, count: int) -> tuple[tuple[int, int, int], int]:
        """The producer fields of its next batch of ``count`` records, and the count it sends."""
        pick = rng.random()
        if pick < 0.08 and self.next > 0:
            return (5, self.epoch, self.last[0]), self.last[1]   # a resend of the last batch
        if pick < 0.12:
            return (5, self.epoch, self.next + rng.randint(1, 3)), count   # a gap
        if pick < 0.15:
            return (5, self.epoch + 1, 0), count           # a new epoch starts at 0
        if pick < 0.17:
            return (5, max(0, self.epoch - 1), self.next), count   # fenced, once the epoch has moved
        return (5, self.epoch, self.next), count

    def written(self, producer: tuple[int, int, int], count: int) -> None:
        _, epoch, first = producer
        self.epoch, self.next, self.last = epoch, first + count, (first, count)


def random_batch(rng: random.Random, now: int, sequences: Sequences) -> tuple[bytes | bytearray, tuple[int, int, int], int]:
    """Plain as a rule; one time in ten each: keyless, far off in time, compressed, damaged somewhere,
    a bytearray; one in four from an idempotent producer."""
    def rarely() -> bool:
        return rng.random() < 0.1

    producer, count = (-1, -1, -1), rng.randint(1, 8)
    if rng.random() < 0.25:
        producer, count = sequences.next_batch(rng, count)
    shift = rng.randint(-20_000, 20_000) if rarely() else rng.randint(-100, 100)
    timestamp = -1 if rarely() else now + shift   # -1: records without timestamps
    if producer[0] < 0 and rng.random() < 0.02:
        producer = (5, 0, -1)                     # a producer id without a sequence
    data = bytearray(producer_batch(count, value_size=rng.randint(0, 60), keyless=rarely(), timestamp=timestamp,
                                    compression=Compression.GZIP if rarely() else Compression.NONE,
                                    producer=producer))
    if rarely():
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    elif rarely():
        edit_header(rng, data)
    return (data if rarely() else bytes(data)), producer, count


def edit_header(rng: random.Random, data: bytearray) -> None:
    """A header the reference refuses or rewrites, under a CRC that still matches (or outside it)."""
    edit = rng.choice(["attributes", "count", "last offset delta", "max timestamp", "base offset", "trailing"])
    if edit == "base offset":    # outside the CRC
        data[0:8] = rng.randint(1, 1000).to_bytes(8, "big")
        return
    if edit == "trailing":       # more bytes than the batch declares
        data.extend(b"\0" * rng.randint(1, 70))
        return
    if edit == "attributes":     # LogAppendTime, transactional or control
        data[22] |= rng.choice([0x08, 0x10, 0x20])
    elif edit == "max timestamp":
        struct.pack_into(">q", data, 35, struct.unpack_from(">q", data, 35)[0] + rng.choice([-1, 1]))
    else:
        at = 57 if edit == "count" else 23
        struct.pack_into(">i", data, at, struct.unpack_from(">i", data, at)[0] + rng.choice([-1, 1]))
    data[17:21] = compute_crc(data, 0, len(data)).to_bytes(4, "big")


def run(log: Log, clock: Clock, rng: random.Random, steps: int) -> list[object]:
    """Appends, by a thread's path and an event loop's, between clock ticks and leader epoch changes:
    what each append answered, and the log's ends after it."""
    seen: list[object] = []
    sequences = Sequences()
    for _ in range(steps):
        step = rng.random()
        if step < 0.1:
            clock.now += rng.randint(0, 3000)
            continue
        if step < 0.12:
            log.leader_epoch += 1
            continue
        if step < 0.14:
            log.update_config(random_config(rng))   # alter-configs between appends
            continue
        data, producer, count = random_batch(rng, clock.now, sequences)
        try:
            answer: object = log.append_batches([data]) if rng.random() < 0.5 else log.try_append([data])
        except StratalogError as error:
            answer = (type(error).__name__, str(error))
        if producer[0] >= 0 and isinstance(answer, list) and answer[0].size > 0:
            sequences.written(producer, count)
        seen.append((answer, log.log_end_offset, log.high_watermark, log.recovery_point, len(log.segments)))
    return seen


def test_the_one_call_append_leaves_every_answer_and_file_as_the_reference_path_does(tmp_path):
    written = []
    for seed in range(100):
        counting = CountingKernel()
        python, native = on_both_kernels(tmp_path, seed, counting, random_config,
                                         lambda log, clock, rng: run(log, clock, rng, 40))
        assert python == native, f"seed {seed}"
        written.append(counting.written)
    # The comparison is worth something only where the one-call path wrote many of the batches.
    assert sum(written) >= 800, written


def test_a_plain_batch_is_checked_and_written_in_one_native_call_by_either_append(tmp_path):
    counting = CountingKernel()
    clock = Clock()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), clock)
        log.append_batches([producer_batch(1)])   # the reference path: leader epoch 0 starts here
        first = log.append_batches([producer_batch(3)])[0]
        second = log.try_append([producer_batch(2)])
        log.close()
    assert counting.written == 2
    assert (first.first_offset, first.last_offset, first.record_count) == (1, 3, 3)
    assert second is not None and (second[0].first_offset, second[0].last_offset) == (4, 5)


def test_a_topic_whose_bounds_are_all_long_max_still_takes_the_one_call_path(tmp_path):
    """segment.ms at Long.MAX_VALUE puts the roll bound past the first batch's timestamp beyond a long,
    which the kernel would refuse to take; the other bounds at Long.MAX_VALUE come along."""
    long_max = str((1 << 63) - 1)
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({
            "segment.ms": long_max, "message.timestamp.before.max.ms": long_max,
            "message.timestamp.after.max.ms": long_max, "flush.messages": long_max}), Clock())
        log.append_batches([producer_batch(1)])   # the reference path: leader epoch 0 starts here
        appended = [log.append_batches([producer_batch(2)])[0], log.try_append([producer_batch(2)])]
        log.close()
    assert counting.written == 2
    assert appended[1] is not None and [appended[0].last_offset, appended[1][0].last_offset] == [2, 4]
    assert [s.base_offset for s in log.segments] == [0]


@pytest.mark.parametrize("batch", [
    producer_batch(3, compression=Compression.GZIP),          # compressed
    producer_batch(3, timestamp=T0 + 10 * 3_600_000),         # past message.timestamp.after.max.ms
    producer_batch(3, keyless=True),                          # a compacted topic refuses it
], ids=["compressed", "from the future", "keyless"])
def test_a_batch_that_is_not_plain_is_left_to_the_reference_path(tmp_path, batch):
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"cleanup.policy": "compact"}), Clock())
        log.append_batches([producer_batch(1)])   # the reference path: leader epoch 0 starts here
        try:
            log.append_batches([batch])
        except StratalogError:
            pass
        log.append_batches([producer_batch(1)])
        log.close()
    assert counting.written == 1


def test_an_idempotent_producers_batches_in_sequence_take_the_one_call_path_and_a_resend_does_not(tmp_path):
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        first = log.append_batches([producer_batch(3, producer=(5, 0, 0))])[0]   # scans the producers
        second = log.append_batches([producer_batch(2, producer=(5, 0, 3))])[0]
        assert counting.written == 1
        resend = log.append_batches([producer_batch(2, producer=(5, 0, 3))])[0]
        third = log.try_append([producer_batch(1, producer=(5, 0, 5))])
        log.close()
    assert counting.written == 2
    assert (first.first_offset, second.first_offset, resend.first_offset) == (0, 3, 3) and resend.size == 0
    assert third is not None and third[0].first_offset == 5


def test_a_roll_and_a_new_leader_epoch_are_left_to_the_reference_path(tmp_path):
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"segment.bytes": 400}), Clock())
        log.append_batches([producer_batch(1, value_size=200)])   # epoch 0's first batch: checkpointed
        log.append_batches([producer_batch(1, value_size=200)])   # does not fit: a roll
        log.leader_epoch = 1
        log.append_batches([producer_batch(1)])
        log.close()
    assert counting.written == 0
    assert len(log.segments) == 2


def test_an_event_loop_append_that_would_fall_due_for_a_flush_is_declined(tmp_path):
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"flush.messages": 4}), Clock())
        log.append_batches([producer_batch(1)])
        assert log.try_append([producer_batch(2)]) is not None   # offsets 1-2: no flush yet
        assert log.try_append([producer_batch(1)]) is None       # offset 3 makes four messages
        log.close()
    assert counting.written == 1


@pytest.mark.parametrize("module", [None, CountingKernel()], ids=["python", "native"])
def test_a_batch_rolls_the_segment_by_time_only_once_its_max_timestamp_is_past_segment_ms(tmp_path, module):
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"segment.ms": 1000}), Clock())
        log.append_batches([producer_batch(1, timestamp=T0)])
        log.append_batches([producer_batch(1, timestamp=T0 + 1000)])   # at the bound: the same segment
        assert [s.base_offset for s in log.segments] == [0]
        log.append_batches([producer_batch(1, timestamp=T0 + 1001)])
        assert [s.base_offset for s in log.segments] == [0, 2]
        log.close()
    assert module is None or module.written == 1


@pytest.mark.parametrize("module", [None, CountingKernel()], ids=["python", "native"])
def test_a_segment_of_batches_without_timestamps_rolls_once_segment_ms_has_passed_since_it_was_made(
        tmp_path, module):
    clock = Clock()
    with kernel(module):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"segment.ms": 1000}), clock)
        log.append_batches([producer_batch(1, timestamp=-1)])
        clock.now += 1000
        log.append_batches([producer_batch(1, timestamp=-1)])   # at the bound: the same segment
        assert [s.base_offset for s in log.segments] == [0]
        clock.now += 1
        log.append_batches([producer_batch(1, timestamp=-1)])
        assert [s.base_offset for s in log.segments] == [0, 2]
        log.close()
    assert module is None or module.written == 1


def test_a_segment_without_timestamps_past_segment_ms_rolls_even_for_a_batch_stamped_long_min(tmp_path):
    """Kafka's roll by time without a first timestamp waits on the clock alone, whatever the batch carries.
    (A copied batch takes no kernel's one-call path: the roll decision is the segment's, for either kernel.)"""
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig.from_overrides({"segment.ms": 1000}), clock)
    log.append_batches([producer_batch(1, timestamp=-1)])
    clock.now += 1001
    copied = bytearray(build_batch([Record(1, -1, b"k", b"v")], base_offset=1))
    struct.pack_into(">q", copied, 35, -(1 << 63))   # the header's max timestamp, as a leader may have written it
    copied[17:21] = compute_crc(copied, 0, len(copied)).to_bytes(4, "big")
    log.append_raw(bytes(copied))   # as a follower copies it
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


class AnnouncingLock:
    """The log's lock, saying when a thread starts to wait for it."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.waiting = lock, threading.Event()

    def acquire(self, blocking: bool = True) -> bool:
        self.waiting.set()
        return bool(self.lock.acquire(blocking))

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *_: object) -> None:
        self.lock.release()


def test_an_append_waiting_for_the_lock_is_held_to_the_config_altered_meanwhile(tmp_path):
    counting = CountingKernel()
    with kernel(counting):
        log = open_log(tmp_path / "t-0", LogConfig.from_overrides({}), Clock())
        log.append_batches([producer_batch(1)])   # the reference path: leader epoch 0 starts here
        log.lock = announcing = AnnouncingLock(log.lock)
        outcome: list[object] = []
        with announcing.lock:
            appender = threading.Thread(target=lambda: outcome.append(_answer(log, producer_batch(2, keyless=True))))
            appender.start()
            assert announcing.waiting.wait(10)
            log.update_config(LogConfig.from_overrides({"cleanup.policy": "compact"}))
        appender.join(10)
        log.close()
    assert outcome == [("InvalidRecordError", outcome[0][1])] and "key" in str(outcome[0][1])
    assert counting.written == 0 and log.log_end_offset == 1


def _answer(log: Log, batch: bytes) -> object:
    try:
        return log.append_batches([batch])
    except StratalogError as error:
        return (type(error).__name__, str(error))


@pytest.mark.parametrize("how", ["closed", "offline"])
def test_a_damaged_batch_to_a_closed_or_offline_log_is_refused_as_the_reference_refuses_it(tmp_path, how):
    answers = []
    for module in (None, CountingKernel()):
        with kernel(module):
            log = open_log(tmp_path / f"{how}-{module is None}" / "t-0", LogConfig.from_overrides({}), Clock())
            log.append_batches([producer_batch(1)])
            if how == "closed":
                log.close()
            else:
                log.failures.mark_offline(log.log_dir, "a test", OSError(errno.EIO, os.strerror(errno.EIO)))
            damaged = bytearray(producer_batch(2))
            damaged[-1] ^= 0xFF
            answers.append(_answer(log, bytes(damaged)))
            log.close()
    assert answers[0] == answers[1] and answers[0][0] == "CorruptRecordError"


def test_a_one_call_write_on_a_full_disk_reports_what_a_python_write_reports_and_leaves_no_partial_batch(tmp_path):
    """A real full tmpfs: the native write's OSError carries errno and strerror as os.pwritev's does,
    and the torn write is cut back."""
    small = Tmpfs(tmp_path / "small", size="1m")
    try:
        counting = CountingKernel()
        with kernel(counting):
            log = open_log(small.path / "t-0", LogConfig.from_overrides({}), Clock())
            log.append_batches([producer_batch(1)])   # the reference path: leader epoch 0 starts here
            small.fill()
            with pytest.raises(KafkaStorageError) as refused:
                for _ in range(1000):
                    end = log.log_end_offset
                    size = log.active_segment.size
                    log.append_batches([producer_batch(8, value_size=1000)])
            offline = log.failures.offline()[log.log_dir]
            # The part of the batch that fitted the file's last page is cut: the file ends at the last
            # batch written whole.
            assert log.log_end_offset == end and log.active_segment.size == size
            assert log.active_segment.log.path.stat().st_size == size
            log.close()
        assert counting.calls == counting.written + 1   # the native write is the one that failed
        assert (offline.errno_name, offline.reason) == ("ENOSPC", os.strerror(errno.ENOSPC))
        assert "os error" not in str(refused.value)
    finally:
        small.unmount()
