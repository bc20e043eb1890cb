"""The ``stratalog-spark`` command: ``verify``, ``compaction-plan`` and ``export`` as Spark jobs.

Each prints one JSON report on stdout (``verify`` also a line per finding
without ``--json``) and exits 1 when the job found the topic corrupt, 2 on a
usage error, as ``stratalog`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..options import parse_location
from ..store import Location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _where(parser: argparse.ArgumentParser, *, url: bool = True) -> None:
    parser.add_argument("--data-dir", dest="data_dirs", action="append", metavar="DIR",
                        help="a data directory (repeat for several); read directly, without its lock")
    if url:
        parser.add_argument("--url", help="a `stratalog serve` endpoint instead of --data-dir")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stratalog-spark", description="Spark jobs on stratalog topics.")
    sub = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    verify = sub.add_parser("verify", help="check every segment's CRCs and indexes, one task per segment")
    _where(verify, url=False)
    verify.add_argument("--json", action="store_true", help="print the whole report as JSON")
    plan = sub.add_parser("compaction-plan", help="latest offset per key over a topic, as engine plans")
    _where(plan)
    plan.add_argument("--out", required=True, type=Path, help="directory for <topic>-<p>.keep(.json)")
    plan.add_argument("--apply", action="store_true",
                      help="apply the plans now through the engine (data directories only; takes their lock)")
    export = sub.add_parser("export", help="a topic (or an offset / time range) to Parquet")
    _where(export)
    export.add_argument("--out", required=True, help="the Parquet output path")
    export.add_argument("--overwrite", action="store_true", help="replace the output if it exists")
    export.add_argument("--include-headers", action="store_true")
    for name in ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp"):
        export.add_argument(f"--{name}", dest=name, help=f"the data source's {name} option")
    return parser


def _location(args: argparse.Namespace) -> Location:
    options = {"path": ",".join(args.data_dirs)} if args.data_dirs else {}
    if getattr(args, "url", None):
        options["url"] = args.url
    return parse_location(options)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.data_dirs) == bool(getattr(args, "url", None)):
        parser.error("give --data-dir (one or more) or --url")
    location = _location(args)
    if args.job == "compaction-plan" and args.apply and location.url:
        parser.error("--apply needs --data-dir: apply the plans where the engine runs (stratalog "
                     "apply-compaction-plan)")
    from pyspark.sql import SparkSession

    from .session import job_session

    existing = SparkSession.getActiveSession()  # called from a program that has a session: leave it running
    spark = job_session(args.job, args.master)
    try:
        return _run(spark, args, location)
    finally:
        if existing is None:
            spark.stop()


def _run(spark: SparkSession, args: argparse.Namespace, location: Location) -> int:
    if args.job == "verify":
        from .verify import print_report, verify_topic

        report = verify_topic(spark, list(location.paths), args.topic)
        print_report(report, args.json)
        return 1 if report["errors"] else 0
    if args.job == "compaction-plan":
        from .compaction_plan import apply_plans, plan_topic

        result = plan_topic(spark, location, args.topic, args.out)
        if args.apply:
            result["applied"] = apply_plans(list(location.paths), args.topic, result)
        print(json.dumps(result))
        return 0
    from .export import export_topic

    read_options = {name: getattr(args, name) for name in
                    ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp")
                    if getattr(args, name) is not None}
    if args.include_headers:
        read_options["includeHeaders"] = "true"
    print(json.dumps(export_topic(spark, location, args.topic, args.out, read_options=read_options,
                                  mode="overwrite" if args.overwrite else "errorifexists")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
