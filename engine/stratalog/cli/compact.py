"""``stratalog compact``: run one cleaner pass now and report per log what it did."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tqdm import tqdm

from stratalog.storage.cleaner import LogCleaner
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only


def register(sub: Any) -> None:
    parser = sub.add_parser("compact", help="compact the compacted topics' logs now (one cleaner pass)")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", help="only this topic (default: every compacted topic)")
    parser.add_argument("--force", action="store_true",
                        help="clean every log with anything cleanable, ignoring min.cleanable.dirty.ratio")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        check_local_only(args, "engine_config")
        done = client_for(args, timeout=3600).json("POST", "/v1/maintenance/clean",
                                                      query={"topic": args.topic, "force": args.force or None})
        for report in done["reports"]:
            print_json(report)
        print_json({"logsCleaned": done["logsCleaned"]})
        return 0
    with opened(args) as manager:
        if args.topic:
            manager.describe_topic(args.topic)
        with tqdm(total=None, unit="B", unit_scale=True, desc="compacting", file=sys.stderr,
                  disable=not sys.stderr.isatty()) as bar:
            def advance(done: int) -> None:
                bar.update(done)

            cleaner = LogCleaner(manager, progress=advance)
            reports = cleaner.run_pass(force=args.force, topic=args.topic)
        for report in reports:
            print_json(report.to_dict())
        print_json({"logsCleaned": len(reports)})
    return 0
