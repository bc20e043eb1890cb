"""The ``stratalog`` command line, shaped like Kafka's tools.

Each subcommand lives in its own module and registers its arguments here.
Every engine error is reported as one line, ``error: CODE: message``, with
exit status 1; usage errors exit with 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stratalog.common.errors import StratalogError
from stratalog.cli import checkpoint, compact, consume, delete_records, dump_log, produce, retention, serve, topics, verify
from stratalog.cli import apply_plan

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
    _register_kubernetes_roles(sub)
    return parser


def _register_kubernetes_roles(sub: object) -> None:
    """``stratalog operator`` / ``stratalog agent`` come from the operator package when it is present
    (one entry point for every role of the one image); the engine does not depend on it."""
    try:
        from stratalog_operator.cli import register
    except ImportError:
        return
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
