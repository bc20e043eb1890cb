"""``stratalog apply-compaction-plan``: clean one partition with a plan computed elsewhere (Spark).

The plan (``<topic>-<p>.keep`` and its ``.json`` sidecar, see
``stratalog.storage.cleaner.plan_file``) says which offsets are their key's latest; the
engine applies it in one pass with the cleaner's own rewrite and crash-safe
swap, then moves the partition's cleaner checkpoint to where the pass reached
so the regular cleaner does not redo the work.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stratalog.storage.cleaner.plan import apply_to_partition
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json


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
    with opened(args) as manager:
        report = apply_to_partition(manager, args.topic, args.partition, args.plan)
        print_json(report.to_json())
    return 0
