"""``stratalog retention``: run one retention pass now and print what it deleted and why."""

from __future__ import annotations

import argparse
from typing import Any

from stratalog.storage.retention import delete_old_segments
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only


def register(sub: Any) -> None:
    parser = sub.add_parser("retention", help="delete segments past retention.ms / retention.bytes / the log "
                                              "start offset, now")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", help="only this topic (default: every topic)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        check_local_only(args, "engine_config")
        done = client_for(args, timeout=3600).json("POST", "/v1/maintenance/retention", query={"topic": args.topic})
        for deletion in done["deletions"]:
            print_json(deletion)
        print_json({"segmentsDeleted": done["segmentsDeleted"]})
        return 0
    with opened(args) as manager:
        if args.topic:
            manager.describe_topic(args.topic)  # unknown topic: a clear error, not an empty pass
        total = 0
        for tp, log in sorted(manager.logs().items()):
            if args.topic and tp.topic != args.topic:
                continue
            for deletion in delete_old_segments(log):
                total += 1
                print_json({"topic": tp.topic, "partition": tp.partition, "baseOffset": deletion.base_offset,
                            "size": deletion.size, "reason": deletion.reason, "detail": deletion.detail,
                            "logStartOffset": log.log_start_offset})
        print_json({"segmentsDeleted": total})
    return 0
