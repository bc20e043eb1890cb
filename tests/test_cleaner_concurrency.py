"""Cleaning runs while the same partition is appended to and read from, and nobody notices."""

from __future__ import annotations

import threading

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Record, build_batch
from stratalog.broker.topics import TopicAdmin


def test_appends_and_reads_go_on_correctly_during_cleaner_passes(tmp_path):
    manager = open_log_manager([tmp_path])
    TopicAdmin(manager).create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "3000",
                                  "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    log = manager.get_log("c", 0)
    acked: dict[int, tuple[bytes, bytes]] = {}
    stop = threading.Event()
    errors: list[BaseException] = []

    def producer() -> None:
        for i in range(3000):
            key, value = b"k%d" % (i % 50), b"value-%d" % i
            info = log.append(build_batch([Record(0, 1_700_000_000_000 + i, key, value)]))
            acked[info.first_offset] = (key, value)

    def reader() -> None:
        try:
            while not stop.is_set():
                previous = -1
                for record in log.read_records(log.log_start_offset):
                    assert record.offset > previous
                    previous = record.offset
                    assert acked.get(record.offset, (record.key, record.value)) == (record.key, record.value)
        except BaseException as error:  # surfaced below: a reader must never fail
            errors.append(error)

    writer, tailer = threading.Thread(target=producer), threading.Thread(target=reader)
    writer.start()
    tailer.start()
    cleaner = LogCleaner(manager)
    passes = 0
    while writer.is_alive():
        passes += len(cleaner.run_pass())
        log.delete_expired_files()
    writer.join()
    stop.set()
    tailer.join()
    assert passes >= 2, "the cleaner must have run while records were being appended"
    assert errors == []
    # Everything still in the log is what was acknowledged at that offset, and each key's latest value is there.
    found = {r.offset: (r.key, r.value) for r in log.read_records(0)}
    assert all(acked[offset] == kv for offset, kv in found.items())
    latest: dict[bytes, int] = {}
    for offset, (key, _) in sorted(acked.items()):
        latest[key] = offset
    assert set(latest.values()) <= set(found)
    assert len(found) < len(acked)
    manager.close()
