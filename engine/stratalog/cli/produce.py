"""``stratalog produce``: append JSON-lines records, or raw v2 batches from another client.

The whole input is parsed and every batch built before the first append, so a
bad line anywhere leaves the log untouched; errors name the line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Any, BinaryIO

from stratalog.common.errors import CorruptRecordError, InvalidPartitionsError, InvalidRecordError, \
    RecordBatchTooLargeError
from stratalog.records.json_form import record_from_json_line
from stratalog.broker.partitioner import partition_for_key
from stratalog.records import Compression, Record, build_batch, iter_batch_infos, validate_batch
from stratalog.storage.validation import validate_leader_batch
from stratalog.cli.common import add_data_dirs, add_engine_config, open_file_argument, opened, print_json, \
    read_file_argument
from stratalog.cli.remote import client_for, check_local_only, topic_path


def register(sub: Any) -> None:
    parser = sub.add_parser("produce", help="append records read as JSON lines (or raw batches) to a topic")
    add_data_dirs(parser, server=True)
    add_engine_config(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, help="target partition (default: murmur2 of the key, "
                                                      "round-robin batches for null keys, as Kafka's producer)")
    parser.add_argument("--batch-records", type=int, default=500, help="records per batch (default 500)")
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--input", default="-", help="JSON-lines file (default: standard input)")
    parser.add_argument("--batch-file", help="append raw v2 record batches from this file instead")
    parser.add_argument("--flush", action="store_true", help="fsync before reporting the offsets")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.batch_records < 1:
        raise SystemExit("stratalog produce: --batch-records must be at least 1")
    # The file arguments are read (or at least opened) before the directories are, so a bad
    # one is refused with nothing on disk touched.
    raw = _read_batch_file(args.batch_file, args.partition or 0) if args.batch_file else None
    source = None if raw is not None else _open_input(args)
    if args.server:
        return _run_remote(args, raw, source)
    with opened(args) as manager:
        partitions = len(manager.describe_topic(args.topic).partitions)
        if args.partition is not None and not 0 <= args.partition < partitions:
            raise InvalidPartitionsError(
                f"topic {args.topic!r} has partitions 0..{partitions - 1}; --partition {args.partition} does not exist"
            )
        batches = raw if raw is not None else _batches_from_json(args, source, partitions)
        # Every batch passes the log's own checks before the first is appended, so bad input
        # anywhere leaves every partition as it was.
        now = time.time_ns() // 1_000_000
        for partition, batch in batches:
            log = manager.get_log(args.topic, partition)
            validate_leader_batch(batch, log.config, log.topic_partition, now)
            if len(batch) > log.config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"{log.topic_partition}: batch of {len(batch)} bytes is larger than segment.bytes "
                    f"({log.config.segment_bytes}) and can never fit in a segment")
        for partition, batch in batches:
            info = manager.get_log(args.topic, partition).append(batch)
            print_json({"topic": args.topic, "partition": partition, "baseOffset": info.first_offset,
                        "lastOffset": info.last_offset, "records": info.record_count,
                        "logAppendTime": info.log_append_time})
        if args.flush:
            for partition in {p for p, _ in batches}:
                manager.get_log(args.topic, partition).flush()
    return 0


def _run_remote(args: argparse.Namespace, raw: list[tuple[int, bytes]] | None, source: BinaryIO | None) -> int:
    """The same batches as the local mode, built here and sent raw; --flush becomes acks=all per batch."""
    check_local_only(args, "engine_config")
    client = client_for(args)
    partitions = len(client.json("GET", topic_path(args.topic))["partitions"])
    if args.partition is not None and not 0 <= args.partition < partitions:
        raise InvalidPartitionsError(
            f"topic {args.topic!r} has partitions 0..{partitions - 1}; --partition {args.partition} does not exist"
        )
    batches = raw if raw is not None else _batches_from_json(args, source, partitions)
    for partition, batch in batches:
        info = client.produce_batch(args.topic, partition, batch, fsync=args.flush)
        print_json({"topic": args.topic, "partition": partition, "baseOffset": info["baseOffset"],
                    "lastOffset": info["lastOffset"], "records": info["recordCount"],
                    "logAppendTime": info["logAppendTime"]})
    return 0


def _read_batch_file(path: str, partition: int) -> list[tuple[int, bytes]]:
    data = read_file_argument("--batch-file", path)
    infos = list(iter_batch_infos(data, source=path))
    for info in infos:
        if info.magic >= 2:
            validate_batch(data, info.position, source=path)  # a CRC error names its byte in the file
    batches = [(partition, data[i.position : i.position + i.size]) for i in infos]
    consumed = sum(len(b) for _, b in batches)
    if consumed != len(data):
        raise CorruptRecordError(consumed, f"{len(data) - consumed} trailing bytes do not form a whole batch",
                                 source=path)
    return batches


def _open_input(args: argparse.Namespace) -> BinaryIO:
    if args.input == "-":
        return sys.stdin.buffer
    return open_file_argument("--input", args.input)


def _batches_from_json(args: argparse.Namespace, source: BinaryIO | None, partitions: int
                       ) -> list[tuple[int, bytes]]:
    assert source is not None
    name = "standard input" if args.input == "-" else args.input
    now = time.time_ns() // 1_000_000
    grouped: dict[int, list[Record]] = defaultdict(list)
    round_robin = 0
    with source:
        for number, raw_line in enumerate(source, start=1):
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidRecordError(f"{name}, line {number}: not UTF-8 text (byte {error.start} of the line)") \
                    from None
            if not line.strip():
                continue
            record = record_from_json_line(line, offset=0, now_ms=now, where=f"{name}, line {number}")
            if args.partition is not None:
                partition = args.partition
            elif record.key is not None:
                partition = partition_for_key(record.key, partitions)
            else:
                partition = round_robin % partitions
                round_robin += 1
            grouped[partition].append(record)
    codec = Compression.from_name(args.compression)
    batches = []
    for partition in sorted(grouped):
        records = grouped[partition]
        for start in range(0, len(records), args.batch_records):
            chunk = [Record(i, r.timestamp, r.key, r.value, r.headers)
                     for i, r in enumerate(records[start : start + args.batch_records])]
            batches.append((partition, build_batch(chunk, compression=codec)))
    return batches
