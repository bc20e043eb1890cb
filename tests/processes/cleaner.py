"""A cleaner process for crash tests: one forced compaction pass over a data directory, then exit.

The parent kills it with SIGKILL at a random moment, or sets
``STRATALOG_CRASH_AT`` so that it kills itself at a named instant of the swap.
Usage: cleaner.py DATA_DIR
"""

from __future__ import annotations

import sys

from stratalog.storage.cleaner import LogCleaner
from stratalog.storage.log_manager import open_log_manager


def main() -> None:
    manager = open_log_manager([sys.argv[1]], create_missing=False)
    print("ready", flush=True)
    LogCleaner(manager).run_pass(force=True)
    manager.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
