"""``stratalog checkpoint``: write every checkpoint file of the directories now, locally or through a
running ``stratalog serve`` (``--server``)."""

from __future__ import annotations

import argparse
from typing import Any

from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only, topic_path


def register(sub: Any) -> None:
    parser = sub.add_parser("checkpoint", help="write the recovery-point, log-start-offset and "
                                                "high-watermark checkpoints of the data directories")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.server:
        return _run_remote(args)
    with opened(args) as manager:
        for log in manager.logs().values():
            log.flush()
        manager.write_checkpoints()
        for tp, log in sorted(manager.logs().items()):
            print_json({"topic": tp.topic, "partition": tp.partition, "recoveryPoint": log.recovery_point,
                        "logStartOffset": log.log_start_offset, "highWatermark": log.high_watermark})
    return 0


def _run_remote(args: argparse.Namespace) -> int:
    """What the local mode does, through the server's maintenance API: flush every log (so the recovery
    points reach the log ends), write the checkpoints, then print each partition's figures as the local
    mode does."""
    check_local_only(args, "engine_config")
    client = client_for(args, timeout=3600)
    client.json("POST", "/v1/maintenance/flush", query={"all": True})
    client.json("POST", "/v1/maintenance/checkpoints")
    for topic in sorted(t["name"] for t in client.json("GET", "/v1/topics")["topics"]):
        for summary in sorted(client.json("GET", topic_path(topic))["partitions"], key=lambda p: p["partition"]):
            stats = client.json("GET", topic_path(topic, "partitions", summary["partition"]))
            print_json({"topic": topic, "partition": stats["partition"], "recoveryPoint": stats["recoveryPoint"],
                        "logStartOffset": stats["logStartOffset"], "highWatermark": stats["highWatermark"]})
    return 0
