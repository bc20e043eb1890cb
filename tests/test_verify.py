"""``stratalog verify`` finds corruption in data directories and repairs nothing.

Directories are written through the engine (several rolled segments, an index
entry per append) and then damaged the way disks and crashes damage them; each
test checks that the report names the file and the byte position or index entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from stratalog.cli import main
from stratalog.storage.log_manager import open_log_manager
from stratalog.records import Compression, Record, build_batch
from stratalog.broker.topics import TopicAdmin

T0 = 1_700_000_000_000
CLI = [sys.executable, "-c", "import sys; from stratalog.cli import main; sys.exit(main())"]


def verify(capsys: pytest.CaptureFixture[str], *dirs: Path, as_json: bool = False) -> tuple[int, str, str]:
    args = ["verify"] + [a for d in dirs for a in ("--data-dir", str(d))] + (["--json"] if as_json else [])
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Topic t, 2 partitions, segments of ~300 bytes, an index entry after every append."""
    directory = tmp_path / "data"
    with open_log_manager([directory]) as manager:
        TopicAdmin(manager).create_topic("t", 2, {"segment.bytes": "300", "index.interval.bytes": "1"})
        for i in range(24):
            codec = list(Compression)[i % 5]
            batch = build_batch([Record(j, T0 + (i * 7) % 11 * 100 + j, b"k%d" % j, b"v" * (i % 4 + 1))
                                 for j in range(i % 3 + 1)], compression=codec)
            manager.get_log("t", i % 2).append(batch)
    return directory


def segments(partition: Path, suffix: str = ".log") -> list[Path]:
    return sorted(partition.glob(f"*{suffix}"))


def batch_positions(log: Path) -> list[tuple[int, int]]:
    """(position, size) of every whole batch, from the size fields."""
    data = log.read_bytes()
    found, position = [], 0
    while position + 12 <= len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        found.append((position, size))
        position += size
    return found


def tree(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != ".lock"}


def test_a_clean_directory_verifies_with_exit_0_and_one_summary_line_per_partition(data_dir, capsys):
    code, out, err = verify(capsys, data_dir)
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert len(segments(data_dir / "t-0")) >= 3
    assert lines[0].startswith(f"t-0 ({data_dir / 't-0'}): {len(segments(data_dir / 't-0'))} segments, 12 batches, ")
    assert lines[0].endswith(": OK") and lines[1].startswith("t-1 (") and lines[1].endswith(": OK")
    assert lines[-1] == "verified 2 partitions in 1 data directory: clean (OK)"


def test_the_json_report_counts_segments_batches_records_and_offsets(data_dir, capsys):
    code, out, _ = verify(capsys, data_dir, as_json=True)
    report = json.loads(out)
    assert code == 0 and report["clean"] is True and report["errors"] == 0
    [directory] = report["dataDirs"]
    partition = directory["partitions"][0]
    records = sum(i % 3 + 1 for i in range(0, 24, 2))
    assert (partition["topic"], partition["partition"], partition["batches"]) == ("t", 0, 12)
    assert (partition["records"], partition["firstOffset"], partition["lastOffset"]) == (records, 0, records - 1)


def test_a_flipped_byte_is_reported_with_its_file_and_the_position_of_its_batch(data_dir, capsys):
    log = segments(data_dir / "t-0")[1]
    position, size = batch_positions(log)[1]
    data = bytearray(log.read_bytes())
    data[position + size - 3] ^= 0x40  # in the records: only the CRC can tell
    log.write_bytes(bytes(data))
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert f"ERROR {log}: byte {position}: " in out and "Record is corrupt (stored crc = " in out
    assert out.splitlines()[-1].startswith("verified 2 partitions in 1 data directory: CORRUPT (1 error")
    code, out, _ = verify(capsys, data_dir, as_json=True)
    [finding] = [f for p in json.loads(out)["dataDirs"][0]["partitions"] for f in p["findings"]]
    assert (finding["severity"], finding["file"], finding["position"]) == ("error", str(log), position)


def test_a_garbage_index_is_reported(data_dir, capsys):
    index = segments(data_dir / "t-1", ".index")[0]
    index.write_bytes(os.urandom(8 * 5 + 3))
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert f"ERROR {index}: byte 40: length 43 is not a multiple of the entry size 8" in out
    assert f"ERROR {index}: entry 0 (byte 0): " in out


def test_an_index_entry_pointing_inside_a_batch_is_reported_with_its_entry_number(data_dir, capsys):
    index = segments(data_dir / "t-0", ".index")[0]
    data = bytearray(index.read_bytes())
    offset, position = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, offset, position + 5)
    index.write_bytes(bytes(data))
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert (f"ERROR {index}: entry 1 (byte 8): offset {offset} -> position {position + 5}, which is inside the batch "
            f"at position {position} ") in out


def test_a_time_index_timestamp_that_is_not_the_running_max_is_reported(data_dir, capsys):
    time_index = segments(data_dir / "t-0", ".timeindex")[0]
    data = bytearray(time_index.read_bytes())
    timestamp, relative = struct.unpack_from(">qi", data, 0)
    struct.pack_into(">q", data, 0, timestamp - 1)
    time_index.write_bytes(bytes(data))
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert (f"ERROR {time_index}: entry 0 (byte 0): timestamp {timestamp - 1} for offset {relative}, but the largest "
            f"batch timestamp up to that batch is {timestamp}") in out


def test_a_torn_tail_is_reported_and_left_in_place(data_dir, capsys):
    log = segments(data_dir / "t-1")[-1]
    tail = build_batch([Record(0, T0, b"k", b"half a batch")])[:30]
    with open(log, "ab") as file:
        file.write(tail)
    before = tree(data_dir)
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert f"ERROR {log}: byte {log.stat().st_size - 30}: torn tail: the last 30 bytes are not a whole batch" in out
    assert tree(data_dir) == before  # recovery would have truncated it; verify must not


def test_offsets_going_backwards_across_segments_are_reported(data_dir, capsys):
    second = segments(data_dir / "t-0")[1]
    data = bytearray(second.read_bytes())
    data[0:8] = (0).to_bytes(8, "big")  # baseOffset is outside the CRC: only the offsets are wrong
    second.write_bytes(bytes(data))
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    previous_last = int(second.name.split(".")[0]) - 1
    assert f"ERROR {second}: byte 0: batch of offset" in out
    assert f"offsets go backwards: it starts at 0, not after the previous batch's last offset {previous_last}" in out


def test_leftover_deleted_and_swap_files_are_warnings_that_keep_exit_0(data_dir, capsys):
    partition = data_dir / "t-0"
    (partition / "00000000000000000099.log.deleted").write_bytes(b"")
    (partition / "00000000000000000099.index.deleted").write_bytes(b"")
    (partition / "00000000000000000100.log.swap").write_bytes(b"")
    code, out, _ = verify(capsys, data_dir)
    assert code == 0
    assert (f"WARNING {partition}/00000000000000000099.*.deleted: leftover .index/.log .deleted files: scheduled "
            "for deletion") in out
    assert f"WARNING {partition}/00000000000000000100.*.swap: leftover .log .swap files" in out
    assert out.splitlines()[-1] == "verified 2 partitions in 1 data directory: clean (0 errors, 2 warnings)"


def test_a_checkpoint_that_does_not_parse_is_an_error(data_dir, capsys):
    checkpoint = data_dir / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n3\nt 0 5\n")
    code, out, _ = verify(capsys, data_dir)
    assert code == 1
    assert f"ERROR {checkpoint}: does not parse: {checkpoint}: line 2 declares 3 entries but 1 follow" in out


def test_the_untrimmed_indexes_of_a_crash_are_not_corruption(tmp_path, capsys):
    directory = tmp_path / "data"
    script = (f"import os\nfrom stratalog.broker.topics import TopicAdmin\n"
              f"from stratalog.storage.log_manager import open_log_manager\nfrom stratalog.records import "
              f"Record, build_batch\nm = open_log_manager([{str(directory)!r}])\n"
              f"TopicAdmin(m).create_topic('t', 1, {{'index.interval.bytes': '1'}})\nTopicAdmin(m).create_topic('idle', 1)\n"
              f"for i in range(5):\n    m.get_log('t', 0).append(build_batch([Record(0, {T0} + i, b'k', b'v')]))\n"
              f"os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert (directory / "t-0" / "00000000000000000000.index").stat().st_size > 8 * 4  # still preallocated
    code, out, _ = verify(capsys, directory)
    assert code == 0, out


def test_a_directory_locked_by_another_process_is_refused_with_the_lock_error(data_dir):
    manager = open_log_manager([data_dir])
    try:
        result = subprocess.run([*CLI, "verify", "--data-dir", str(data_dir)], capture_output=True, text=True,
                                timeout=120)
    finally:
        manager.close()
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: KAFKA_STORAGE_ERROR: data directory {data_dir} is in use: "
                                    f"process {os.getpid()} holds")


def test_a_missing_directory_is_a_usage_error(tmp_path, capsys):
    code, out, err = verify(capsys, tmp_path / "nowhere")
    assert (code, out) == (2, "")
    assert err == f"stratalog verify: error: data directory {tmp_path / 'nowhere'} does not exist\n"


def test_verify_runs_as_a_console_command_and_leaves_the_directory_unchanged(data_dir):
    before = tree(data_dir)
    result = subprocess.run([*CLI, "verify", "--data-dir", str(data_dir), "--json"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["clean"] is True
    assert tree(data_dir) == before
