"""A partition log under random operations behaves like a simple list of records.

A hypothesis state machine drives a real ``Log`` on a temporary directory with
tiny segments and indexes (so size, time and index-full rolls all happen) through
appends, explicit rolls, truncations, flushes, clean and unclean reopens and
start-offset moves, and after every step compares it with a model: the list of
records by offset, the batch boundaries, the log start offset. The model of a
timestamp lookup follows Kafka's ListOffsets (§4.3): the first segment whose
largest timestamp reaches the target, and in it the first record (in offset
order, at or after the log start offset) whose timestamp reaches the target.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from stratalog.common.config import LogConfig
from stratalog.common.errors import RecordBatchTooLargeError
from stratalog.storage.loader import load_log
from stratalog.storage.log import Log
from stratalog.common.names import TopicPartition
from stratalog.records import Compression, Header, Record, build_batch, iter_batch_infos, parse_header

TP = TopicPartition("props", 0)
NOW = 1_700_000_000_000
# message.timestamp.after.max.ms is one hour: every timestamp stays well inside it.
TIMESTAMP_FLOOR = NOW - 20_000
TIMESTAMP_CEILING = NOW + 20_000
WEEK_MS = 7 * 24 * 3_600_000
SEGMENT_NAME = re.compile(r"^\d{20}\.log$")


class FixedClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass(frozen=True)
class ModelBatch:
    base: int
    last: int


header_keys = st.text(alphabet="abcé☃-", min_size=0, max_size=4)
header_values = st.none() | st.binary(max_size=6)
records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=8),  # key
        st.none() | st.binary(max_size=30),  # value
        st.lists(st.builds(Header, header_keys, header_values), max_size=2).map(tuple),  # headers
        st.integers(TIMESTAMP_FLOOR, TIMESTAMP_CEILING),  # timestamp
    ),
    min_size=1,
    max_size=10,
)


def _expected_offset_for_timestamp(segments: list[list[Record]], start: int,
                                   target: int) -> tuple[int, int] | None:
    """ListOffsets as stratalog answers it (Log.offset_for_timestamp, §4.3 plus one deliberate change).

    Segments are searched in order, skipping those whose largest timestamp is below the target; in
    each, the first record in offset order at or after the log start offset with timestamp >= target.
    Kafka stops at the first segment that reaches the target and answers none when all its matches
    are below the log start offset; stratalog goes on to the next segment.
    """
    for records in segments:
        if not records or max(r.timestamp for r in records) < target:
            continue
        for record in records:
            if record.offset >= start and record.timestamp >= target:
                return record.offset, record.timestamp
    return None


class LogStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="stratalog-props-"))
        self.dir = self.root / str(TP)
        self.dir.mkdir()
        self.clock = FixedClock(NOW)
        self.log: Log | None = None
        # The model: every record still in the log (also those below the start offset), by offset.
        self.records: dict[int, Record] = {}
        self.batches: list[ModelBatch] = []
        self.leo = 0
        self.start = 0

    # -- setup ------------------------------------------------------------------------------
    @initialize(
        segment_bytes=st.sampled_from([200, 2000]) | st.integers(200, 2000),
        index_interval_bytes=st.sampled_from([0, 1, 100]) | st.integers(0, 300),
        segment_index_bytes=st.sampled_from([64, 72]) | st.integers(64, 256),
        segment_ms=st.sampled_from([5_000, 15_000, WEEK_MS, WEEK_MS]),
    )
    def open_log(self, segment_bytes: int, index_interval_bytes: int, segment_index_bytes: int,
                 segment_ms: int) -> None:
        self.config = LogConfig.from_overrides({
            "segment.bytes": segment_bytes,
            "index.interval.bytes": index_interval_bytes,
            "segment.index.bytes": segment_index_bytes,
            "segment.ms": segment_ms,
        })
        self.log, _ = load_log(self.dir, TP, self.config, clock=self.clock)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- rules ------------------------------------------------------------------------------
    @rule(records=records_strategy, codec=st.sampled_from(list(Compression)))
    def append_a_batch(self, records: list[tuple[bytes | None, bytes | None, tuple[Header, ...], int]],
                       codec: Compression) -> None:
        assert self.log is not None
        produced = build_batch([Record(i, ts, key, value, headers) for i, (key, value, headers, ts)
                                in enumerate(records)], compression=codec)
        if len(produced) > self.config.segment_bytes:
            try:
                self.log.append(produced)
            except RecordBatchTooLargeError:
                return
            raise AssertionError(f"a batch of {len(produced)} bytes was accepted by a log whose "
                                 f"segment.bytes is {self.config.segment_bytes}")
        info = self.log.append(produced)
        assert (info.first_offset, info.last_offset) == (self.leo, self.leo + len(records) - 1)
        for i, (key, value, headers, ts) in enumerate(records):
            self.records[self.leo + i] = Record(self.leo + i, ts, key, value, headers)
        self.batches.append(ModelBatch(self.leo, self.leo + len(records) - 1))
        self.leo += len(records)

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        self.log.roll()

    @rule()
    def flush(self) -> None:
        assert self.log is not None
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.log is not None
        target = data.draw(st.integers(0, self.leo), label="truncate_to")
        removed = self.log.truncate_to(target)
        assert removed == (target < self.leo)
        if target >= self.leo:
            return
        # The whole batch holding the target goes (Kafka's LogSegment.truncateTo).
        holder = next(b for b in self.batches if b.base <= target <= b.last)
        self.batches = [b for b in self.batches if b.base < holder.base]
        self.records = {o: r for o, r in self.records.items() if o < holder.base}
        self.leo = holder.base
        # Offsets at and above the new log end are gone, so no watermark may stay above it.
        self.start = min(self.start, self.leo)

    @rule(data=st.data())
    def move_the_log_start_offset(self, data: st.DataObject) -> None:
        assert self.log is not None
        new_start = data.draw(st.integers(0, self.log.high_watermark), label="new_start")
        moved = self.log.maybe_increment_log_start_offset(new_start)
        assert moved == (new_start > self.start)
        self.start = max(self.start, new_start)

    @rule()
    def close_and_reopen_cleanly(self) -> None:
        assert self.log is not None
        start = self.log.log_start_offset
        self.log.close()
        self.log = None
        self.log, report = load_log(self.dir, TP, self.config, log_start_offset=start,
                                    had_clean_shutdown=True, clock=self.clock)
        assert report.truncated_bytes == 0
        assert self.log.recovery_point == self.leo

    @rule(data=st.data())
    def crash_and_reopen(self, data: st.DataObject) -> None:
        """A crash after the writes reached the files: no trim, no final time-index entry, then recovery.

        The recovery point is the log's own, or an older one (a checkpoint written before the crash).
        """
        assert self.log is not None
        start = self.log.log_start_offset
        recovery_point = data.draw(st.sampled_from([self.log.recovery_point, 0])
                                   | st.integers(0, self.log.recovery_point), label="recovery_point")
        for segment in self.log.segments:
            segment.log.close()
            segment.offset_index.close()
            segment.time_index.close()
        self.log = None
        self.log, report = load_log(self.dir, TP, self.config, log_start_offset=start,
                                    recovery_point=recovery_point, clock=self.clock)
        assert report.truncated_bytes == 0
        assert report.deleted_segments_after_corruption == []

    @precondition(lambda self: self.log is not None)
    @rule(data=st.data())
    def advance_the_clock(self, data: st.DataObject) -> None:
        self.clock.now += data.draw(st.integers(0, 10_000), label="ms")

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def offsets_and_watermarks_match_the_model(self) -> None:
        if self.log is None:
            return
        log = self.log
        assert log.log_end_offset == self.leo
        assert log.log_start_offset == self.start
        assert log.high_watermark == self.leo
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset, (
            "Kafka keeps logStartOffset <= high watermark <= log end offset"
        )
        assert log.recovery_point <= log.log_end_offset, "the recovery point never passes the log end offset"

    @invariant()
    def every_readable_record_equals_the_model(self) -> None:
        if self.log is None:
            return
        got = list(self.log.read_records(self.start))
        assert got == [self.records[o] for o in range(self.start, self.leo)]

    @invariant()
    def a_read_at_any_offset_returns_the_batch_holding_it(self) -> None:
        if self.log is None:
            return
        for offset in range(self.start, self.leo):
            data = self.log.read(offset, 1).data
            assert data, f"read({offset}) returned nothing"
            header = parse_header(data)
            assert header.base_offset <= offset <= header.last_offset, (
                f"read({offset}) returned the batch [{header.base_offset}, {header.last_offset}]"
            )

    @invariant()
    def timestamp_lookups_agree_with_kafka(self) -> None:
        if self.log is None:
            return
        bases = [s.base_offset for s in self.log.segments]
        segments = [[self.records[o] for o in range(base, end) if o in self.records]
                    for base, end in zip(bases, bases[1:] + [self.leo])]
        present = sorted({r.timestamp for r in self.records.values()})
        if len(present) > 10:  # a spread of them, ends included: each lookup decodes batches
            present = present[:: len(present) // 8 + 1] + present[-1:]
        targets = sorted({t + d for t in present for d in (0, 1)} | {TIMESTAMP_FLOOR - 1, TIMESTAMP_CEILING + 1})
        for target in targets:
            expected = _expected_offset_for_timestamp(segments, self.start, target)
            found = self.log.offset_for_timestamp(target)
            got = None if found is None else (found.offset, found.timestamp)
            assert got == expected, f"offset_for_timestamp({target}) with segments at {bases}"

    @invariant()
    def segments_are_ordered_bounded_and_named_like_kafka(self) -> None:
        if self.log is None:
            return
        segments = self.log.segments
        bases = [s.base_offset for s in segments]
        assert all(a < b for a, b in zip(bases, bases[1:])), f"segment bases {bases}"
        for segment in segments:
            assert segment.size <= self.config.segment_bytes
            assert segment.log.path.stat().st_size == segment.size
        live_logs = sorted(p.name for p in self.dir.iterdir() if p.name.endswith(".log"))
        assert all(SEGMENT_NAME.match(name) for name in live_logs)
        assert live_logs == [f"{b:020d}.log" for b in bases]
        # Every segment but the last holds offsets below the next base, and all batches are whole.
        for segment, next_base in zip(segments, bases[1:] + [None]):
            data = segment.log.read(0, segment.size)
            infos = list(iter_batch_infos(data))
            assert sum(i.size for i in infos) == segment.size
            if next_base is not None and infos:
                assert infos[-1].last_offset < next_base


LogStateMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=35,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_a_log_under_random_operations_matches_its_model = LogStateMachine.TestCase


# -- single runs the machine can reach, written out so that each names one rule ---------------

def _log(directory: Path, clock: FixedClock, overrides: dict[str, object] | None = None, **load: object) -> Log:
    directory.mkdir(exist_ok=True)
    log, _ = load_log(directory, TP, LogConfig.from_overrides(overrides or {}), clock=clock, **load)  # type: ignore[arg-type]
    return log


def _one_record_batch(timestamp: int, count: int = 1) -> bytes:
    return build_batch([Record(i, timestamp, b"k", b"v%d" % i) for i in range(count)])


def _crash(log: Log) -> None:
    """Drop the log as a killed process would: descriptors closed, nothing trimmed or finalized."""
    for segment in log.segments:
        segment.log.close()
        segment.offset_index.close()
        segment.time_index.close()


def test_truncating_inside_a_batch_leaves_no_offset_above_the_new_log_end(tmp_path):
    clock = FixedClock(NOW)
    log = _log(tmp_path / "props-0", clock)
    log.append(_one_record_batch(NOW, count=3))  # offsets 0..2 in one batch
    log.maybe_increment_log_start_offset(2)
    log.flush()
    log.truncate_to(1)  # offset 1 sits inside the batch, so the whole batch goes
    assert log.log_end_offset == 0
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    start = log.log_start_offset
    log.close()
    reopened = _log(tmp_path / "props-0", clock, log_start_offset=start, had_clean_shutdown=True)
    try:
        assert reopened.log_end_offset == 0, "a clean reopen must not move the log end offset"
        assert reopened.append(_one_record_batch(NOW)).first_offset == 0
    finally:
        reopened.close()


def test_a_truncated_segment_keeps_the_largest_timestamp_of_the_records_left_in_it(tmp_path):
    clock = FixedClock(NOW)
    log = _log(tmp_path / "props-0", clock)  # default index.interval.bytes: no index entry yet
    log.append(_one_record_batch(NOW - 10))
    log.append(_one_record_batch(NOW - 5))
    log.truncate_to(1)
    try:
        found = log.offset_for_timestamp(NOW - 10)
        assert found is not None and (found.offset, found.timestamp) == (0, NOW - 10)
        assert log.active_segment.max_timestamp_so_far == NOW - 10
    finally:
        log.close()
    reopened = _log(tmp_path / "props-0", clock, had_clean_shutdown=True)
    try:
        found = reopened.offset_for_timestamp(NOW - 10)
        assert found is not None and found.offset == 0
    finally:
        reopened.close()


def test_a_segment_written_across_clean_restarts_is_recovered_after_a_crash(tmp_path):
    # 64-byte indexes hold 8 offset entries; index.interval.bytes=0 indexes every batch but the
    # first after each open, so recovery (which never skips one) needs more entries than were written.
    overrides = {"segment.index.bytes": 64, "index.interval.bytes": 0}
    clock = FixedClock(NOW)
    directory = tmp_path / "props-0"
    log = _log(directory, clock, overrides)
    appended = 0
    while not log.active_segment.offset_index.is_full():
        log.append(_one_record_batch(NOW))
        appended += 1
        if appended % 2 == 0:
            log.close()
            log = _log(directory, clock, overrides, had_clean_shutdown=True)
    assert len(log.segments) == 1
    recovery_point = log.recovery_point
    _crash(log)
    recovered = _log(directory, clock, overrides, recovery_point=recovery_point)
    try:
        assert [r.offset for r in recovered.read_records(0)] == list(range(appended))
    finally:
        recovered.close()


def test_a_timestamp_lookup_goes_past_a_segment_whose_matches_are_all_below_the_log_start(tmp_path):
    # Kafka's UnifiedLog.fetchOffsetByTimestamp searches only the first segment whose largest
    # timestamp >= target and would answer none here; stratalog returns the first real match.
    clock = FixedClock(NOW)
    log = _log(tmp_path / "props-0", clock)
    log.append(_one_record_batch(NOW - 100, count=2))  # offsets 0, 1
    log.roll()
    log.append(_one_record_batch(NOW - 50))  # offset 2, in the second segment
    log.maybe_increment_log_start_offset(2)
    try:
        found = log.offset_for_timestamp(NOW - 100)
        assert found is not None and (found.offset, found.timestamp) == (2, NOW - 50)
    finally:
        log.close()
