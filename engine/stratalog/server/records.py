"""Produce, fetch, list offsets and delete records: the data path of the API.

Produce takes either raw v2 batches (``application/vnd.kafka.record-batch``,
the bytes a Kafka producer would send, appended through ``Log.append`` as
Kafka's leader path does) or JSON records (``application/json``, the CLI's
record form, built into one batch). Either way every batch of the request is
validated before the first one is appended, so a refused request leaves the
log exactly as it was.

Acknowledgement: ``acks=1`` (the default) answers once the batch is in the
page cache, as Kafka does; ``acks=all`` (or ``-1``, or ``fsync=true``) answers
after ``Log.flush()``. The engine is the only replica of each partition, so
"all in-sync replicas have it" can only mean "it is on this disk".

Fetch serves what ``Log.read`` returns, batch-granular (the first batch may
start below the requested offset, as Kafka's fetch does), either raw or as
decoded JSON records from the offset on. At the high watermark it long-polls:
it waits on the partition's append signal for up to ``maxWaitMs``.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from stratalog.common.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StratalogError,
    UnknownTopicOrPartitionError,
)
from stratalog.records.json_form import record_from_dict, record_to_dict
from stratalog.storage.log import AppendInfo, FetchInfo, Log
from stratalog.common.names import TopicPartition
from stratalog.broker.partitioner import partition_for_key
from stratalog.records import (
    BatchInfo,
    Compression,
    Record,
    TimestampType,
    build_batch,
    decode_any,
    iter_batch_infos,
    parse_header,
    parse_legacy_entry,
)
from stratalog.storage.retention import delete_records
from stratalog.storage.validation import validate_leader_batch
from stratalog.common.limits import INT32_MAX, INT64_MAX
from stratalog.server import params
from stratalog.server.errors import InvalidRequiredAcksError, RequestError, StorageError
from stratalog.server.state import ServerState, state_of

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_RECORDS_BODY_FIELDS = {"records"}



# -- produce ---------------------------------------------------------------------------------
def _acks(request: web.Request) -> str:
    """``"all"`` (fsync before answering) or ``"1"`` (page cache); also the metrics label."""
    acks = params.query_str(request, "acks")
    if acks is not None and acks not in ("1", "all", "-1"):
        raise InvalidRequiredAcksError(f"query parameter 'acks': {acks!r} is not 1, all or -1 (acks=0 is not "
                                       "offered: an HTTP request always has a response)")
    fsync = params.query_bool(request, "fsync", False)
    return "all" if acks in ("all", "-1") or fsync else "1"


def _split_raw(data: bytes) -> list[bytes]:
    if not data:
        raise CorruptRecordError(0, "the body is empty; expected one or more v2 record batches")
    batches = [data[i.position : i.position + i.size] for i in iter_batch_infos(data, source="request body")]
    consumed = sum(len(b) for b in batches)
    if consumed != len(data):
        raise CorruptRecordError(consumed, f"{len(data) - consumed} trailing bytes do not form a whole batch",
                                 source="request body")
    return batches


@dataclass(frozen=True)
class _JsonRecord:
    record: Record
    partition: int | None  # the record's own "partition" field, if given


def _json_records(data: bytes, now_ms: int) -> list[_JsonRecord]:
    obj = params.parse_json(data)
    if not isinstance(obj, dict):
        raise RequestError("body: expected a JSON object {\"records\": [...]}")
    unknown = sorted(set(obj) - _RECORDS_BODY_FIELDS)
    if unknown:
        raise RequestError(f"body: unknown field(s) {unknown}; allowed: ['records']")
    items = obj.get("records")
    if not isinstance(items, list) or not items:
        raise RequestError("body field 'records': expected a non-empty array of records")
    out = []
    for index, item in enumerate(items):
        where = f"body: records[{index}]"
        record = record_from_dict(item, offset=0, now_ms=now_ms, where=where)
        partition = item.get("partition") if isinstance(item, dict) else None
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                      or not 0 <= partition <= INT32_MAX):
            raise RequestError(f"{where}: 'partition' must be a partition number, got {partition!r}")
        out.append(_JsonRecord(record, partition))
    return out


def _build(records: Sequence[Record], codec: Compression) -> bytes:
    renumbered = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    return build_batch(renumbered, compression=codec)


def _check(log: Log, batches: list[bytes], now_ms: int) -> None:
    """Everything ``Log.append`` would refuse, checked for every batch before the first is appended."""
    for number, batch in enumerate(batches, start=1):
        try:
            validated = validate_leader_batch(batch, log.config, log.topic_partition, now_ms)
            if len(validated.data) > log.config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"{log.topic_partition}: batch of {len(validated.data)} bytes is larger than segment.bytes "
                    f"({log.config.segment_bytes}) and can never fit in a segment"
                )
        except StratalogError as error:
            if len(batches) > 1:  # say which batch of the body, keeping the error's type and code
                error.args = (f"batch {number} of {len(batches)} in the body: {error}",)
            raise


def _append(log: Log, batches: list[bytes], fsync: bool, now_ms: int) -> list[AppendInfo]:
    """Append the batches contiguously, all or none (runs on the io pool)."""
    if len(batches) == 1:
        infos = [log.append(batches[0], now_ms=now_ms)]  # validates before it changes anything
    else:
        # The log's lock (re-entrant) keeps the batches contiguous and the config stable
        # between the check and the appends.
        with log.lock:
            _check(log, batches, now_ms)
            infos = [log.append(batch, now_ms=now_ms) for batch in batches]
    if fsync:
        log.flush()
    return infos


def _append_result(infos: list[AppendInfo], log: Log) -> dict[str, Any]:
    return {"baseOffset": infos[0].first_offset, "lastOffset": infos[-1].last_offset,
            "logAppendTime": infos[-1].log_append_time, "recordCount": sum(i.record_count for i in infos),
            "batches": len(infos), "logStartOffset": log.log_start_offset}


async def _append_and_signal(state: ServerState, log: Log, batches: list[bytes], acks: str,
                             now_ms: int) -> list[AppendInfo]:
    started = time.perf_counter()
    infos = await state.run(_append, log, batches, acks == "all", now_ms)
    tp = log.topic_partition
    state.metrics.append_latency.labels(acks).observe(time.perf_counter() - started)
    labels = (tp.topic, str(tp.partition))
    state.metrics.append_bytes.labels(*labels).inc(sum(i.size for i in infos))
    state.metrics.append_records.labels(*labels).inc(sum(i.record_count for i in infos))
    state.signals.notify(tp)
    return infos


async def produce_partition(request: web.Request) -> web.Response:
    state = state_of(request)
    topic, partition = params.topic(request), params.partition(request)
    acks = _acks(request)
    codec = Compression.from_name(params.query_choice(request, "compression", _CODECS, "none") or "none")
    log = state.manager.get_log(topic, partition)
    kind = params.media_type(request)
    now = state.manager.clock()
    if kind in (params.RECORD_BATCH, params.OCTET_STREAM):
        batches = _split_raw(await params.read_body(request, state.body_limit()))
    elif kind == params.JSON:
        data = await params.read_body(request, state.body_limit())
        records = await state.run(_json_records, data, now)
        for index, item in enumerate(records):
            if item.partition is not None and item.partition != partition:
                raise RequestError(f"body: records[{index}]: 'partition' {item.partition} differs from the "
                                   f"partition {partition} in the path")
        batches = [await state.run(_build, [r.record for r in records], codec)]
    else:
        raise RequestError(f"Content-Type {request.content_type!r} is not accepted: send "
                           f"{params.RECORD_BATCH} or {params.JSON}", status=415)
    infos = await _append_and_signal(state, log, batches, acks, now)
    return web.json_response(_append_result(infos, log))


def _partition_records(state: ServerState, topic: str, records: list[_JsonRecord], partitions: int
                       ) -> dict[int, list[Record]]:
    grouped: dict[int, list[Record]] = defaultdict(list)
    for index, item in enumerate(records):
        record = item.record
        if item.partition is not None:
            if item.partition >= partitions:
                raise UnknownTopicOrPartitionError(
                    f"body: records[{index}]: topic {topic!r} has partitions 0..{partitions - 1}, "
                    f"not {item.partition}")
            chosen = item.partition
        elif record.key is not None:
            chosen = partition_for_key(record.key, partitions)  # Kafka's murmur2 partitioner
        else:
            chosen = state.next_round_robin(topic) % partitions
        grouped[chosen].append(record)
    return dict(sorted(grouped.items()))


def _append_many(logs: dict[int, Log], batches: dict[int, bytes], fsync: bool, now_ms: int
                 ) -> dict[int, list[AppendInfo]]:
    # Check every partition's batch first: one refused batch refuses the whole request.
    for partition, batch in batches.items():
        _check(logs[partition], [batch], now_ms)
    return {partition: _append(logs[partition], [batch], fsync, now_ms) for partition, batch in batches.items()}


async def produce_topic(request: web.Request) -> web.Response:
    """JSON records to a topic; each record's partition is Kafka's default partitioner's choice."""
    state = state_of(request)
    topic = params.topic(request)
    acks = _acks(request)
    codec = Compression.from_name(params.query_choice(request, "compression", _CODECS, "none") or "none")
    if params.media_type(request) != params.JSON:
        raise RequestError(f"Content-Type {request.content_type!r} is not accepted here: send {params.JSON} "
                           "(raw batches go to /v1/topics/{topic}/partitions/{partition}/records)", status=415)
    held = sorted(state.manager.describe_topic(topic).partitions)
    if held != list(range(len(held))):
        # An engine holding some of a topic's partitions (a Kubernetes LogDir's agent) does not know
        # the topic's partition count, so Kafka's partitioner cannot run here.
        raise RequestError(f"this engine holds partitions {held} of topic {topic!r}, not all of them: "
                           "produce to /v1/topics/{topic}/partitions/{partition}/records on the engine "
                           "holding each partition (a Topic's status.assignment says which)", status=409)
    partitions = len(held)
    data = await params.read_body(request, state.body_limit())
    now = state.manager.clock()
    records = await state.run(_json_records, data, now)
    grouped = _partition_records(state, topic, records, partitions)
    logs = {p: state.manager.get_log(topic, p) for p in grouped}
    batches = {p: await state.run(_build, recs, codec) for p, recs in grouped.items()}
    started = time.perf_counter()
    results = await state.run(_append_many, logs, batches, acks == "all", now)
    state.metrics.append_latency.labels(acks).observe(time.perf_counter() - started)
    out = []
    for partition, infos in results.items():
        labels = (topic, str(partition))
        state.metrics.append_bytes.labels(*labels).inc(sum(i.size for i in infos))
        state.metrics.append_records.labels(*labels).inc(sum(i.record_count for i in infos))
        state.signals.notify(TopicPartition(topic, partition))
        out.append({"partition": partition, **_append_result(infos, logs[partition])})
    return web.json_response({"topic": topic, "recordCount": sum(len(r) for r in grouped.values()),
                              "partitions": out})


# -- fetch -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Fetched:
    info: FetchInfo
    data: bytes  # whole batches only
    batches: list[BatchInfo]

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.info.requested_offset


_READ_ATTEMPTS = 3


def _read(log: Log, offset: int, max_bytes: int) -> _Fetched:
    for attempt in range(1, _READ_ATTEMPTS + 1):
        try:
            info = log.read(offset, max_bytes)
            break
        except StratalogError:
            raise
        except (OSError, ValueError):
            if log.closed:  # deleted while we read: the topic is gone, not the server broken
                raise UnknownTopicOrPartitionError(f"{log.topic_partition} was deleted during the fetch") from None
            # A segment picked up just before retention or the cleaner replaced it, whose files were then
            # removed (file.delete.delay.ms later): the next read sees the current segments.
            if attempt == _READ_ATTEMPTS:
                raise
    data = info.data
    try:
        batches = list(iter_batch_infos(data, source=str(log.dir)))
    except CorruptRecordError as error:
        raise StorageError(f"{log.topic_partition}: stored batch does not decode: {error}") from None
    end = batches[-1].position + batches[-1].size if batches else 0
    # A read cut by maxBytes may end inside a batch; serve whole batches only.
    return _Fetched(info, data[:end] if end != len(data) else data, batches)


def _decode(log: Log, fetched: _Fetched, offset: int) -> list[dict[str, Any]]:
    tp = log.topic_partition
    out: list[dict[str, Any]] = []
    for info in fetched.batches:
        batch = fetched.data[info.position : info.position + info.size]
        try:
            if info.magic >= 2:
                timestamp_type = parse_header(batch).timestamp_type
            else:
                timestamp_type = parse_legacy_entry(batch, verify_crc=False).timestamp_type
            records = decode_any(batch, 0, source=str(log.dir))[1]
        except CorruptRecordError as error:
            raise StorageError(f"{tp}: stored batch at offset {info.base_offset} does not decode: {error}") \
                from None
        out.extend(record_to_dict(r, topic=tp.topic, partition=tp.partition, timestamp_type=TimestampType(
            timestamp_type)) for r in records if r.offset >= offset)
    return out


def _wants_binary(request: web.Request) -> bool:
    fmt = params.query_choice(request, "format", ("json", "binary"), None)
    if fmt is not None:
        return fmt == "binary"
    accept = request.headers.get("Accept", "")
    return params.RECORD_BATCH in accept or (params.OCTET_STREAM in accept and params.JSON not in accept)


async def fetch(request: web.Request) -> web.StreamResponse:
    state = state_of(request)
    settings = state.settings
    topic, partition = params.topic(request), params.partition(request)
    requested = params.query_int(request, "offset", None, minimum=0, maximum=INT64_MAX)
    max_bytes = params.query_int(request, "maxBytes", settings.default_fetch_bytes, minimum=1,
                                 maximum=settings.max_fetch_bytes) or settings.default_fetch_bytes
    max_wait_ms = params.query_int(request, "maxWaitMs", 0, minimum=0, maximum=settings.max_fetch_wait_ms) or 0
    binary = _wants_binary(request)
    log = state.manager.get_log(topic, partition)
    tp = log.topic_partition
    offset = log.log_start_offset if requested is None else requested
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    read_seconds = 0.0
    while True:
        event = state.signals.event(tp)  # before the read: an append in between still wakes us
        started = time.perf_counter()
        fetched = await state.run(_read, log, offset, max_bytes)
        read_seconds += time.perf_counter() - started
        remaining = deadline - loop.time()
        if fetched.batches or remaining <= 0 or state.draining:
            break
        state.metrics.long_polls.inc()
        try:
            await asyncio.wait_for(event.wait(), remaining)
        except TimeoutError:
            pass
        finally:
            state.metrics.long_polls.dec()
    state.metrics.fetch_latency.observe(read_seconds)
    state.metrics.fetch_bytes.labels(topic, str(partition)).inc(len(fetched.data))
    info = fetched.info
    headers = {"X-High-Watermark": str(info.high_watermark), "X-Log-Start-Offset": str(info.log_start_offset),
               "X-Log-End-Offset": str(info.log_end_offset), "X-Next-Offset": str(fetched.next_offset)}
    if binary:
        return web.Response(body=fetched.data, content_type=params.RECORD_BATCH, headers=headers)
    records = await state.run(_decode, log, fetched, offset)
    return web.json_response({"topic": topic, "partition": partition, "records": records,
                              "highWatermark": info.high_watermark, "logStartOffset": info.log_start_offset,
                              "logEndOffset": info.log_end_offset, "nextOffset": fetched.next_offset},
                             headers=headers)


# -- offsets and delete-records ----------------------------------------------------------------
async def list_offsets(request: web.Request) -> web.Response:
    """Kafka's ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, or a time in ms."""
    state = state_of(request)
    topic, partition = params.topic(request), params.partition(request)
    timestamp = params.query_int(request, "timestamp", -1, minimum=-4, maximum=INT64_MAX)
    assert timestamp is not None
    log = state.manager.get_log(topic, partition)
    found = await state.run(log.offset_for_timestamp, timestamp)
    # As Kafka: no record at or after the time gives offset -1 / timestamp -1, not an error.
    offset, stamp = (found.offset, found.timestamp) if found is not None else (-1, -1)
    return web.json_response({"topic": topic, "partition": partition, "timestamp": stamp, "offset": offset,
                              "query": timestamp})


async def delete_records_handler(request: web.Request) -> web.Response:
    """Kafka's DeleteRecords: ``beforeOffset`` -1 means the high watermark."""
    state = state_of(request)
    topic, partition = params.topic(request), params.partition(request)
    body = await params.json_object(request, 4096, allowed={"beforeOffset"}, required={"beforeOffset"})
    before = params.field_int(body, "beforeOffset", minimum=-1)
    log = state.manager.get_log(topic, partition)

    def run() -> dict[str, Any]:
        target = log.high_watermark if before == -1 else before
        if target > log.high_watermark:
            raise OffsetOutOfRangeError(f"{log.topic_partition}: beforeOffset {target} is past the high watermark "
                                        f"{log.high_watermark}")
        start = delete_records(log, target)
        return {"topic": topic, "partition": partition, "lowWatermark": start, "segments": len(log.segments)}

    return web.json_response(await state.run(run))
