"""Batch writes (``df.write.format("stratalog").mode("append")``), with the Kafka sink's columns.

Columns as Spark's Kafka sink takes them: ``value`` (string or binary,
required), ``key`` (string or binary), ``topic`` (the ``topic`` option wins
over the column), ``partition`` (int; when null or absent, Kafka's default
partitioner: murmur2 of the key, and round robin for null keys), ``headers``
and ``timestamp`` (else the time of the write). Other columns are ignored.

Every record is appended through the engine's append path (validation, offset
assignment, rolls, indexes); tasks never write segment files themselves.

* ``url``: each task posts its batches to ``stratalog serve``, which appends
  them. The engine is the single writer, so tasks run in parallel.
* ``path``: appending needs the directories' ``.lock``. A task first encodes
  its rows into v2 batches in a local spool file (so no lock is held while
  Spark computes its input), then waits for the lock, opens the engine on the
  directories, appends the spool and closes cleanly. Tasks writing to one
  directory take turns - fine on one machine, and the only correct choice
  without a server. A directory held by a running engine cannot be written
  this way; the wait fails with a message pointing at ``url``.

Delivery is at-least-once, as with Kafka's sink: a task retried after it
appended appends again. ``overwrite`` is refused; there is nothing to undo on
abort, which only reports what was appended.
"""

from __future__ import annotations

import logging
import random
import struct
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType, TimestampType

from stratalog.broker.partitioner import partition_for_key
from stratalog.records import Compression, Header, Record, build_batch

from .options import OptionError, SinkOptions
from .schema import kafka_schema
from .store import LogStore, open_store

logger = logging.getLogger("stratalog_spark")

BATCH_RECORDS = 4096
BATCH_BYTES = 512 << 10  # well below max.message.bytes (1 MiB by default) once headers are counted
_FRAME = struct.Struct(">Hii")  # topic length, partition, batch length


@dataclass
class AppendedMessage(WriterCommitMessage):
    """(topic, partition, first offset, last offset, records) per appended batch."""

    appended: list[tuple[str, int, int, int, int]] = field(default_factory=list)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Kafka's ``KafkaWriter.validateQuery``: the columns it uses must have its types."""
    types = {f.name: f.dataType for f in schema.fields}
    text_or_bytes = (StringType(), BinaryType())
    if "value" not in types:
        raise OptionError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and types[name] not in text_or_bytes:
            raise OptionError(f"{name} attribute type must be a string or binary, not {types[name].simpleString()}")
    if options.topic is None and "topic" not in types:
        raise OptionError("topic option required when no 'topic' attribute is present. Use the topic option for "
                          "setting a topic.")
    if "topic" in types and types["topic"] != StringType():
        raise OptionError(f"Topic type must be a string, not {types['topic'].simpleString()}")
    if "partition" in types and types["partition"] != IntegerType():
        raise OptionError(f"partition attribute type must be an int, not {types['partition'].simpleString()}")
    headers = kafka_schema(True)["headers"].dataType
    if "headers" in types and types["headers"] != headers:
        raise OptionError(f"headers attribute type must be {headers.simpleString()}, not "
                          f"{types['headers'].simpleString()}")
    if "timestamp" in types and types["timestamp"] != TimestampType():
        raise OptionError(f"timestamp attribute type must be a timestamp, not {types['timestamp'].simpleString()}")


class _Spool:
    """Encoded batches waiting for the directory lock, framed in a temporary file."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="stratalog-spool-")

    def add(self, topic: str, partition: int, batch: bytes) -> None:
        name = topic.encode("utf-8")
        self.file.write(_FRAME.pack(len(name), partition, len(batch)) + name + batch)

    def __iter__(self) -> Iterator[tuple[str, int, bytes]]:
        self.file.seek(0)
        while head := self.file.read(_FRAME.size):
            name_length, partition, length = _FRAME.unpack(head)
            topic = self.file.read(name_length).decode("utf-8")
            yield topic, partition, self.file.read(length)


class _Partitioner:
    """Kafka's default partitioner: murmur2 for keys, round robin (from a random start) for null keys."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.counts: dict[str, int] = {}
        self.next_null: dict[str, int] = {}

    def count(self, topic: str) -> int:
        if topic not in self.counts:
            self.counts[topic] = len(self.store.partitions(topic))
        return self.counts[topic]

    def choose(self, topic: str, key: bytes | None, given: int | None) -> int:
        count = self.count(topic)
        if given is not None:
            if not 0 <= given < count:
                raise OptionError(f"partition {given} does not exist: topic {topic!r} has partitions 0..{count - 1}")
            return given
        if key is not None:
            return partition_for_key(key, count)
        turn = self.next_null.get(topic, random.randrange(count))
        self.next_null[topic] = turn + 1
        return turn % count


def _bytes(value: Any) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


class StratalogArrowWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options
        self.columns = tuple(f.name for f in schema.fields)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AppendedMessage:
        options = self.options
        store = open_store(options.location, lock_timeout_s=options.lock_timeout_s)
        partitioner = _Partitioner(store)
        codec = Compression.from_name(options.compression)
        message = AppendedMessage()
        pending: dict[tuple[str, int], list[Record]] = {}
        sizes: dict[tuple[str, int], int] = {}
        spool = _Spool() if options.location.url is None else None
        with ExitStack() as stack:
            # Through a server: append as batches fill. To a directory: spool now, append under the lock below.
            append = stack.enter_context(store.appender()) if spool is None else None

            def emit(target: tuple[str, int]) -> None:
                records = pending.pop(target)
                sizes.pop(target)
                batch = build_batch(records, compression=codec)
                if spool is not None:
                    spool.add(target[0], target[1], batch)
                else:
                    assert append is not None
                    first, last = append(target[0], target[1], batch)
                    message.appended.append((target[0], target[1], first, last, len(records)))

            for batch in iterator:
                for topic, key, value, headers, timestamp, given in self._rows(batch):
                    target = (topic, partitioner.choose(topic, key, given))
                    records = pending.setdefault(target, [])
                    records.append(Record(len(records), timestamp, key, value, headers))
                    sizes[target] = sizes.get(target, 0) + len(key or b"") + len(value or b"") + 16
                    if len(records) >= BATCH_RECORDS or sizes[target] >= BATCH_BYTES:
                        emit(target)
            for target in list(pending):
                emit(target)
        if spool is not None:
            try:
                with store.appender() as append_locked:
                    for topic, partition, data in spool:
                        first, last = append_locked(topic, partition, data)
                        message.appended.append((topic, partition, first, last, last - first + 1))
            finally:
                spool.file.close()
        return message

    def _rows(self, batch: pa.RecordBatch) -> Iterator[tuple[str, bytes | None, bytes | None, tuple[Header, ...],
                                                             int, int | None]]:
        count = batch.num_rows
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names if name in
                   ("key", "value", "topic", "partition", "headers")}
        if "timestamp" in batch.schema.names:
            micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
        else:
            micros = [None] * count
        now = time.time_ns() // 1_000_000
        topics = [self.options.topic] * count if self.options.topic else columns["topic"]
        keys = columns.get("key", [None] * count)
        values = columns["value"]
        headers = columns.get("headers", [None] * count)
        partitions = columns.get("partition", [None] * count)
        for i in range(count):
            topic = topics[i]
            if topic is None:
                raise OptionError("null topic present in the data. Use the topic option for setting a topic.")
            record_headers = tuple(Header(h["key"], h["value"]) for h in headers[i]) if headers[i] else ()
            timestamp = micros[i] // 1000 if micros[i] is not None else now
            yield topic, _bytes(keys[i]), _bytes(values[i]), record_headers, timestamp, partitions[i]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        records = sum(a[4] for m in messages if isinstance(m, AppendedMessage) for a in m.appended)
        logger.info("stratalog: appended %d records in %d tasks", records, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        appended = [a for m in messages if isinstance(m, AppendedMessage) for a in m.appended]
        if appended:
            logger.warning("stratalog: the write failed after %d batches were appended; appends cannot be undone "
                           "(at-least-once, as Kafka's sink): %s", len(appended), appended[:10])
