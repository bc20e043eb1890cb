"""A follower's files, as Apache Kafka reads them.

A follower appends the leader's batches as they are, leader epochs included, and keeps its own
leader-epoch cache. Kafka's DumpLogSegments must read its segment with every batch's epoch as the
leader wrote it, and Kafka's own ``LeaderEpochCheckpointFile`` must read its checkpoint.
"""

from __future__ import annotations

import re
from pathlib import Path

from kafka_tools import KafkaToolchain, kafka_toolchain  # noqa: F401 - the fixture
from partition_cluster import TP, Cluster

READ_EPOCHS = """
import java.io.File;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

public class ReadEpochs {
    public static void main(String[] args) throws Exception {
        LeaderEpochCheckpointFile file = new LeaderEpochCheckpointFile(new File(args[0]), new LogDirFailureChannel(1));
        for (EpochEntry entry : file.read()) System.out.println(entry.epoch() + " " + entry.startOffset());
    }
}
"""


def test_kafka_reads_a_followers_segments_and_leader_epoch_checkpoint(kafka_toolchain: KafkaToolchain,  # noqa: F811
                                                                    tmp_path: Path, clock) -> None:
    c = Cluster(tmp_path, clock, min_insync_replicas=1)
    c.produce(0, b"epoch 0: a", b"epoch 0: b", acks=1)
    c.fetch(1, 0)
    c.controller.elect(TP, 1)
    c.produce(1, b"epoch 1: c", acks=1)
    c.fetch(0, 1)                      # 0 follows 1 in epoch 1 before it leads again
    c.fetch(0, 1)
    c.controller.elect(TP, 0)
    c.produce(0, b"epoch 2: d", b"epoch 2: e", acks=1)
    for _ in range(3):
        c.fetch(1, 0)
    follower = c.log(1)
    assert follower.log_end_offset == 5
    assert follower.epoch_cache.entries == [(0, 0), (1, 2), (2, 3)]
    follower.flush()

    [segment] = sorted(follower.dir.glob("*.log"))
    dump = kafka_toolchain.dump_log_segments([segment], "--deep-iteration", "--print-data-log")
    assert dump.returncode == 0, dump.describe()
    batches = re.findall(r"baseOffset: (\d+) lastOffset: (\d+).*?partitionLeaderEpoch: (\d+)", dump.stdout)
    assert [(int(b), int(e)) for b, _, e in batches] == [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2)], dump.describe()
    payloads = re.findall(r"payload: (.*)", dump.stdout)
    assert payloads == ["epoch 0: a", "epoch 0: b", "epoch 1: c", "epoch 2: d", "epoch 2: e"], dump.describe()

    source = tmp_path / "ReadEpochs.java"
    source.write_text(READ_EPOCHS)
    read = kafka_toolchain.java(str(source), [str(follower.dir / "leader-epoch-checkpoint")])
    assert read.returncode == 0, read.describe()
    assert read.stdout.split("\n")[:3] == ["0 0", "1 2", "2 3"], read.describe()
