"""An engine that appends, compacts and deletes at full speed, for the concurrent-read tests.

Topic ``cc`` is compacted with tiny segments and ``file.delete.delay.ms=0``, so
the cleaner swaps segments in and unlinks the old ones all the time; topic
``mirror`` gets the very same batches and is never compacted, so the record at
any offset of ``cc`` can be checked against ``mirror``. Twenty "cold" keys are
written once, first: every read of the whole log must find them.
Usage: churn.py DATA_DIR SECONDS
"""

from __future__ import annotations

import random
import sys
import time

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Record, build_batch
from stratalog.broker.topics import TopicAdmin


def main() -> None:
    data_dir, seconds = sys.argv[1], float(sys.argv[2])
    rng = random.Random(4)
    manager = open_log_manager([data_dir])
    TopicAdmin(manager).create_topic("cc", 1, {"cleanup.policy": "compact", "segment.bytes": "1500",
                                   "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    TopicAdmin(manager).create_topic("mirror", 1, {"segment.bytes": "100000", "retention.ms": "-1"})
    cleaner = LogCleaner(manager)
    # Keys written once: always their key's latest, so every read of the whole log must return them.
    cold = build_batch([Record(i, time.time_ns() // 1_000_000, b"cold-%d" % i, b"once") for i in range(20)])
    manager.get_log("cc", 0).append(cold)
    manager.get_log("mirror", 0).append(cold)
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    appends = passes = 0
    while time.monotonic() < deadline:
        now = time.time_ns() // 1_000_000
        records = [Record(i, now, b"key-%d" % rng.randrange(30), b"value-%d-%d" % (appends, i))
                   for i in range(rng.randint(1, 5))]
        batch = build_batch(records, compression=rng.choice(list(Compression)))
        manager.get_log("cc", 0).append(batch)
        manager.get_log("mirror", 0).append(batch)
        appends += 1
        if appends % 15 == 0:
            passes += len(cleaner.run_pass(force=True, topic="cc"))
            manager.delete_expired_segment_files()
    print(f"done {appends} {passes}", flush=True)
    manager.close()


if __name__ == "__main__":
    main()
