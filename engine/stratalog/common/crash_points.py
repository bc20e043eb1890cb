"""Named instants where a test can have this very process killed with SIGKILL.

Crash tests need kills that land *between* two renames of the swap protocol,
which random timing hits too rarely. ``STRATALOG_CRASH_AT=name:n`` makes the
process send itself SIGKILL the n-th time it reaches ``crash_point(name)``: a
real kill of a real process, at a chosen instant. Unset (always, outside
tests), a crash point is one dictionary lookup.

TEST-ONLY fault injection: ``TEST_ONLY_EIO_AT`` names crash points where an ``OSError(EIO)`` is
raised instead, for the one fault no real file system here produces on demand (a disk that
fails a rename). Only tests fill it; the engine never does.
"""

from __future__ import annotations

import errno
import os
import signal

_target: tuple[str, int] | None = None
_counts: dict[str, int] = {}
TEST_ONLY_EIO_AT: set[str] = set()

_spec = os.environ.get("STRATALOG_CRASH_AT")
if _spec:
    _name, _, _nth = _spec.partition(":")
    _target = (_name, int(_nth or "1"))


def crash_point(name: str) -> None:
    if TEST_ONLY_EIO_AT and name in TEST_ONLY_EIO_AT:
        raise OSError(errno.EIO, f"Input/output error (test-only fault injected at {name})")
    if _target is None or _target[0] != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= _target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
