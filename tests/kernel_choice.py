"""For tests that run both record kernels on the same input: which one a block of code runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType

from stratalog.records import native


@contextlib.contextmanager
def kernel(module: ModuleType | None) -> Iterator[None]:
    """Run the block with ``module`` as the record kernel (None: pure Python)."""
    saved, native.kernel = native.kernel, module
    try:
        yield
    finally:
        native.kernel = saved
