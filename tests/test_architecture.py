"""The architecture's rules, checked by the test suite so that CI fails when one is broken.

The import contracts live in pyproject.toml (``[tool.importlinter]``) and are checked by
``lint-imports``; the typing rule is ``mypy --strict`` over every package (``[tool.mypy]``).
Both run here as subprocesses of the venv, so a violation shows up as a failed test with the
tool's own report as its message.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]



def _contract_ids() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [contract["id"] for contract in config["tool"]["importlinter"]["contracts"]]


def _venv_tool(name: str) -> str:
    """The console script installed beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; run scripts/setup with the dev extra", pytrace=False)
    return found


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=540)


def _lint_imports(contract_ids: list[str]) -> subprocess.CompletedProcess[str]:
    return _run([_venv_tool("lint-imports"), "--no-logo", *(f"--contract={cid}" for cid in contract_ids)])


def _require_success(result: subprocess.CompletedProcess[str]) -> None:
    # The tool's own report is the failure message; pytest's assertion rewriting would repeat it.
    if result.returncode != 0:
        pytest.fail(f"{result.args[0]} exited with {result.returncode}:\n{result.stdout}{result.stderr}",
                    pytrace=False)


def test_the_imports_keep_every_contract():
    contracts = _contract_ids()
    assert contracts, "no import contracts found in pyproject.toml"
    result = _lint_imports(contracts)
    _require_success(result)


def test_every_package_type_checks_under_mypy_strict():
    # mypy reads its files and options from pyproject.toml; its cache (.mypy_cache, gitignored)
    # makes repeated runs take seconds instead of a minute.
    result = _run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")])
    _require_success(result)
