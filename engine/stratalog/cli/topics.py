"""``stratalog topics create|alter|describe|delete``: Kafka's kafka-topics.sh on local directories."""

from __future__ import annotations

import argparse
from typing import Any

from stratalog.common.config import parse_key_value_pairs
from stratalog.storage.log_manager import LogManager
from stratalog.cli.common import add_data_dirs, add_engine_config, opened, print_json
from stratalog.cli.remote import client_for, check_local_only, topic_path
from stratalog.broker.topics import TopicAdmin


def register(sub: Any) -> None:
    parser = sub.add_parser("topics", help="create, alter, describe or delete topics")
    parser.add_argument("action", choices=["create", "alter", "describe", "delete", "list"])
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", help="the topic (all topics for describe/list when omitted)")
    parser.add_argument("--partitions", type=int, help="partition count (create), or the new larger count (alter)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic setting under Kafka's name, e.g. cleanup.policy=compact (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                        help="alter: drop an override so the engine default applies again")
    parser.add_argument("--json", action="store_true", help="describe as JSON")
    parser.set_defaults(run=run)


def _require_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise SystemExit(f"stratalog topics {args.action}: --topic is required")
    topic: str = args.topic
    return topic


def _check_partitions(args: argparse.Namespace) -> None:
    """A count Kafka refuses (below 1, or over MAX_PARTITIONS) is refused before any directory is opened or created."""
    if args.partitions is None or args.action not in ("create", "alter"):
        return
    TopicAdmin.check_partition_count(_require_topic(args), args.partitions, where="--partitions")


def run(args: argparse.Namespace) -> int:
    overrides = parse_key_value_pairs(args.config, where="--config")
    _check_partitions(args)
    if args.server:
        return _run_remote(args, overrides)
    with opened(args, create_missing=args.action == "create") as manager:
        if args.action == "create":
            topic = _require_topic(args)
            TopicAdmin(manager).create_topic(topic, 1 if args.partitions is None else args.partitions, overrides)
            print(f"Created topic {topic}.")
        elif args.action == "alter":
            topic = _require_topic(args)
            if args.partitions is not None:
                TopicAdmin(manager).add_partitions(topic, args.partitions)
            if overrides or args.delete_config:
                current = manager.describe_topic(topic).overrides
                merged = {k: v for k, v in current.items() if k not in set(args.delete_config)}
                merged.update(overrides)
                TopicAdmin(manager).alter_topic_config(topic, merged)
            print(f"Altered topic {topic}.")
        elif args.action == "delete":
            topic = _require_topic(args)
            TopicAdmin(manager).delete_topic(topic)
            manager.delete_pending_dirs()
            print(f"Deleted topic {topic}.")
        elif args.action == "list":
            for topic in manager.topics():
                print(topic)
        else:
            _describe(manager, [args.topic] if args.topic else manager.topics(), as_json=args.json)
    return 0


def _run_remote(args: argparse.Namespace, overrides: dict[str, str]) -> int:
    """The same actions through a running server's topic API; the same output."""
    check_local_only(args, "engine_config")
    client = client_for(args)
    if args.action == "create":
        topic = _require_topic(args)
        client.json("POST", "/v1/topics", body={"name": topic,
                                                 "partitions": 1 if args.partitions is None else args.partitions,
                                                 "configs": overrides})
        print(f"Created topic {topic}.")
    elif args.action == "alter":
        topic = _require_topic(args)
        if args.partitions is not None:
            client.json("POST", topic_path(topic, "partitions"), body={"count": args.partitions})
        if overrides or args.delete_config:
            client.json("PATCH", topic_path(topic, "configs"), body={"set": overrides,
                                                                     "delete": args.delete_config})
        print(f"Altered topic {topic}.")
    elif args.action == "delete":
        topic = _require_topic(args)
        client.json("DELETE", topic_path(topic))
        print(f"Deleted topic {topic}.")
    elif args.action == "list":
        for entry in client.json("GET", "/v1/topics")["topics"]:
            print(entry["name"])
    else:
        names = [args.topic] if args.topic else [t["name"] for t in client.json("GET", "/v1/topics")["topics"]]
        for topic in names:
            described = client.json("GET", topic_path(topic))
            _print_description(topic, described["configs"], described["partitions"], as_json=args.json)
    return 0


def _describe(manager: LogManager, topics: list[str], *, as_json: bool) -> None:
    for topic in topics:
        description = manager.describe_topic(topic)
        partitions = []
        for partition, directory in description.partitions.items():
            log = manager.get_log(topic, partition)
            partitions.append({
                "partition": partition, "logDir": str(directory.parent),
                "logStartOffset": log.log_start_offset, "logEndOffset": log.log_end_offset,
                "highWatermark": log.high_watermark, "size": log.size, "segments": len(log.segments),
            })
        _print_description(topic, description.overrides, partitions, as_json=as_json)


def _print_description(topic: str, overrides: dict[str, str], partitions: list[dict[str, Any]], *,
                       as_json: bool) -> None:
    """One topic as ``describe`` prints it, whether read locally or from a server."""
    if as_json:
        print_json({"topic": topic, "partitionCount": len(partitions), "configs": overrides,
                    "partitions": partitions})
        return
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    print(f"Topic: {topic}\tPartitionCount: {len(partitions)}\tConfigs: {configs}")
    for p in partitions:
        print(f"\tTopic: {topic}\tPartition: {p['partition']}\tLogDir: {p['logDir']}\t"
              f"LogStartOffset: {p['logStartOffset']}\tLogEndOffset: {p['logEndOffset']}\t"
              f"Size: {p['size']}\tSegments: {p['segments']}")
