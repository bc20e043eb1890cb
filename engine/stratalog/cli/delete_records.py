"""``stratalog delete-records``: Kafka's DeleteRecords on a partition, of a local directory or through a
running ``stratalog serve`` (``--server``, which holds the directory's lock while it runs)."""

from __future__ import annotations

import argparse
from typing import Any

from stratalog.storage.retention import delete_records
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only, topic_path


def register(sub: Any) -> None:
    parser = sub.add_parser("delete-records", help="move a partition's log start offset forward, dropping "
                                                   "whole segments below it")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--before-offset", type=int, required=True,
                        help="the new log start offset (at most the high watermark; -1: the high watermark)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        check_local_only(args, "engine_config")
        done = client_for(args).json("POST", topic_path(args.topic, "partitions", args.partition,
                                                           "delete-records"),
                                        body={"beforeOffset": args.before_offset})
        print_json({"topic": done["topic"], "partition": done["partition"], "lowWatermark": done["lowWatermark"],
                    "segments": done["segments"]})
        return 0
    with opened(args) as manager:
        log = manager.get_log(args.topic, args.partition)
        start = delete_records(log, args.before_offset)
        print_json({"topic": args.topic, "partition": args.partition, "lowWatermark": start,
                    "segments": len(log.segments)})
    return 0
