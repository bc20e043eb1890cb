"""``stratalog consume``: records of one partition as JSON lines, from an offset.

With ``--server`` the records come from a running ``stratalog serve`` in the
same JSON form (the server and the CLI share ``json_records``); ``--follow``
then tails the partition with long polls until interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stratalog.records.json_form import record_to_json
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only, topic_path

FOLLOW_WAIT_MS = 30_000


def register(sub: Any) -> None:
    parser = sub.add_parser("consume", help="print a partition's records as JSON lines")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--from-offset", type=int, help="first offset (default: the log start offset)")
    parser.add_argument("--max-records", type=int, help="stop after this many records")
    parser.add_argument("--follow", action="store_true",
                        help="with --server: keep waiting for new records (long poll) until interrupted")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        return _run_remote(args)
    if args.follow:
        raise SystemExit("stratalog consume: --follow needs --server (a local directory has no other writer "
                         "while this command holds its lock)")
    with opened(args) as manager:
        log = manager.get_log(args.topic, args.partition)
        start = log.log_start_offset if args.from_offset is None else args.from_offset
        write = sys.stdout.write
        for record, timestamp_type in log.read_records_with_type(start, args.max_records):
            write(record_to_json(record, topic=args.topic, partition=args.partition, timestamp_type=timestamp_type))
            write("\n")
    return 0


def _run_remote(args: argparse.Namespace) -> int:
    check_local_only(args, "engine_config")
    client = client_for(args)
    path = topic_path(args.topic, "partitions", args.partition, "records")
    offset: int | None = args.from_offset
    remaining: int | None = args.max_records
    wait = 0
    if args.follow:  # as long as the server allows
        limits = client.json("GET", "/v1/status").get("limits", {})
        wait = min(FOLLOW_WAIT_MS, int(limits.get("maxFetchWaitMs", FOLLOW_WAIT_MS)))
    while remaining is None or remaining > 0:
        reply = client.json("GET", path, query={"offset": offset, "maxWaitMs": wait, "format": "json"},
                            timeout=wait / 1000 + 60)
        for record in reply["records"]:
            print_json(record)
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    break
        sys.stdout.flush()  # a tail is read as it comes, not when a buffer fills
        moved = reply["nextOffset"] != offset
        offset = reply["nextOffset"]
        if not args.follow and (offset >= reply["highWatermark"] or not moved):
            break
    return 0
