"""What the subcommands share: data-directory arguments, opening the engine, JSON records."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stratalog.common.config import parse_key_value_pairs
from stratalog.common.errors import KafkaStorageError
from stratalog.storage.log_manager import LogManager, open_log_manager


def add_data_dirs(parser: argparse.ArgumentParser, *, server: bool = False) -> None:
    """``--data-dir`` (required); with ``server=True``, exactly one of ``--data-dir`` or ``--server URL``.

    ``--server`` sends the command to a running ``stratalog serve`` instead of
    opening the directories (which the server holds locked while it runs).
    """
    if not server:
        parser.add_argument("--data-dir", dest="data_dirs", action="append", required=True, metavar="DIR",
                            help="a data directory (repeat for several, like Kafka's log.dirs)")
        return
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", dest="data_dirs", action="append", metavar="DIR",
                       help="a data directory (repeat for several, like Kafka's log.dirs)")
    where.add_argument("--server", metavar="URL",
                       help="a running `stratalog serve`, e.g. http://127.0.0.1:8092, instead of --data-dir")


def add_engine_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine-config", dest="engine_config", action="append", default=[], metavar="KEY=VALUE",
                        help="an engine-level setting under Kafka's name (e.g. log.segment.bytes=1048576)")


@contextmanager
def opened(args: argparse.Namespace, *, create_missing: bool = False) -> Iterator[LogManager]:
    """Open the directories (taking their locks; recovering if needed) and close them cleanly."""
    properties = parse_key_value_pairs(getattr(args, "engine_config", []) or [], where="--engine-config")
    manager = open_log_manager(args.data_dirs, properties, create_missing=create_missing)
    try:
        yield manager
    except BaseException:
        manager.close()
        raise
    report = manager.close()
    if not report.safe:  # what the command did may not be on disk: say so, never "ok"
        raise KafkaStorageError("; ".join(f"{path}: {error}" for path, error in report.unsafe.items()))


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))
