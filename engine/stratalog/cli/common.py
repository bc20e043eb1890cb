"""What the subcommands share: data-directory and file arguments, opening the engine, JSON records."""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from stratalog.cli.remote import WAIT_FOR_SERVER_S
from stratalog.common.config import parse_key_value_pairs
from stratalog.common.errors import KafkaStorageError, StratalogError
from stratalog.storage.log_manager import LogManager, open_log_manager


class ArgumentError(StratalogError):
    """A command-line argument the command cannot act on, e.g. a file that cannot be read.

    Reported like every engine error (``error: INVALID_REQUEST: --flag value: why``,
    exit 1), and always raised before the data directories are opened, so nothing
    on disk changes.
    """

    code = "INVALID_REQUEST"


def check_readable_file(flag: str, path: str | Path, *, regular: bool = False) -> Path:
    """``path`` of the argument ``flag`` if it can be opened for reading; else ``ArgumentError``
    naming the flag, the path and the operating system's reason (missing, a directory, unreadable).

    A pipe or device (``/dev/stdin``, a shell's ``<(...)``) is taken as it is, without being
    opened here, unless ``regular`` asks for a regular file.
    """
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if stat.S_ISREG(mode):
            with open(path, "rb"):
                pass
        elif regular:
            raise ArgumentError(f"{flag} {path}: not a regular file")
    except OSError as error:
        raise ArgumentError(f"{flag} {path}: cannot read: {error.strerror or error}") from None
    return Path(path)


def open_file_argument(flag: str, path: str | Path) -> BinaryIO:
    """The file of the argument ``flag``, opened for reading in binary; errors as ``check_readable_file``."""
    check_readable_file(flag, path)
    try:
        return open(path, "rb")
    except OSError as error:
        raise ArgumentError(f"{flag} {path}: cannot read: {error.strerror or error}") from None


def read_file_argument(flag: str, path: str | Path) -> bytes:
    """The whole file of the argument ``flag``; errors (also while reading) as ``check_readable_file``."""
    with open_file_argument(flag, path) as file:
        try:
            return file.read()
        except OSError as error:
            raise ArgumentError(f"{flag} {path}: cannot read: {error.strerror or error}") from None


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
                       help="a running `stratalog serve`, e.g. http://127.0.0.1:8092, instead of --data-dir "
                            "(with access control: STRATALOG_TOKEN_FILE names a file holding the bearer token, "
                            "STRATALOG_CA_FILE the CA of an https server)")
    parser.add_argument("--wait-for-server", type=_seconds, default=WAIT_FOR_SERVER_S, metavar="SECONDS",
                        help="with --server: how long a server still starting (refusing the connection, or "
                             "answering 503 BROKER_NOT_AVAILABLE while it opens its directories) is tried again "
                             f"before the command fails; 0 tries once (default {WAIT_FOR_SERVER_S:g})")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    if not 0 <= value <= 86400 or value != value:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds from 0 to 86400")
    return value


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
