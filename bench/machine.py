"""This machine's own ceilings, against which the storage figures are read.

* Page-cache write and read bandwidth, measured with ``dd`` in a directory on the
  same filesystem as the benchmark data: ``dd if=/dev/zero of=FILE bs=1M`` with
  no ``conv=fdatasync`` (the log's appends do not fsync either, so both measure
  copies into the page cache), then ``dd if=FILE of=/dev/null bs=1M`` of the file
  just written, which is still in the page cache. The figure is parsed from dd's
  own summary line (bytes and seconds; MiB/s = bytes / 2**20 / seconds).
* A filesystem floor for opening a log: list the partition directory and
  open + fstat + close every ``.log`` file, which any loader has to do at least.
* A description of the machine (CPU, cores, memory, kernel, filesystem, Python,
  dirty-page thresholds, open-file limit) printed with every run.

``python -m bench.machine [--dir D] [--size-mb N]`` prints these alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from stratalog.records import native

MIB = 1 << 20

# "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.43 s, 2.5 GB/s" (GNU coreutils, LC_ALL=C)
_DD_SUMMARY = re.compile(r"^(\d+) bytes .*copied, ([0-9.eE+-]+) s", re.MULTILINE)


@dataclass(frozen=True)
class DdRun:
    command: str
    bytes: int
    seconds: float

    @property
    def mib_s(self) -> float:
        return self.bytes / MIB / self.seconds


def _run_dd(args: list[str]) -> DdRun:
    env = dict(os.environ, LC_ALL="C")
    done = subprocess.run(["dd", *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dd {' '.join(args)} failed: {done.stderr.strip()}")
    match = _DD_SUMMARY.search(done.stderr)
    if match is None:
        raise RuntimeError(f"cannot parse dd's summary from: {done.stderr!r}")
    return DdRun("dd " + " ".join(args), int(match.group(1)), float(match.group(2)))


def dd_write(path: Path, size_mib: int, block: str = "1M") -> DdRun:
    """Write ``size_mib`` MiB of zeros into a fresh file, page cache only (no fdatasync)."""
    path.unlink(missing_ok=True)
    block_bytes = _block_bytes(block)
    count = max(1, size_mib * MIB // block_bytes)
    return _run_dd(["if=/dev/zero", f"of={path}", f"bs={block}", f"count={count}"])


def dd_overwrite(path: Path, size_mib: int) -> DdRun:
    """Rewrite ``path`` in place (conv=notrunc): its pages are resident, so this is a pure copy."""
    count = max(1, size_mib * MIB // _block_bytes("1M"))
    return _run_dd(["if=/dev/zero", f"of={path}", "bs=1M", f"count={count}", "conv=notrunc"])


def dd_read(path: Path, block: str = "1M") -> DdRun:
    """Read ``path`` (just written, so in the page cache) to /dev/null."""
    return _run_dd([f"if={path}", "of=/dev/null", f"bs={block}"])


def _block_bytes(block: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    match = re.fullmatch(r"(\d+)([KMG]?)", block.upper())
    if match is None:
        raise ValueError(f"block size {block!r}: use e.g. 16K or 1M")
    return int(match.group(1)) * units[match.group(2)]


def pwrite_batches(path: Path, size_mib: int, batches: list[bytes]) -> float:
    """MiB/s of ``os.pwrite`` of ``batches`` in turn, back to back into a fresh file, until ``size_mib``:
    the system calls an append of these batches makes and nothing else. Their sizes are not multiples
    of the page size, so most writes start and end inside a page, as a log's do (dd's bs=16K writes
    never do, and run much faster here)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        limit, position, count = size_mib * MIB, 0, len(batches)
        start = time.perf_counter()
        i = 0
        while position < limit:
            position += os.pwrite(fd, batches[i % count], position)
            i += 1
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return position / MIB / seconds


PAGE_REPORTING = Path("/sys/module/page_reporting")


def settle(seconds: float) -> None:
    """Let the guest's free page reporting hand recently freed pages back to the host.

    On a VM whose balloon driver reports free pages (virtio-balloon "free page
    reporting", found here), a page freed less than ~2 s ago is still backed by the
    host and costs nothing to reuse, while any other free page faults on the host
    when first written: writing 1 GiB of new page cache runs at ~3 GB/s in the first
    case and ~0.2 GB/s in the second. Appends fill new pages, so every write
    measurement (dd's and the log's) starts after this wait, in the second regime.
    """
    if seconds > 0:
        time.sleep(seconds)


def default_settle_seconds() -> float:
    return 5.0 if PAGE_REPORTING.exists() else 0.0


@dataclass(frozen=True)
class Ceilings:
    """Medians of ``repeats`` dd runs of ``size_mib`` MiB each, in MiB/s."""

    size_mib: int
    repeats: int
    settle_seconds: float
    write_mib_s: float  # fresh file, pages newly allocated: what an append does
    read_mib_s: float  # the file just written, from the page cache
    overwrite_mib_s: float  # conv=notrunc over the resident file: copy only (informative)
    write_16k_mib_s: float  # fresh file, bs=16K: one write per batch, like the append path (informative)
    write_runs: list[float]
    read_runs: list[float]
    overwrite_runs: list[float]
    directory: str
    write_batches_mib_s: float | None = None  # pwrite of the append workload's own batches, one each (informative)


def page_cache_ceilings(directory: Path, size_mib: int, repeats: int = 3,
                        settle_seconds: float | None = None, batches: list[bytes] | None = None) -> Ceilings:
    """dd write of a fresh file, read-back and overwrite of it, ``repeats`` times, in ``directory``;
    with ``batches``, also the bare ``pwrite`` of them (``pwrite_batches``)."""
    settle_s = default_settle_seconds() if settle_seconds is None else settle_seconds
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "dd-ceiling.bin"
    writes, reads, overwrites = [], [], []
    try:
        for _ in range(repeats):
            path.unlink(missing_ok=True)
            settle(settle_s)
            writes.append(dd_write(path, size_mib).mib_s)
            reads.append(dd_read(path).mib_s)
            overwrites.append(dd_overwrite(path, size_mib).mib_s)
        path.unlink(missing_ok=True)
        settle(settle_s)
        write_16k = dd_write(path, size_mib, block="16K").mib_s
        write_batches = None
        if batches:
            path.unlink(missing_ok=True)   # before the wait, as for dd: pages freed just now are cheap to refill
            settle(settle_s)
            write_batches = pwrite_batches(path, size_mib, batches)
    finally:
        path.unlink(missing_ok=True)
    return Ceilings(size_mib, repeats, settle_s, statistics.median(writes), statistics.median(reads),
                    statistics.median(overwrites), write_16k, writes, reads, overwrites, str(directory),
                    write_batches)


def open_floor_seconds(partition_dir: Path) -> float:
    """List ``partition_dir`` and open + fstat + close each ``.log``: the least any loader does."""
    start = time.perf_counter()
    with os.scandir(partition_dir) as entries:
        logs = [entry.path for entry in entries if entry.name.endswith(".log")]
    for path in logs:
        fd = os.open(path, os.O_RDONLY)
        os.fstat(fd)
        os.close(fd)
    return time.perf_counter() - start


# -- description ----------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / (1 << 30)
    except OSError:
        pass
    return None


def _filesystem(directory: Path) -> str:
    if shutil.which("findmnt"):
        done = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE,TARGET,OPTIONS", "-T", str(directory)],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return " ".join(done.stdout.split())
    return "unknown"


def _sysctl(name: str) -> str:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return "?"


def load_average() -> str:
    """The 1/5/15-minute load averages: other work on the machine skews every figure."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def describe(directory: Path) -> dict[str, object]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    mem = _mem_total_gib()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1) if mem is not None else None,
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "record_kernel": native.name(),   # children inherit STRATALOG_KERNEL, so they run this one too
        "filesystem": _filesystem(directory),
        "directory": str(directory),
        "vm.dirty_background_ratio": _sysctl("vm.dirty_background_ratio"),
        "vm.dirty_ratio": _sysctl("vm.dirty_ratio"),
        "nofile_limit": f"{soft}/{hard}",
        "loadavg_at_start": load_average(),
    }


def format_description(info: dict[str, object], ceilings: Ceilings | None = None) -> str:
    lines = [
        f"machine:     {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, kernel {info['kernel']}, "
        f"Python {info['python']}",
        f"records:     stratalog's {info.get('record_kernel', 'python')} record kernel (STRATALOG_KERNEL)",
        f"filesystem:  {info['filesystem']}",
        f"data dir:    {info['directory']}",
        f"page cache:  vm.dirty_background_ratio={info['vm.dirty_background_ratio']} "
        f"vm.dirty_ratio={info['vm.dirty_ratio']}; open files {info['nofile_limit']}",
        f"load:        {info['loadavg_at_start']} (1/5/15 min load average at start, on {info['cores']} cores)",
    ]
    if ceilings is not None:
        def runs(values: list[float]) -> str:
            return ", ".join(f"{x:.0f}" for x in values)

        settled = (f"after {ceilings.settle_seconds:g} s for free page reporting"
                   if ceilings.settle_seconds else "no settling")
        lines += [
            f"dd write:    {ceilings.write_mib_s:8.0f} MiB/s  ceiling for appends: bs=1M, fresh {ceilings.size_mib} MiB "
            f"file, no fsync, {settled} (median of {runs(ceilings.write_runs)})",
            f"dd read:     {ceilings.read_mib_s:8.0f} MiB/s  ceiling for reads: bs=1M of the file just written, "
            f"page cache (median of {runs(ceilings.read_runs)})",
            f"dd rewrite:  {ceilings.overwrite_mib_s:8.0f} MiB/s  informative: conv=notrunc over the resident file, "
            f"copy only (median of {runs(ceilings.overwrite_runs)})",
            f"dd write16k: {ceilings.write_16k_mib_s:8.0f} MiB/s  informative: bs=16K fresh file, one write per "
            "batch like the append path",
        ]
        if ceilings.write_batches_mib_s is not None:
            lines.append(f"pwrite batches: {ceilings.write_batches_mib_s:5.0f} MiB/s  informative: os.pwrite of the "
                         "append workload's batches (not page multiples: writes start and end inside pages), one each, "
                         "nothing else")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.machine", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="directory on the filesystem to measure (default /tmp)")
    parser.add_argument("--size-mb", type=int, default=1024, help="MiB written and read by dd (default 1024)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settle", type=float, default=None,
                        help="seconds to wait before each write (default 5 on a VM with free page reporting, else 0)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="stratalog-dd-", dir=args.dir))
    try:
        ceilings = page_cache_ceilings(work, args.size_mb, args.repeats, args.settle)
        print(format_description(describe(work), ceilings))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
