"""Compaction: the latest value per key survives at its original offset, tombstones until their horizon."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.cleaner.offset_map import OffsetMap
from stratalog.storage.log_manager import LogManager
from stratalog.common.config import EngineConfig, LogConfig
from stratalog.records import (
    Compression,
    ControlRecordType,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    iter_batch_infos,
)
from stratalog.broker.topics import TopicAdmin
from stratalog.storage.cleaner.throttler import MIN_SLEEP_S, Throttler

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1500", "min.cleanable.dirty.ratio": "0.01",
           "index.interval.bytes": "100"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def open_manager(path: Path, clock: Clock, **engine: object) -> LogManager:
    config = EngineConfig.from_properties({k.replace("_", "."): v for k, v in engine.items()})
    return LogManager([path], config, clock=clock).open()


def on_disk(partition_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record in the partition's segments, parsed by kafka-python (an independent implementation)."""
    found = []
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        for info in iter_batch_infos(data):
            batch = DefaultRecordBatch(bytes(data[info.position : info.position + info.size]))
            assert batch.validate_crc(), f"{path} at {info.position}: CRC"
            if batch.is_control_batch:
                continue
            for record in batch:
                found.append((record.offset, record.key, record.value))
    return found


def write_workload(log, rng: random.Random, count: int, keys: int, model: dict, now: int,
                   tombstone_rate: float = 0.1) -> None:
    written = 0
    while written < count:
        n = rng.randint(1, 6)
        records = []
        for i in range(n):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < tombstone_rate else b"v%d-" % rng.randrange(10**6) * rng.randint(1, 8)
            records.append(Record(i, now + written + i, key, value))
        info = log.append(build_batch(records, compression=rng.choice(list(Compression))))
        for i, record in enumerate(records):
            model[record.key] = (info.first_offset + i, record.value)
        written += n


def expected_after_clean(model: dict, all_records: list, end_offset: int, *, tombstones: bool) -> list:
    latest = {key: offset for key, (offset, _) in model.items()}
    keep = []
    for offset, key, value in all_records:
        if offset >= end_offset:
            keep.append((offset, key, value))
        elif latest.get(key) == offset and (value is not None or tombstones):
            keep.append((offset, key, value))
    return keep


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compaction_keeps_exactly_the_latest_value_per_key_at_its_original_offset(tmp_path, seed):
    rng = random.Random(seed)
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    model: dict = {}
    write_workload(log, rng, 600, 40, model, clock.now)
    before = on_disk(log.dir)
    log.roll()  # everything becomes cleanable
    reports = LogCleaner(manager).run_pass()
    assert len(reports) == 1
    report = reports[0]
    assert report.end_offset == log.log_end_offset
    after = on_disk(log.dir)
    assert after == expected_after_clean(model, before, report.end_offset, tombstones=True)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    assert report.dirty_ratio_after < report.dirty_ratio_before
    assert report.stats.records_removed == len(before) - len(after)
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == f"0\n1\nc 0 {report.end_offset}\n"
    manager.close()


def test_tombstones_stay_until_the_delete_horizon_then_go(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, {**COMPACT, "delete.retention.ms": str(DAY)})
    log = manager.get_log("c", 0)
    log.append(build_batch([Record(0, clock.now, b"a", b"1"), Record(1, clock.now, b"b", b"2")]))
    log.append(build_batch([Record(0, clock.now, b"a", None)]))
    log.roll()
    cleaner = LogCleaner(manager)
    cleaner.run_pass()
    assert on_disk(log.dir) == [(1, b"b", b"2"), (2, b"a", None)]
    # New dirty data triggers another pass; before the horizon the tombstone survives it...
    clock.now += DAY - 1
    log.append(build_batch([Record(0, clock.now, b"c", b"3")]))
    log.roll()
    cleaner.run_pass(force=True)
    assert (2, b"a", None) in on_disk(log.dir)
    # ...and once the horizon has passed, the next pass removes it.
    clock.now += 2
    log.append(build_batch([Record(0, clock.now, b"d", b"4")]))
    log.roll()
    cleaner.run_pass(force=True)
    assert on_disk(log.dir) == [(1, b"b", b"2"), (3, b"c", b"3"), (4, b"d", b"4")]
    manager.close()


def test_a_full_offset_map_cleans_up_to_where_it_reached_and_the_next_pass_goes_on(tmp_path):
    rng = random.Random(7)
    clock = Clock()
    # Room for only a few dozen keys per pass.
    manager = open_manager(tmp_path, clock, log_cleaner_dedupe_buffer_size=6000)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    model: dict = {}
    write_workload(log, rng, 800, 200, model, clock.now, tombstone_rate=0.0)
    all_records = on_disk(log.dir)
    log.roll()
    cleaner = LogCleaner(manager)
    passes = 0
    while True:
        reports = cleaner.run_pass()
        if not reports:
            break
        passes += 1
        assert reports[0].end_offset <= log.log_end_offset
        assert passes < 50
    assert passes > 1
    latest = {key: offset for key, (offset, _) in model.items()}
    assert on_disk(log.dir) == [(o, k, v) for o, k, v in all_records if latest[k] == o]
    manager.close()


def test_keys_that_share_a_hash_never_lose_a_record(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    rng = random.Random(11)
    model: dict = {}
    write_workload(log, rng, 300, 30, model, clock.now, tombstone_rate=0.0)
    all_records = on_disk(log.dir)
    log.roll()
    # Every key hashes to one of two values: collisions everywhere.
    LogCleaner(manager, hash_function=lambda key: len(key) % 2).run_pass()
    latest = {key: offset for key, (offset, _) in model.items()}
    assert on_disk(log.dir) == [(o, k, v) for o, k, v in all_records if latest[k] == o]
    manager.close()


def test_two_keys_with_one_hash_each_keep_their_only_record(tmp_path):
    # Kafka's SkimpyOffsetMap keys by hash alone: b@1 would take a's slot, a@0 would be judged
    # superseded and a's only value dropped. Here the map compares the keys themselves.
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    log.append(build_batch([Record(0, clock.now, b"a", b"only a")]))
    log.append(build_batch([Record(0, clock.now, b"b", b"only b")]))
    log.roll()
    LogCleaner(manager, hash_function=lambda key: 0).run_pass(force=True)
    assert on_disk(log.dir) == [(0, b"a", b"only a"), (1, b"b", b"only b")]
    manager.close()


def test_the_offset_map_refuses_new_keys_past_its_memory_budget_but_updates_known_ones():
    offset_map = OffsetMap(1000, load_factor=0.5)
    accepted = 0
    while offset_map.try_put(b"key-%d" % accepted, accepted):
        accepted += 1
    assert 0 < accepted and offset_map.used_bytes <= 500
    assert offset_map.try_put(b"key-0", 99) and offset_map.get(b"key-0") == 99


def test_compact_delete_topics_also_apply_retention_after_cleaning(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, {**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": str(DAY)})
    log = manager.get_log("c", 0)
    # 1,400 bytes: too large to be grouped with the next segment, so it keeps its old timestamp.
    log.append(build_batch([Record(0, clock.now - 2 * DAY, b"old", b"x" * 1400)]))
    log.roll()
    log.append(build_batch([Record(0, clock.now, b"new", b"y"), Record(1, clock.now, b"new", b"z")]))
    log.roll()
    report = LogCleaner(manager).run_pass()[0]
    assert [d.base_offset for d in report.retention_deletions] == [0]
    assert on_disk(log.dir) == [(2, b"new", b"z")]
    manager.close()


def test_segments_younger_than_the_min_compaction_lag_are_not_cleaned(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, {**COMPACT, "min.compaction.lag.ms": str(DAY)})
    log = manager.get_log("c", 0)
    log.append(build_batch([Record(0, clock.now - 2 * DAY, b"k", b"1")]))
    log.roll()
    log.append(build_batch([Record(0, clock.now, b"k", b"2")]))
    log.roll()
    log.append(build_batch([Record(0, clock.now, b"k", b"3")]))
    LogCleaner(manager).run_pass(force=True)
    # Only the old segment was cleanable; the map saw k@0 alone, so nothing could be superseded.
    assert on_disk(log.dir) == [(0, b"k", b"1"), (1, b"k", b"2"), (2, b"k", b"3")]
    clock.now += 2 * DAY
    LogCleaner(manager).run_pass(force=True)
    assert on_disk(log.dir) == [(1, b"k", b"2"), (2, b"k", b"3")]
    manager.close()


def test_the_filthiest_log_is_cleaned_first(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    cleaner = LogCleaner(manager)
    for topic in ("mild", "filthy"):
        TopicAdmin(manager).create_topic(topic, 1, COMPACT)
        log = manager.get_log(topic, 0)
        for i in range(40):
            log.append(build_batch([Record(0, clock.now, b"k%d" % i, b"v" * 50)]))
        log.roll()
    cleaner.run_pass()
    # After a clean, new data makes a log dirty in proportion to its size.
    for topic, new_records in (("mild", 5), ("filthy", 30)):
        log = manager.get_log(topic, 0)
        for i in range(new_records):
            log.append(build_batch([Record(0, clock.now, b"k%d" % i, b"w" * 50)]))
        log.roll()
    ratios = cleaner.dirty_ratios()
    assert ratios[next(tp for tp in ratios if tp.topic == "filthy")] > ratios[next(tp for tp in ratios if tp.topic == "mild")]
    first = cleaner.clean_filthiest()
    assert first is not None and first.topic_partition.topic == "filthy"
    manager.close()


def test_the_cleaner_stops_at_an_open_transaction_whose_records_may_yet_abort(tmp_path):
    """Kafka cleans only below the last stable offset: had the open transaction's ``a`` hidden the committed
    one and then aborted, key ``a`` would be gone."""
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    log.append_raw(build_batch([Record(0, clock.now, b"a", b"committed")], base_offset=0))
    log.append_raw(build_batch([Record(1, clock.now, b"a", b"open")], base_offset=1, producer_id=9,
                               producer_epoch=0, base_sequence=0, is_transactional=True))
    for offset in range(2, 40):
        log.append_raw(build_batch([Record(offset, clock.now, b"b%d" % (offset % 3), b"x" * 100)],
                                   base_offset=offset))
    log.roll()
    LogCleaner(manager).run_pass(force=True)
    assert (0, b"a", b"committed") in on_disk(log.dir)
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=9, producer_epoch=0,
                                              coordinator_epoch=0, base_offset=log.log_end_offset,
                                              timestamp=clock.now))
    log.roll()
    LogCleaner(manager).run_pass(force=True)
    kept = on_disk(log.dir)
    assert (0, b"a", b"committed") in kept and not any(value == b"open" for _, _, value in kept), kept
    manager.close()


def test_a_bare_abort_marker_below_the_dirty_range_does_not_keep_its_producers_later_values(tmp_path):
    """An ABORT marker whose data was cleaned away, already clean: the producer's next, committed
    transaction still supersedes older values of its keys."""
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0,
                                              coordinator_epoch=0, base_offset=0, timestamp=clock.now))
    log.append_raw(build_batch([Record(1, clock.now, b"a", b"old")], base_offset=1))
    log.append_raw(build_batch([Record(2, clock.now, b"a", b"new")], base_offset=2, producer_id=7,
                               producer_epoch=0, base_sequence=0, is_transactional=True))
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                              coordinator_epoch=0, base_offset=3, timestamp=clock.now))
    for offset in range(4, 40):
        log.append_raw(build_batch([Record(offset, clock.now, b"f%d" % offset, b"x" * 100)], base_offset=offset))
    log.roll()
    cleaner = LogCleaner(manager)
    manager.checkpoints.set_cleaner_offset(log.topic_partition, 1)   # offset 0 (the marker) is clean already
    cleaner.run_pass(force=True)
    assert [v for _, k, v in on_disk(log.dir) if k == b"a"] == [b"new"]
    manager.close()


def test_aborted_transactions_are_removed_and_their_markers_go_after_the_horizon(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, {**COMPACT, "delete.retention.ms": "1000"})
    log = manager.get_log("c", 0)

    def append(batch_bytes: bytes) -> None:
        log.append_raw(batch_bytes)

    leo = log.log_end_offset
    append(build_batch([Record(leo, clock.now, b"a", b"committed")], base_offset=leo, producer_id=7,
                       producer_epoch=0, base_sequence=0, is_transactional=True))
    append(build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                      coordinator_epoch=0, base_offset=1, timestamp=clock.now))
    append(build_batch([Record(2, clock.now, b"b", b"aborted")], base_offset=2, producer_id=8,
                       producer_epoch=0, base_sequence=0, is_transactional=True))
    append(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=8, producer_epoch=0,
                                      coordinator_epoch=0, base_offset=3, timestamp=clock.now))
    append(build_batch([Record(4, clock.now, b"c", b"plain")], base_offset=4))
    log.roll()
    cleaner = LogCleaner(manager)

    def clean_with_new_data(key: bytes) -> None:
        log.append(build_batch([Record(0, clock.now, key, b"more")]))
        log.roll()
        cleaner.run_pass(force=True)

    def batch_bases() -> list[int]:
        return [info.base_offset for path in sorted(log.dir.glob("*.log"))
                for info in iter_batch_infos(path.read_bytes()) if info.base_offset in (1, 2, 3)]

    cleaner.run_pass(force=True)
    assert on_disk(log.dir) == [(0, b"a", b"committed"), (4, b"c", b"plain")]
    # The aborted batch lost its record but keeps its header: it is producer 8's last batch (Kafka's
    # RETAIN_EMPTY), and while it is there the abort marker is kept too.
    assert batch_bases() == [1, 2, 3]
    clock.now += 2 * DAY  # producer 8 expires: its empty batch goes...
    clean_with_new_data(b"d")
    assert batch_bases() == [1, 3]
    clean_with_new_data(b"e")  # ...then no data of the aborted transaction is left: the marker gets a horizon
    assert batch_bases() == [1, 3]
    clock.now += 2000
    clean_with_new_data(b"f")
    # Past the horizon the abort marker goes; the commit marker stays while its data (a@0) does, as in Kafka.
    assert batch_bases() == [1]
    manager.close()


class FakeTime:
    """The throttler's clock: it moves only when work is simulated or the throttler sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def test_the_throttle_stretches_a_burst_to_the_configured_rate_and_banks_no_idle_credit():
    time = FakeTime()
    throttler = Throttler(1_000_000, sleep=time.sleep, monotonic=time.monotonic)
    for _ in range(100):  # 1 MB in 10 kB reads of 1 ms each: ten times the cap
        time.now += 0.001
        throttler.maybe_throttle(10_000)
    assert 1.0 - MIN_SLEEP_S <= time.now <= 1.0 + MIN_SLEEP_S
    time.now += 5.0  # idle
    resumed = time.now
    for _ in range(100):
        time.now += 0.001
        throttler.maybe_throttle(10_000)
    assert 1.0 - MIN_SLEEP_S <= time.now - resumed <= 1.0 + MIN_SLEEP_S


def test_a_cleaning_pass_reports_every_byte_it_reads_and_writes_to_the_throttle(tmp_path):
    clock = Clock()
    cap = 3_000_000
    manager = open_manager(tmp_path, clock, log_cleaner_io_max_bytes_per_second=cap)
    TopicAdmin(manager).create_topic("c", 1, {**COMPACT, "segment.bytes": "1048576"})
    log = manager.get_log("c", 0)
    for i in range(3000):
        log.append(build_batch([Record(0, clock.now, b"k%d" % (i % 500), b"x" * 1000)]))
    log.roll()
    time = FakeTime()
    throttler = Throttler(cap, sleep=time.sleep, monotonic=time.monotonic)
    report = LogCleaner(manager, throttler=throttler).run_pass()[0]
    moved = report.stats.bytes_read + report.stats.bytes_written
    assert moved > 3_000_000
    # The pass's own work takes no time on this clock, so the throttle alone made it last moved / cap.
    assert moved / cap - MIN_SLEEP_S <= time.now <= moved / cap + MIN_SLEEP_S
    manager.close()


def test_an_active_producers_last_batch_keeps_its_header_when_compaction_empties_it(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    log.append(build_batch([Record(0, clock.now, b"k", b"old")], producer_id=5, producer_epoch=2, base_sequence=0))
    log.append(build_batch([Record(0, clock.now, b"k", b"new")]))
    log.append(build_batch([Record(0, clock.now, b"j", b"gone")], producer_id=6, producer_epoch=0,
                           base_sequence=0, max_timestamp=None))
    log.append(build_batch([Record(0, clock.now, b"j", b"kept")]))
    log.roll()
    clock.now += 1000
    LogCleaner(manager).run_pass(force=True)
    infos = [i for p in sorted(log.dir.glob("*.log")) for i in iter_batch_infos(p.read_bytes())]
    # Producer 5's and 6's batches lost their records but stay as empty headers (sequence kept).
    assert [(i.base_offset, i.records_count) for i in infos] == [(0, 0), (1, 1), (2, 0), (3, 1)]
    clock.now += 2 * DAY  # a day after their last write the producers have expired: headers go too
    log.append(build_batch([Record(0, clock.now, b"x", b"y")]))
    log.roll()
    LogCleaner(manager).run_pass(force=True)
    infos = [i for p in sorted(log.dir.glob("*.log")) for i in iter_batch_infos(p.read_bytes())]
    assert [(i.base_offset, i.records_count) for i in infos] == [(1, 1), (3, 1), (4, 1)]
    manager.close()


def test_a_producers_emptied_last_batch_goes_once_the_engines_producer_id_expiration_has_passed(tmp_path):
    """``producer.id.expiration.ms`` set on the engine, not Kafka's default day, decides when a
    producer's emptied last batch may go."""
    clock = Clock()
    manager = open_manager(tmp_path, clock, producer_id_expiration_ms=60000)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    log.append(build_batch([Record(0, clock.now, b"k", b"old")], producer_id=5, producer_epoch=2, base_sequence=0))
    log.append(build_batch([Record(0, clock.now, b"k", b"new")]))
    log.roll()
    clock.now += 1000
    LogCleaner(manager).run_pass(force=True)
    infos = [i for p in sorted(log.dir.glob("*.log")) for i in iter_batch_infos(p.read_bytes())]
    assert [(i.base_offset, i.records_count) for i in infos] == [(0, 0), (1, 1)]   # still active
    clock.now += 60_000                                    # a minute on, not a day: expired
    log.append(build_batch([Record(0, clock.now, b"x", b"y")]))
    log.roll()
    LogCleaner(manager).run_pass(force=True)
    infos = [i for p in sorted(log.dir.glob("*.log")) for i in iter_batch_infos(p.read_bytes())]
    assert [(i.base_offset, i.records_count) for i in infos] == [(1, 1), (2, 1)]
    manager.close()


def test_the_cleaners_swap_deletes_the_snapshots_of_the_segments_it_merged_but_the_first(tmp_path):
    """Kafka's replaceSegments deletes the producer snapshots of the segments it replaces, but not one
    at the cleaned segment's own base."""
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    for seq in range(24):                                   # one key over and over: little survives
        log.append(build_batch([Record(0, clock.now, b"k", b"v" * 200)], producer_id=5, producer_epoch=0,
                               base_sequence=seq))
    log.roll()
    before = [s.base_offset for s in log.segments]
    snapshots = sorted(int(p.name[:20]) for p in log.dir.glob("*.snapshot"))
    assert snapshots == before[1:] and len(before) > 4
    # Larger segments from now on: the cleaner groups several of the old ones into one.
    log.update_config(LogConfig.from_overrides({**COMPACT, "segment.bytes": "100000"}))
    clock.now += 1000
    LogCleaner(manager).run_pass(force=True)
    after = [s.base_offset for s in log.segments]
    assert len(after) < len(before)                        # segments were merged
    snapshots = sorted(int(p.name[:20]) for p in log.dir.glob("*.snapshot"))
    assert snapshots == [b for b in before[1:] if b in after]
    manager.close()


def test_the_cleaners_swap_makes_its_snapshot_deletions_durable(tmp_path, monkeypatch):
    """A snapshot of a merged-away segment must not come back after a power loss: the log directory is
    fsynced after the swap deleted snapshots. No power loss can be made here, so the real calls are
    recorded in order (a spy wrapping them, not a fake: both still run)."""
    import stratalog.storage.log_producers as log_producers

    calls: list[str] = []
    real_delete, real_fsync = log_producers.delete_producer_snapshots, log_producers.fsync_dir
    monkeypatch.setattr(log_producers, "delete_producer_snapshots",
                        lambda directory, offsets: (calls.append("delete"), real_delete(directory, offsets)))
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    TopicAdmin(manager).create_topic("c", 1, COMPACT)
    log = manager.get_log("c", 0)
    monkeypatch.setattr(log_producers, "fsync_dir",
                        lambda directory: (calls.append(f"fsync {directory == log.dir}"), real_fsync(directory)))
    for seq in range(24):
        log.append(build_batch([Record(0, clock.now, b"k", b"v" * 200)], producer_id=5, producer_epoch=0,
                               base_sequence=seq))
    log.roll()
    log.update_config(LogConfig.from_overrides({**COMPACT, "segment.bytes": "100000"}))
    clock.now += 1000
    calls.clear()
    LogCleaner(manager).run_pass(force=True)
    assert "delete" in calls
    last_delete = max(i for i, call in enumerate(calls) if call == "delete")
    assert "fsync True" in calls[last_delete + 1:], calls
    manager.close()
