"""Producer ``.snapshot`` files, as Kafka's ProducerStateManagerTest and LogLoaderTest check them: one at
every roll and at shutdown, holding each producer's last batch; gone with the segment they start,
with a truncation below them, and, on load, when they lie past the recovered end or are strays.

Kafka reading them (DumpLogSegments, and a broker that loads a stratalog directory) is checked in
test_kafka_dump_interop.py and test_kafka_broker_interop.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from stratalog.records import Record, build_batch
from stratalog.records.control import ControlRecordType, build_end_txn_marker_batch
from stratalog.storage.producer_snapshot import (
    CorruptSnapshotError,
    ProducerSnapshotEntry,
    decode_producer_snapshot,
    encode_producer_snapshot,
    read_producer_snapshot,
    snapshot_path,
    stale_snapshots,
)

T0 = 1_700_000_000_000


def idempotent(pid: int, first_seq: int, count: int, *, epoch: int = 0, ts: int = T0, size: int = 10,
               transactional: bool = False) -> bytes:
    return build_batch([Record(i, ts + i, None, b"x" * size) for i in range(count)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=first_seq, is_transactional=transactional)


def plain(count: int = 1, size: int = 10) -> bytes:
    return build_batch([Record(i, T0, None, b"p" * size) for i in range(count)])


def snapshots(directory: Path) -> dict[int, list[ProducerSnapshotEntry]]:
    return {int(p.name[:20]): read_producer_snapshot(p) for p in sorted(directory.glob("*.snapshot"))}


# -- the format -----------------------------------------------------------------------------------------

def test_a_snapshot_reads_back_as_written_and_its_layout_is_kafkas():
    entries = [ProducerSnapshotEntry(9, 2, 14, 120, 4, T0 + 5, -1, -1),
               ProducerSnapshotEntry(3, 0, -1, -1, 0, T0, 7, 130)]
    data = encode_producer_snapshot(entries)
    assert len(data) == 10 + 2 * 46
    version, count = struct.unpack_from(">h", data)[0], struct.unpack_from(">i", data, 6)[0]
    assert (version, count) == (1, 2)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (3, 0, -1, -1, 0, T0, 7, 130)   # by producer id
    assert decode_producer_snapshot(data) == sorted(entries, key=lambda e: e.producer_id)


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:8], "cannot hold the version"),
    (lambda d: d[:-1], "1 entries declared, room for 0"),
    (lambda d: b"\x00\x02" + d[2:], "unknown file version 2"),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "CRC is no longer valid"),
])
def test_a_damaged_snapshot_is_refused_with_kafkas_reason(damage, message):
    data = encode_producer_snapshot([ProducerSnapshotEntry(1, 0, 4, 4, 0, T0, -1, -1)])
    with pytest.raises(CorruptSnapshotError, match=message):
        decode_producer_snapshot(damage(data))


# -- when a log writes them ---------------------------------------------------------------------------------

def test_a_roll_writes_a_snapshot_named_by_the_new_segment_with_every_producers_last_batch(make_log):
    log = make_log(segment_bytes=400)
    log.append(idempotent(7, 0, 3, ts=T0 + 100))
    log.append(idempotent(7, 3, 2, ts=T0 + 200))      # 7's last batch: sequences 3-4 at offsets 3-4
    log.append(idempotent(8, 10, 1, epoch=4))
    while len(log.segments) == 1:
        log.append(plain(size=100))
    base = log.active_segment.base_offset
    assert list(snapshots(log.dir)) == [base]
    assert snapshots(log.dir)[base] == [
        ProducerSnapshotEntry(7, 0, 4, 4, 1, T0 + 201, -1, -1),
        ProducerSnapshotEntry(8, 4, 10, 5, 0, T0, -1, -1),
    ]


def test_a_clean_close_writes_one_at_the_log_end_and_a_reopened_log_keeps_it(make_log):
    log = make_log("t-0")
    log.append(idempotent(7, 0, 3))
    log.append(plain(2))
    log.close()
    assert list(snapshots(log.dir)) == [5]
    reopened = make_log("t-0", clean=True)
    assert reopened.log_end_offset == 5 and list(snapshots(log.dir)) == [5]
    reopened.append(idempotent(7, 3, 1))
    reopened.close()
    assert list(snapshots(log.dir)) == [5, 6]


def raw(offset: int, *, pid: int = -1, seq: int = -1, epoch: int = -1, transactional: bool = False,
        size: int = 10) -> bytes:
    """A batch that carries its offset, as a follower copies it (no scan of the producers is due)."""
    return build_batch([Record(offset, T0, None, b"r" * size)], base_offset=offset, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def test_a_log_whose_producers_were_never_scanned_writes_none(make_log):
    """The scan is not worth a stall at a roll or a slow shutdown: Kafka then starts from an older
    snapshot or from the log, as it does for a directory it never snapshotted."""
    log = make_log("t-0", segment_bytes=400)
    log.append_raw(raw(0, pid=5, seq=0, epoch=0, size=100))
    while len(log.segments) < 3:
        log.append_raw(raw(log.log_end_offset, size=100))
    log.close()
    assert snapshots(log.dir) == {}


def test_transaction_markers_and_open_transactions_are_in_the_snapshot(make_log):
    log = make_log("t-0")
    log.append_raw(raw(0, pid=7, seq=0, epoch=3, transactional=True))
    log.append_raw(raw(1, pid=8, seq=0, epoch=1, transactional=True))
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=3,
                                              coordinator_epoch=11, timestamp=T0 + 50, base_offset=2))
    log.transactions()                                   # the scan that finds the producers
    log.close()
    assert snapshots(log.dir)[3] == [
        ProducerSnapshotEntry(7, 3, 0, 0, 0, T0 + 50, 11, -1),     # committed: the marker's time and coordinator
        ProducerSnapshotEntry(8, 1, 0, 1, 0, T0, -1, 1),           # still open, from offset 1
    ]


# -- when they go ----------------------------------------------------------------------------------------

def rolled_log(make_log, name: str = "t-0"):
    log = make_log(name, segment_bytes=400)
    for n in range(12):
        log.append(idempotent(7, n, 1, size=100))
    assert len(log.segments) >= 4
    return log


def test_a_truncation_deletes_the_snapshots_past_the_new_log_end(make_log):
    log = rolled_log(make_log)
    bases = [s.base_offset for s in log.segments]
    assert list(snapshots(log.dir)) == bases[1:]
    log.truncate_to(bases[2])
    assert list(snapshots(log.dir)) == bases[1:3]       # the one at the new end still holds
    log.truncate_fully_and_start_at(100)
    assert snapshots(log.dir) == {}


def test_a_deleted_segment_takes_the_snapshot_at_its_base_with_it(make_log):
    log = rolled_log(make_log)
    bases = [s.base_offset for s in log.segments]
    log.remove_segments(log.segments[:2])
    assert list(snapshots(log.dir)) == bases[2:]


def test_loading_deletes_snapshots_past_the_recovered_end_and_strays_but_keeps_the_shutdown_one(make_log):
    log = rolled_log(make_log)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    log.close()                                          # a snapshot at the end, past the last base
    for offset in (bases[1] + 1, end + 5):                # a stray, and one past the end
        snapshot_path(log.dir, offset).write_bytes(encode_producer_snapshot([]))
    make_log("t-0", clean=True).close()
    assert list(snapshots(log.dir)) == bases[1:] + [end]


@pytest.mark.parametrize("offsets, bases, end, stale", [
    ([10, 20, 35], [0, 10, 20, 30], 35, []),             # the shutdown snapshot past the last base is kept
    ([10, 15, 20], [0, 10, 20], 25, [15]),               # a stray below the last base goes
    ([10, 22, 24], [0, 10, 20], 25, [22]),               # of two strays past it, the latest stays
    ([10, 20, 30], [0, 10, 20], 25, [30]),               # past the end
    ([], [0], 0, []),
])
def test_which_snapshots_a_loaded_log_does_not_keep(offsets, bases, end, stale):
    assert stale_snapshots(offsets, set(bases), end) == stale


def test_a_producer_known_only_by_a_marker_has_no_last_batch_and_must_start_its_epoch_at_0(make_log):
    from stratalog.common.errors import OutOfOrderSequenceError
    log = make_log("t-0")
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=4,
                                              coordinator_epoch=3, timestamp=T0))   # its data went with compaction
    log.transactions()
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        log.append(idempotent(7, 5, 1, epoch=4))
    log.append_raw(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=8, producer_epoch=0,
                                              coordinator_epoch=3, timestamp=T0, base_offset=1))
    log.append_raw(raw(2, pid=8, seq=0, epoch=1))                   # a new epoch keeps the coordinator's
    log.close()
    assert snapshots(log.dir)[3] == [
        ProducerSnapshotEntry(7, 4, -1, -1, 0, T0, 3, -1),
        ProducerSnapshotEntry(8, 1, 0, 2, 0, T0, 3, -1),
    ]
