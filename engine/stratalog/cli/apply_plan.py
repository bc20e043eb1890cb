"""``stratalog apply-compaction-plan``: clean one partition with a plan computed elsewhere (Spark).

The plan (``<topic>-<p>.keep`` and its ``.json`` sidecar, see
``stratalog.storage.cleaner.plan_file``) says which offsets are their key's latest; the
engine applies it in one pass with the cleaner's own rewrite and crash-safe
swap, then moves the partition's cleaner checkpoint to where the pass reached
so the regular cleaner does not redo the work.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from stratalog.common import strict_json
from stratalog.storage.cleaner.plan import apply_to_partition
from stratalog.storage.cleaner.plan_file import CompactionPlanError, sidecar_path
from stratalog.cli.common import add_data_dirs, add_engine_config, check_readable_file, opened, print_json, \
    read_file_argument


def register(sub: Any) -> None:
    parser = sub.add_parser("apply-compaction-plan",
                            help="compact one partition with a plan of offsets to keep (from stratalog-spark "
                                 "compaction-plan)")
    add_data_dirs(parser)
    add_engine_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--plan", required=True, type=Path, metavar="FILE",
                        help="the partition's .keep file (its .keep.json sidecar must be beside it)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_plan(args.plan)
    with opened(args) as manager:
        report = apply_to_partition(manager, args.topic, args.partition, args.plan)
        print_json(report.to_json())
    return 0


def _check_plan(plan: Path) -> None:
    """Both files of the plan readable and its header strict JSON, before the directories are opened.

    The engine checks the plan's content against the log; what is checked here is what
    only the command line can name: the argument, and JSON numbers (NaN, Infinity) that
    Python's json would take.
    """
    check_readable_file("--plan", plan, regular=True)
    sidecar = sidecar_path(plan)
    text = read_file_argument("--plan", sidecar) if sidecar.exists() else None
    if text is None:
        return  # the engine says the plan was never completed
    try:
        strict_json.loads(text)
    except strict_json.NonFiniteNumberError as error:
        at = f"field {error.path!r}" if error.path else "the header"
        raise CompactionPlanError(f"--plan {plan}: its header {sidecar}: {at}: {error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return  # the engine's own check names what is wrong with it
