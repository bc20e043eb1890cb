"""The README's command line, run as a reader pastes it: in order, in a fresh shell, in an empty directory.

The commands are read from the README itself (every ``bash`` block of the section
"## The command line"), so a change to the README that stops them working fails
here. Each runs in its own ``bash`` with this interpreter's ``bin`` (the venv's, where
``stratalog`` and ``python`` are) first on the PATH, and what it prints is checked
against what the README's text says it shows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SECTION = "## The command line"
TIMEOUT = 120


def readme_commands(text: str) -> list[str]:
    """The command lines of the section's ``bash`` blocks, in order (blank and comment lines dropped)."""
    start = text.index(f"\n{SECTION}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
    assert blocks, f"no ```bash block under {SECTION!r} in {README}"
    return [line for block in blocks for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _option(command: str, name: str) -> str:
    found = re.search(rf"{re.escape(name)}[ =](\S+)", command)
    assert found, f"{name} not in: {command}"
    return found.group(1)


def test_the_command_line_section_works_as_written(tmp_path: Path) -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    bin_dir = Path(sys.executable).parent  # not resolved: the venv's bin, not the base interpreter's
    assert (bin_dir / "stratalog").exists(), f"no stratalog console script beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)  # what a fresh shell has: stratalog comes from the installed package
    cwd = tmp_path / "fresh"
    cwd.mkdir()

    produced: list[dict[str, Any]] = []  # every append's report, in order
    echoed: list[dict[str, Any]] = []  # the JSON records the README pipes into produce
    checked: set[str] = set()
    created: dict[str, int] = {}  # topic: partition count
    deleted_to: tuple[int, int] | None = None  # (partition, new log start offset) after delete-records
    for command in commands:
        result = subprocess.run(["bash", "-c", "set -o pipefail\n" + command], cwd=cwd, env=env, capture_output=True,
                                text=True, timeout=TIMEOUT)
        shown = f"$ {command}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
        assert result.returncode == 0, shown
        assert result.stderr == "", shown
        sub = re.search(r"\bstratalog (\S+)(?: (create|describe|alter|delete|list))?", command)
        what = " ".join(g for g in sub.groups() if g) if sub else command.split()[0]
        out = result.stdout

        if what == "topics create":
            assert out == f"Created topic {_option(command, '--topic')}.\n", shown
            created[_option(command, "--topic")] = int(_option(command, "--partitions"))
        elif what == "topics describe":
            for topic, count in created.items():
                assert f"Topic: {topic}\tPartitionCount: {count}\t" in out, shown
        elif what == "produce":
            echo = re.match(r"echo '(.*)' \|", command)
            if echo:
                echoed.append(json.loads(echo.group(1)))
            reports = json_lines(out)
            assert reports, shown
            if "--partition" in command:  # else the partitioner's choice, which the reports say
                assert all(r["partition"] == int(_option(command, "--partition")) for r in reports), shown
            produced.extend(reports)
        elif what == "consume":
            records = json_lines(out)
            partition = int(_option(command, "--partition"))
            expected = [r for r in produced if r["partition"] == partition]
            assert expected, f"nothing was produced to partition {partition} before: {shown}"
            assert [r["offset"] for r in records] == list(range(expected[0]["baseOffset"], expected[-1]["lastOffset"]
                                                                  + 1)), shown
            values = [r.get("value") for r in records]
            assert echoed and all(e["value"] in values for e in echoed), f"the produced values {echoed}: {shown}"
        elif what == "dump-log":
            path = _option(command, "--files")
            partition = int(re.search(r"-(\d+)/", path).group(1))  # type: ignore[union-attr]
            lines = out.splitlines()
            assert lines[0] == f"Dumping {path}", shown
            batches = [line for line in lines if line.startswith("baseOffset: ")]
            assert len(batches) == len([r for r in produced if r["partition"] == partition]), shown
            if "--print-data-log" in command:
                assert all(f"payload: {e['value']}" in out for e in echoed), shown
        elif what == "verify":
            assert out.splitlines()[-1].endswith("clean (OK)"), shown
        elif what == "retention":
            assert "segmentsDeleted" in json_lines(out)[-1], shown
        elif what == "compact":
            assert "logsCleaned" in json_lines(out)[-1], shown
        elif what == "delete-records":
            before = int(_option(command, "--before-offset"))
            partition = int(_option(command, "--partition"))
            end = max(r["lastOffset"] + 1 for r in produced if r["partition"] == partition)
            assert 0 < before <= end, f"--before-offset {before} deletes nothing of offsets 0..{end - 1}: {shown}"
            [reply] = json_lines(out)
            assert reply["lowWatermark"] == before, shown
            deleted_to = (partition, before)
        elif what == "checkpoint":
            figures = {(r["topic"], r["partition"]): r for r in json_lines(out)}
            if deleted_to is not None:
                partition, start = deleted_to
                [entry] = [r for (t, p), r in figures.items() if p == partition]
                assert entry["logStartOffset"] == start, shown
        checked.add(what)

    # The walk-through shows each of these; a README that drops one should drop it here too.
    assert {"topics create", "topics describe", "produce", "consume", "dump-log", "verify", "retention", "compact",
            "delete-records", "checkpoint"} <= checked, checked


@pytest.mark.parametrize("args, address", [
    ([], "127.0.0.1:8092"),
    (["--listen", "127.0.0.1:18093"], "127.0.0.1:18093"),
    (["--no-schedule", "--listen=0.0.0.0:9000"], "0.0.0.0:9000"),
])
def test_scripts_serve_prints_the_address_it_serves_on(tmp_path: Path, args: list[str], address: str) -> None:
    # The real script, beside a stand-in setup and a stand-in stratalog that prints its arguments.
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "serve", tmp_path / "scripts" / "serve")
    (tmp_path / "scripts" / "setup").write_text("true\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake = tmp_path / ".venv" / "bin" / "stratalog"
    fake.write_text('#!/bin/sh\necho "ran: $*"\n')
    fake.chmod(0o755)
    result = subprocess.run(["bash", str(tmp_path / "scripts" / "serve"), *args], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"stratalog serve on http://{address} "), result.stdout
    curls = [line for line in lines if line.strip().startswith("curl ")]
    assert len(curls) == 2 and all(f"http://{address}/v1/topics/demo/" in c for c in curls), result.stdout
    assert "8092" not in result.stdout or address.endswith(":8092"), result.stdout
    ran = lines[-1]
    assert ran.startswith("ran: serve --data-dir ./data --create-topic demo:1 "), ran
    # The server is asked for the address the banner names (argparse keeps the last --listen).
    listens = re.findall(r"--listen[ =](\S+)", ran)
    assert listens and listens[-1] == address, ran
