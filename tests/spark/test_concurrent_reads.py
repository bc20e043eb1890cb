"""Direct reads stay correct while the engine appends, compacts and deletes segment files under them.

The reader takes no lock and the engine does not know it is there. Each read
of the compacted topic must return records in strictly increasing offsets,
each exactly the record written at that offset (checked against an
uncompacted mirror), and every key whose latest record is inside the range
read - the cleaner never removes a key's latest record.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from stratalog.records import decode_any
from stratalog_spark.store import data_loss_handler
from stratalog_spark.store.directory import DirStore

from .conftest import engine, reader

CHURN = Path(__file__).parent / "processes" / "churn.py"
SECONDS = 8


def read_all(store: DirStore) -> tuple[int, list[tuple[int, bytes | None, bytes | None]]]:
    bounds = store.offsets("cc", 0)
    rows = []
    for data in store.read_batches("cc", 0, bounds.log_start, bounds.end, data_loss_handler(True)):
        rows.extend((r.offset, r.key, r.value) for r in decode_any(data, 0)[1]
                    if bounds.log_start <= r.offset < bounds.end)
    return bounds.end, rows


def test_reads_while_the_engine_compacts_and_unlinks_segments_see_exactly_the_written_records(spark, tmp_path):
    data = tmp_path / "data"
    churn = subprocess.Popen([sys.executable, str(CHURN), str(data), str(SECONDS)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert churn.stdout is not None and churn.stdout.readline().strip() == "ready"
    store = DirStore([str(data)])
    reads = []
    spark_rows = None
    while churn.poll() is None:
        reads.append(read_all(store))
        if spark_rows is None and len(reads) > 5:
            frame = reader(spark, data, subscribe="cc").load()
            spark_rows = [(r["offset"], r["key"], r["value"]) for r in frame.collect()]
    out, err = churn.communicate(timeout=60)
    assert churn.returncode == 0 and out.startswith("done"), err
    with engine(data) as manager:
        mirror = {r.offset: (r.key, r.value) for r in manager.get_log("mirror", 0).read_records(0)}
        latest: dict[bytes | None, int] = {}
        for offset, (key, _) in sorted(mirror.items()):
            latest[key] = offset
    assert len(reads) >= 5 and spark_rows is not None, "the reads must overlap the churn"
    assert all(len([k for _, k, _ in rows if k.startswith(b"cold-")]) == 20 for _, rows in reads + [(0, spark_rows)])
    for end, rows in reads + [(max(o for o, _, _ in spark_rows) + 1, spark_rows)]:
        offsets = [offset for offset, _, _ in rows]
        assert offsets == sorted(set(offsets)), "offsets must strictly increase, each once"
        assert all(mirror[offset] == (key, value) for offset, key, value in rows), "a record that was never written"
        present = set(offsets)
        missing = [key for key, offset in latest.items() if offset < end and offset not in present]
        assert not missing, f"the latest record of {missing[:3]} was in range but not read"
    cleanings = int(out.split()[2])
    assert cleanings >= 5 and len(mirror) > 300, "the engine must have swapped segments under the reads"
