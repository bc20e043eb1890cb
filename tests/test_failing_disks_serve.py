"""``stratalog serve`` on a disk that fills up or turns read-only mid-run, as a user meets it.

A real server process over two data directories, one of them a real small file system. Produce
with ``acks=all`` until that disk fails; the answer must be Kafka's ``KAFKA_STORAGE_ERROR``, the
other directory must keep serving, the failure must show in ``/readyz``, ``/metrics`` and the
partition's stats, SIGTERM must end the process without a traceback, and after a restart with
room every acknowledged record must be there and ``stratalog verify`` clean.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli
from filesystems import Ext4, Tmpfs, ext4, small  # noqa: F401 - fixtures
from server_harness import Server, kafka_batch


def partitions_by_dir(server: Server, topic: str, partitions: int) -> dict[Path, int]:
    return {Path(server.stats(topic, p)["logDir"]): p for p in range(partitions)}


def produce_until_refused(server: Server, partition: int, acked: dict[int, bytes], limit: int = 2000):
    for i in range(limit):
        value = b"%05d" % i + b"x" * 8000
        reply = server.produce_raw("t", partition, kafka_batch([(b"k", value)]), acks="all")
        if reply.status_code != 200:
            return reply
        acked[reply.json()["baseOffset"]] = value
    raise AssertionError(f"the disk never filled in {limit} appends")


def produce_one(server: Server, partition: int, acked: dict[int, bytes], value: bytes):
    reply = server.produce_raw("t", partition, kafka_batch([(b"k", value)]), acks="all")
    if reply.status_code == 200:
        acked[reply.json()["baseOffset"]] = value
    return reply


def assert_storage_error(reply, directory: Path, errno_name: str) -> None:
    assert reply.status_code == 500, reply.text
    body = reply.json()
    assert body["error_code"] == "KAFKA_STORAGE_ERROR"
    assert str(directory.resolve()) in body["message"] and errno_name in body["message"], body["message"]


def assert_all_readable(server: Server, partition: int, acked: dict[int, bytes]) -> None:
    import base64
    found = {}
    for record in server.read_all("t", partition, 0):
        value = record.get("value")
        found[record["offset"]] = value.encode() if value is not None else base64.b64decode(record["value_b64"])
    missing = [o for o, v in acked.items() if found.get(o) != v]
    assert not missing, f"acknowledged records missing after the restart: {missing[:10]}"


def assert_the_other_directory_serves(server: Server, partition: int) -> None:
    acked: dict[int, bytes] = {}
    assert produce_one(server, partition, acked, b"the healthy directory").status_code == 200
    assert_all_readable(server, partition, acked)


def assert_clean_exit(server: Server, code: int, log_from: int) -> list[str]:
    log = server.log()[log_from:]
    assert "Traceback" not in log, log
    errors = [line for line in log.splitlines() if " ERROR " in line and "acknowledged records may be lost" in line]
    if code != 0:
        assert code == 1 and len(errors) >= 1, log
        assert all(re.search(r"E[A-Z]+: ", line) for line in errors), errors  # names the errno
    return errors


def test_serve_on_a_disk_that_fills_answers_kafka_storage_error_and_exits_cleanly(small, tmp_path):
    healthy = tmp_path / "healthy"
    server = Server([small.path, healthy], log_path=tmp_path / "serve.log").start()
    try:
        server.create_topic("t", 2)
        where = partitions_by_dir(server, "t", 2)
        failing, other = where[small.path.resolve()], where[healthy.resolve()]
        acked: dict[int, bytes] = {}
        reply = produce_until_refused(server, failing, acked)
        assert_storage_error(reply, small.path, "ENOSPC")
        assert len(acked) > 10
        # Offline until a restart: refused again, reads refused, the other directory serves.
        assert_storage_error(produce_one(server, failing, acked, b"again"), small.path, "ENOSPC")
        fetch = server.get(f"/v1/topics/t/partitions/{failing}/records", params={"offset": 0})
        assert_storage_error(fetch, small.path, "ENOSPC")
        assert_the_other_directory_serves(server, other)
        ready = server.get("/readyz")
        assert ready.status_code == 200 and str(small.path.resolve()) in ready.json()["offlineLogDirs"][0]
        assert "stratalog_offline_log_directory_count 1.0" in server.get("/metrics").text
        stats = server.stats("t", failing)
        assert stats["offline"] is True and "ENOSPC" in stats["storageError"]
        before = len(server.log())
        code = server.terminate()
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
    assert code == 0, server.log()  # tmpfs: every acknowledged (acks=all) record is in memory already
    assert_clean_exit(server, code, before)
    assert not list(small.path.rglob("*.tmp")) and not list(healthy.rglob("*.tmp"))

    # A start on the still-full disk recovers, or refuses with one line: never a traceback.
    again = Server([small.path, healthy], log_path=tmp_path / "serve-full.log")
    try:
        again.start(wait_ready=False)
        try:
            again.wait_ready()
            started = True
        except AssertionError:
            started = False
        if started:
            again.terminate()
        else:
            assert again.proc.wait(timeout=60) == 1
            lines = [line for line in again.log().splitlines() if "cannot start" in line]
            assert len(lines) == 1 and str(small.path.resolve()) in lines[0], again.log()
        assert "Traceback" not in again.log(), again.log()
    finally:
        if again.proc is not None and again.proc.poll() is None:
            again.kill()

    small.grow("64m")
    restarted = Server([small.path, healthy], log_path=tmp_path / "serve-room.log").start()
    try:
        assert_all_readable(restarted, failing, acked)
        assert restarted.get("/readyz").json() == {"status": "ready"}
    finally:
        assert restarted.terminate() == 0
    for directory in (small.path, healthy):
        result = run_cli("verify", "--data-dir", str(directory))
        assert result.returncode == 0, result.stdout + result.stderr


def test_serve_on_a_disk_remounted_read_only_mid_run_keeps_the_other_directory_serving(ext4, tmp_path):
    healthy = tmp_path / "healthy"
    server = Server([ext4.path, healthy], log_path=tmp_path / "serve.log").start()
    try:
        server.create_topic("t", 2)
        where = partitions_by_dir(server, "t", 2)
        failing, other = where[ext4.path.resolve()], where[healthy.resolve()]
        acked: dict[int, bytes] = {}
        for i in range(20):
            assert produce_one(server, failing, acked, b"before %d" % i).status_code == 200
        ext4.fail()
        reply = produce_one(server, failing, acked, b"after")
        assert_storage_error(reply, ext4.path, "EROFS")
        assert_the_other_directory_serves(server, other)
        assert "stratalog_offline_log_directory_count 1.0" in server.get("/metrics").text
        before = len(server.log())
        code = server.terminate()
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
    assert_clean_exit(server, code, before)
    ext4.repair_and_remount()
    restarted = Server([ext4.path, healthy], log_path=tmp_path / "serve-again.log").start()
    try:
        assert_all_readable(restarted, failing, acked)
    finally:
        assert restarted.terminate() == 0
    for directory in (ext4.path, healthy):
        result = run_cli("verify", "--data-dir", str(directory))
        assert result.returncode == 0, result.stdout + result.stderr


def test_serve_on_a_directory_it_may_not_write_says_who_owns_it_and_who_it_runs_as(tmp_path):
    """What a volume provisioner that ignores fsGroup leaves (Kubernetes' hostPath provisioner: root,
    0750): the engine, not root, refuses to start with one line naming the owner, the mode and itself."""
    import os
    import subprocess
    import tempfile

    from server_harness import STRATALOG

    parent = Path(tempfile.mkdtemp(prefix="stratalog-perm-", dir="/tmp"))   # outside root's 0700 pytest dir
    try:
        parent.chmod(0o755)
        data = parent / "data-0"
        data.mkdir(mode=0o750)
        os.chown(data, 0, 0)
        # The interpreter lives under /root here, which uid 10001 may not read: the child loads the
        # engine as root (with uvloop and the codec its address lookup loads late), then becomes uid
        # 10001 (the image's user) before ``stratalog serve`` runs.
        as_agent = ("import os, sys; import stratalog.cli, stratalog.cli.serve, stratalog.server.run; "
                    "import encodings.idna, uvloop; "
                    "os.setgroups([10001]); os.setgid(10001); os.setuid(10001); "
                    "sys.exit(stratalog.cli.main(sys.argv[1:]))")
        done = subprocess.run([sys.executable, "-c", as_agent, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                               str(data)], capture_output=True, text=True, timeout=120, cwd="/tmp")
        assert done.returncode != 0
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert "Traceback" not in done.stderr, done.stderr
        assert re.search(rf"data directory {data}: cannot take its lock: EACCES: Permission denied .*; it is owned "
                         r"by uid 0 gid 0 with mode drwxr-x---, and the engine runs as uid 10001 gid 10001 "
                         r"\(groups \[10001\]\); make it writable by this user, then start the engine again",
                         lines[-1]), done.stderr
        assert list(data.iterdir()) == []   # nothing half-written
    finally:
        import shutil

        shutil.rmtree(parent)
