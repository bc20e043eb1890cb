"""The appending process of the unclean-shutdown benchmark; its parent kills it with SIGKILL.

``python -m bench.append_child DATA_DIR SIZE_BYTES [SEED]``: opens a log manager on
DATA_DIR, creates the one-partition topic, checkpoints the recovery point (0, the
start of the empty log), appends SIZE_BYTES of batches through ``Log.append`` with
no fsync, prints one JSON line with the timing, then waits for its SIGKILL. Nothing
flushes or checkpoints after the appends, so after the kill the recovery point on
disk is still 0 and the loader must CRC-scan every byte.
"""

from __future__ import annotations

import json
import signal
import sys

from stratalog.storage.log_manager import open_log_manager
from stratalog.broker.topics import TopicAdmin

from .workload import TOPIC, append_batches, batches_for, build_pool


def main() -> None:
    data_dir, size_bytes = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    manager = open_log_manager([data_dir])
    TopicAdmin(manager).create_topic(TOPIC, 1)
    manager.write_checkpoints()  # recovery-point-offset-checkpoint: bench 0 0
    log = manager.get_log(TOPIC, 0)
    pool = build_pool(seed)
    result = append_batches(log, pool, batches_for(size_bytes, len(pool[0])))
    print(json.dumps({
        **result.timed.as_dict(),
        "batches": result.batches,
        "records": result.records,
        "bytes": result.bytes,
        "batch_bytes": len(pool[0]),
        "log_end_offset": log.log_end_offset,
        "segments": len(log.segments),
        "recovery_point_in_memory": log.recovery_point,
    }), flush=True)
    while True:
        signal.pause()  # until the parent's SIGKILL


if __name__ == "__main__":
    main()
