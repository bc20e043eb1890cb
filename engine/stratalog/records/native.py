"""Which record kernel runs: the native one (``native/``, Rust through PyO3) or pure Python.

The native extension ``stratalog_native`` does whole-batch work in one call and never builds a
Python object per record. The pure-Python functions of this package stay the reference and the
fallback, as aiohttp's and aiokafka's extensions do it: an install without a Rust toolchain has no
extension and runs everything in Python. Each native function is held to its Python twin by the
differential tests (same results; for damaged input, the same error at the same byte position).

``STRATALOG_KERNEL`` chooses: ``auto`` (the default: native if installed), ``python`` (never
native), ``native`` (native, and an error at import if it is missing: what the test suite runs).

An extension built from other sources than this package's (an old build left installed) may lack a
function the engine calls: its ``INTERFACE`` number must be this module's, or it is refused at
import, by ``native`` with an error and by ``auto`` with a warning and the Python kernel.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

_CHOICES = ("auto", "python", "native")
INTERFACE = 7   # native/src/lib.rs sets the same number; see there when to change it


def _load(choice: str) -> ModuleType | None:
    if choice not in _CHOICES:
        raise ImportError(f"STRATALOG_KERNEL={choice!r}: expected one of {', '.join(_CHOICES)}")
    if choice == "python":
        return None
    try:
        import stratalog_native
    except ImportError as error:
        if choice == "native":
            raise ImportError(f"STRATALOG_KERNEL=native, but the native record kernel is not installed ({error}); "
                              "build it with `scripts/setup` (needs cargo), or set STRATALOG_KERNEL=auto") from None
        return None
    found = getattr(stratalog_native, "INTERFACE", None)
    if found != INTERFACE:
        why = (f"the installed native record kernel ({getattr(stratalog_native, '__file__', '?')}) has interface "
               f"{found}, this stratalog needs {INTERFACE}: it was built from other sources; rebuild it with "
               "`scripts/setup`")
        if choice == "native":
            raise ImportError(f"STRATALOG_KERNEL=native, but {why}")
        warnings.warn(f"{why}; running the pure-Python record kernel meanwhile", RuntimeWarning, stacklevel=2)
        return None
    return stratalog_native


kernel: ModuleType | None = _load(os.environ.get("STRATALOG_KERNEL", "auto").strip().lower() or "auto")


def name() -> str:
    """``native`` or ``python``: which kernel this process runs (for logs and metrics)."""
    return "python" if kernel is None else "native"
