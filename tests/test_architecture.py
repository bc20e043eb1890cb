"""The architecture's rules, checked by the test suite so that CI fails when one is broken.

The import contracts live in pyproject.toml (``[tool.importlinter]``) and are checked by
``lint-imports``; the typing rule is ``mypy --strict`` over every package (``[tool.mypy]``).
Both run here as subprocesses of the venv, so a violation shows up as a failed test with the
tool's own report as its message. Some contracts describe where the tree is going rather than
where it is: they are listed in ``PENDING_CONTRACTS`` and expected to fail (strictly, so that the
day one starts to pass, the suite says so and it moves to the settled set).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Contract id -> the work that will make it pass.
PENDING_CONTRACTS = {
    "server-through-broker": "the transport-neutral broker layer: stratalog.server still imports stratalog.storage",
}


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


def test_every_pending_contract_names_a_contract_in_pyproject():
    assert set(PENDING_CONTRACTS) <= set(_contract_ids())


def test_the_imports_keep_every_settled_contract():
    settled = [cid for cid in _contract_ids() if cid not in PENDING_CONTRACTS]
    assert settled, "no import contracts found in pyproject.toml"
    result = _lint_imports(settled)
    _require_success(result)


@pytest.mark.parametrize("contract_id", [
    pytest.param(cid, marks=pytest.mark.xfail(strict=True, reason=f"pending: {why}"))
    for cid, why in sorted(PENDING_CONTRACTS.items())
])
def test_a_pending_contract_holds_once_its_work_lands(contract_id):
    result = _lint_imports([contract_id])
    _require_success(result)


def test_every_package_type_checks_under_mypy_strict():
    # mypy reads its files and options from pyproject.toml; its cache (.mypy_cache, gitignored)
    # makes repeated runs take seconds instead of a minute.
    result = _run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")])
    _require_success(result)
