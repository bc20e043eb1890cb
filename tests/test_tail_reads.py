"""Most reads start where the log's recent activity left off: a read from the tail (a follower's
round, a consumer's long poll) at a batch the leader appended lately, a consumer reading one batch at
a time where its last read ended. A segment remembers both places, so such a read needs no index
lookup and no header read of the batch before its own; everywhere else (older batches, a reopened
log, a truncated one) the index and the headers decide, as before, and both give the same answer."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import stratalog_native

from kernel_choice import kernel
from stratalog.broker.fetch import FetchIsolation
from stratalog.common.config import LogConfig
from stratalog.common.names import TopicPartition
from stratalog.records import Record, build_batch
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log
from stratalog.storage.segment import RECENT_PLACES, LogSegment

T0 = 1_700_000_000_000


def open_log(directory: Path) -> Log:
    directory.mkdir(parents=True, exist_ok=True)
    log, _ = load_log(directory, TopicPartition("t", 0), LogConfig.from_overrides({}), recovery_point=0,
                      had_clean_shutdown=False, clock=lambda: T0)
    return log


def batch(count: int, value: bytes = b"v") -> bytes:
    return build_batch([Record(i, T0 + i, b"k%d" % i, value * (i + 1)) for i in range(count)])


def appended(log: Log, counts: list[int]) -> list[int]:
    """Batches of ``counts`` records appended as a leader (the one-call native path); their base offsets."""
    with kernel(stratalog_native):
        return [log.append(batch(count)).first_offset for count in counts]


class CountingReads:
    """The segment file's reads (each a pread), counted."""

    def __init__(self, segment: LogSegment) -> None:
        self.calls = 0
        self._read = segment.log.read
        segment.log.read = self  # type: ignore[method-assign]

    def __call__(self, position: int, size: int) -> Any:
        self.calls += 1
        return self._read(position, size)


def test_a_read_at_a_batch_appended_lately_reads_that_batch_and_nothing_before_it(tmp_path):
    log = open_log(tmp_path / "t-0")
    bases = appended(log, [3, 1, 4, 1, 5])
    reads = CountingReads(log.active_segment)
    fetched = log.read(bases[3], 1 << 20, isolation=FetchIsolation.LOG_END)
    assert reads.calls == 1
    assert fetched.data == log.active_segment.log.read(0, 1 << 20)[len(b"".join(
        batch(n) for n in (3, 1, 4))):]
    log.close()


def test_every_remembered_batch_is_where_the_file_says_it_is(tmp_path):
    """More batches than it keeps places for: the remembered ones and the forgotten ones are found
    exactly as a reopened log, which remembers none, finds them by its index and headers."""
    log = open_log(tmp_path / "t-0")
    bases = appended(log, [1 + i % 7 for i in range(3 * RECENT_PLACES)])
    remembered = [log.active_segment.translate_offset(base) for base in bases]
    log.close()
    reopened = open_log(tmp_path / "t-0")
    assert remembered == [reopened.active_segment.translate_offset(base) for base in bases]
    reopened.close()


def test_after_a_truncation_a_read_finds_the_batch_now_at_a_forgotten_offset(tmp_path):
    """Offset 6 began a batch before the truncation; after it, 6 lies inside a longer batch written
    at another position. The read must find that one, not the place the old batch had."""
    log = open_log(tmp_path / "t-0")
    assert appended(log, [3, 3, 3]) == [0, 3, 6]
    log.truncate_to(3)
    assert appended(log, [1, 5]) == [3, 4]
    whole = log.active_segment.log.read(0, 1 << 20)
    fetched = log.read(6, 1 << 20, isolation=FetchIsolation.LOG_END)
    assert fetched.data == whole[len(batch(3)) + len(batch(1)):]   # the 5-record batch holding offset 6
    log.close()


def test_a_consumer_reading_one_batch_at_a_time_finds_each_next_batch_by_its_header_alone(tmp_path):
    """A reopened log remembers no append: after its first read, each read is the next batch's header
    and the batch (two reads of the file), not the index entry's batch before it too."""
    log = open_log(tmp_path / "t-0")
    bases = appended(log, [3, 1, 4, 1, 5, 9, 2, 6])
    log.close()
    log = open_log(tmp_path / "t-0")
    reads = CountingReads(log.active_segment)
    whole = log.active_segment.log.read(0, 1 << 20)
    sizes = [len(batch(n)) for n in (3, 1, 4, 1, 5, 9, 2, 6)]
    log.read(bases[0], 1, isolation=FetchIsolation.LOG_END)   # one byte asked: one batch served
    calls, got = [], []
    for i, base in enumerate(bases[1:], start=1):
        before = reads.calls
        got.append(log.read(base, 1, isolation=FetchIsolation.LOG_END).data)
        calls.append(reads.calls - before)
    assert calls == [2] * (len(bases) - 1)
    assert got == [whole[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(1, len(bases))]
    log.close()


def test_after_a_truncation_a_read_does_not_start_where_an_earlier_read_ended(tmp_path):
    """A read of the batch at 0 ended where offset 3 began. After a truncation to 0, that place lies
    inside a record's value, whose bytes there happen to look like a batch header naming offset 3
    (a producer's value may hold anything). A read of offset 3 finds the batch that holds it: the
    truncation forgot where the earlier read ended."""
    log = open_log(tmp_path / "t-0")
    assert appended(log, [3, 3]) == [0, 3]
    log.close()
    log = open_log(tmp_path / "t-0")   # nothing appended by this one: only the read's end is remembered
    log.read(0, 1, isolation=FetchIsolation.LOG_END)
    log.truncate_to(0)
    forged = value_with_header_at(len(batch(3)), naming_offset=3)
    with kernel(stratalog_native):
        assert [log.append(b).first_offset for b in (forged, batch(3))] == [0, 1]
    whole = log.active_segment.log.read(0, 1 << 20)
    assert log.read(3, 1, isolation=FetchIsolation.LOG_END).data == whole[len(forged):]   # offsets 1-3
    log.close()


def value_with_header_at(position: int, *, naming_offset: int) -> bytes:
    """A one-record batch whose value holds, at ``position`` of the batch, the start of a v2 batch
    header (base offset ``naming_offset``, the smallest batch length, magic 2)."""
    header = struct.pack(">qiib", naming_offset, 49, 0, 2).ljust(61, b"\0")
    size = position + 2 * len(header)
    marker = b"\x7f" * 8
    value_at = build_batch([Record(0, T0, b"k", marker + bytes(size - len(marker)))]).index(marker)
    value = bytes(position - value_at) + header
    made = build_batch([Record(0, T0, b"k", value + bytes(size - len(value)))])
    assert made[position:position + len(header)] == header
    return made


def test_a_rolled_segment_remembers_no_place_so_memory_does_not_grow_with_the_segments(tmp_path):
    """Once a segment has rolled, a read there at a batch it appended, and a reader going on through
    it a batch at a time, find each batch through the index and the headers (three reads of the
    file or more, not one or two): nothing is kept for segments past the active one."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    log, _ = load_log(directory, TopicPartition("t", 0), LogConfig.from_overrides({"segment.bytes": 1000}),
                      recovery_point=0, had_clean_shutdown=False, clock=lambda: T0)
    bases = appended(log, [2] * 30)
    rolled = log.segments[0]
    assert rolled is not log.active_segment and len(rolled.log.read(0, 1 << 20)) > 3 * len(batch(2))
    reads = CountingReads(rolled)
    log.read(bases[0], 1, isolation=FetchIsolation.LOG_END)   # its end would be the next read's place
    calls = []
    for base in bases[1:4]:
        before = reads.calls
        log.read(base, 1, isolation=FetchIsolation.LOG_END)
        calls.append(reads.calls - before)
    assert min(calls) >= 3, calls
    log.close()
