"""A producer process for crash tests: appends forever, reporting what it has fsynced.

Each record's value is its own offset, so the parent can check that every
record it reads back sits at the offset it was written for. After each flush the
process prints ``flushed <offset>`` (everything below is on disk), and from time
to time it rewrites the checkpoint files, so a SIGKILL can land in any of them.
Usage: producer.py DATA_DIR [SEED]
"""

from __future__ import annotations

import random
import sys
import time

from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Record, build_batch
from stratalog.broker.topics import TopicAdmin


def main() -> None:
    data_dir, seed = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rng = random.Random(seed)
    manager = open_log_manager([data_dir])
    if "crash" not in manager.topics():
        TopicAdmin(manager).create_topic("crash", 1, {"segment.bytes": "4096", "index.interval.bytes": "512",
                                          "segment.index.bytes": "1024"})
    log = manager.get_log("crash", 0)
    print(f"ready {log.log_end_offset}", flush=True)
    codecs = list(Compression)
    appends = 0
    while True:
        count = rng.randint(1, 8)
        base = log.log_end_offset
        now = time.time_ns() // 1_000_000
        records = [Record(i, now, str(base + i).encode(), str(base + i).encode() * rng.randint(1, 20))
                   for i in range(count)]
        log.append(build_batch(records, compression=rng.choice(codecs)))
        appends += 1
        if appends % 5 == 0:
            log.flush()
            print(f"flushed {log.recovery_point}", flush=True)
        if appends % 17 == 0:
            manager.write_checkpoints()


if __name__ == "__main__":
    main()
