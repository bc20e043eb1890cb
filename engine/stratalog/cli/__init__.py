"""The ``stratalog`` command line, shaped like Kafka's tools.

Each subcommand lives in its own module and registers its arguments here.
Every engine error is reported as one line, ``error: CODE: message``, with
exit status 1, and so is an argument a command cannot act on (a file argument
that cannot be read: ``error: INVALID_REQUEST: --flag PATH: cannot read: <the
OS's reason>``), checked before any data directory is opened; a command line
argparse cannot parse exits with 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from stratalog.common.errors import StratalogError
from stratalog.cli import checkpoint, compact, consume, delete_records, dump_log, produce, retention, serve, topics, verify
from stratalog.cli import apply_plan

COMMANDS_GROUP = "stratalog.commands"

_COMMANDS = (topics, produce, consume, dump_log, verify, checkpoint, retention, compact, delete_records, serve,
             apply_plan)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stratalog",
        description="Kafka's log storage layer: topics, produce, consume and inspect Kafka-format log directories.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.register(sub)
    _register_plugin_commands(sub)
    return parser


def _register_plugin_commands(sub: object) -> None:
    """Subcommands of other installed packages, found through the ``stratalog.commands`` entry-point
    group: ``stratalog operator`` / ``stratalog agent`` come from the operator package (one command for
    every role of the one image), and the engine never imports it. Each entry is a ``register(sub)``."""
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        register = entry.load()
        register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
        return result
    except StratalogError as error:
        print(f"error: {error.code}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
