"""``stratalog checkpoint``: write every checkpoint file of the directories now."""

from __future__ import annotations

import argparse
from typing import Any

from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json


def register(sub: Any) -> None:
    parser = sub.add_parser("checkpoint", help="write the recovery-point, log-start-offset and "
                                                "high-watermark checkpoints of the data directories")
    add_data_dirs(parser)
    add_engine_config(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(args) as manager:
        for log in manager.logs().values():
            log.flush()
        manager.write_checkpoints()
        for tp, log in sorted(manager.logs().items()):
            print_json({"topic": tp.topic, "partition": tp.partition, "recoveryPoint": log.recovery_point,
                        "logStartOffset": log.log_start_offset, "highWatermark": log.high_watermark})
    return 0
