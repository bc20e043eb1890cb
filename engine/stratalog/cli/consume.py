"""``stratalog consume``: records of one partition as JSON lines, from an offset."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..json_records import record_to_json
from ..records import TimestampType
from .common import add_data_dirs, add_engine_config, opened


def register(sub: Any) -> None:
    parser = sub.add_parser("consume", help="print a partition's records as JSON lines")
    add_data_dirs(parser)
    add_engine_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--from-offset", type=int, help="first offset (default: the log start offset)")
    parser.add_argument("--max-records", type=int, help="stop after this many records")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(args) as manager:
        log = manager.get_log(args.topic, args.partition)
        start = log.log_start_offset if args.from_offset is None else args.from_offset
        write = sys.stdout.write
        for record, timestamp_type in log.read_records_with_type(start, args.max_records):
            write(record_to_json(record, topic=args.topic, partition=args.partition, timestamp_type=timestamp_type))
            write("\n")
    return 0
