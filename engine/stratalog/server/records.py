"""Produce, fetch, list offsets and delete records: the data path of the API, over HTTP.

Produce takes either raw v2 batches (``application/vnd.kafka.record-batch``, the bytes a
Kafka producer would send) or JSON records (``application/json``, the CLI's record form,
built here into one batch). Fetch serves whole batches raw, or decoded as JSON records from
the requested offset on. Everything else — validation, all-or-nothing, acks, long polls at
the high watermark — is the broker's (``stratalog.broker.replica_manager``); this module
parses the request, calls it, and encodes its answer.

``acks`` is 1 (the default) or ``all``/``-1`` (or ``fsync=true``): ``acks=0`` is not offered,
since an HTTP request always has a response.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from stratalog.broker.fetch import FetchedBatches, FetchIsolation
from stratalog.broker.produce import Acks, ProduceResult
from stratalog.common.errors import (
    CorruptRecordError,
    InvalidRequiredAcksError,
    StoredBatchError,
    UnknownTopicOrPartitionError,
)
from stratalog.common.limits import INT32_MAX, INT64_MAX
from stratalog.common.names import TopicPartition
from stratalog.records import (
    Compression,
    Record,
    TimestampType,
    build_batch,
    decode_any,
    iter_batch_infos,
    parse_header,
    parse_legacy_entry,
    peek_batch,
)
from stratalog.records.json_form import record_from_dict, record_to_dict
from stratalog.records.transactions import AbortedTransaction, TransactionTracker, control_type
from stratalog.server import params
from stratalog.server.api_request import ApiRequest
from stratalog.server.data_answer import JSON_UTF8, DataAnswer
from stratalog.server.errors import RequestError
from stratalog.server.sendfile import SENDFILE_ABOVE_BYTES
from stratalog.server.state import ServerState, state_of

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_RECORDS_BODY_FIELDS = {"records"}


# -- produce ---------------------------------------------------------------------------------
def _acks(request: ApiRequest) -> Acks:
    acks = params.query_str(request, "acks")
    if acks is not None and acks not in ("1", "all", "-1"):
        raise InvalidRequiredAcksError(f"query parameter 'acks': {acks!r} is not 1, all or -1 (acks=0 is not "
                                       "offered: an HTTP request always has a response)")
    fsync = params.query_bool(request, "fsync", False)
    return Acks.ALL if fsync else Acks.parse(acks, "query parameter 'acks'")


def _split_raw(data: bytes) -> list[bytes]:
    if not data:
        raise CorruptRecordError(0, "the body is empty; expected one or more v2 record batches")
    # Most bodies are one batch: taken as it is once its header says it spans the body, without the
    # walk below (which reads that header first too, and fails on it the same way).
    first = peek_batch(data, 0, source="request body")
    if first is not None and first.size == len(data):
        return [data]
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


_RAW_TYPES = frozenset({params.RECORD_BATCH, params.OCTET_STREAM})
_APPEND_ANSWER = (b'{"baseOffset": %d, "lastOffset": %d, "logAppendTime": %d, "recordCount": %d, "batches": %d, '
                  b'"logStartOffset": %d}')


def _append_result(result: ProduceResult) -> dict[str, Any]:
    return {"baseOffset": result.base_offset, "lastOffset": result.last_offset,
            "logAppendTime": result.log_append_time, "recordCount": result.record_count,
            "batches": result.batches, "logStartOffset": result.log_start_offset}


def _append_answer(result: ProduceResult) -> bytes:
    """``_append_result`` as JSON bytes, as ``json_response`` would write it: the answer of every produce,
    its integers formatted into a template rather than a dict made and encoded."""
    return _APPEND_ANSWER % (result.base_offset, result.last_offset, result.log_append_time, result.record_count,
                             result.batches, result.log_start_offset)


def _count_append(state: ServerState, tp: TopicPartition, result: ProduceResult) -> None:
    state.metrics.count_append(tp.topic, tp.partition, result.size, result.record_count)


async def produce_partition(request: ApiRequest) -> DataAnswer:
    state = state_of(request)
    tp = params.topic_partition(request)
    acks = _acks(request)
    codec = Compression.from_name(params.query_choice(request, "compression", _CODECS, "none") or "none")
    state.broker.log(tp)  # an unknown partition is a 404 before the body is read
    kind = params.media_type(request)
    now = state.engine.clock()
    if kind in _RAW_TYPES:
        batches = _split_raw(await params.read_body(request, state.body_limit()))
    elif kind == params.JSON:
        data = await params.read_body(request, state.body_limit())
        records = await state.run(_json_records, data, now)
        for index, item in enumerate(records):
            if item.partition is not None and item.partition != tp.partition:
                raise RequestError(f"body: records[{index}]: 'partition' {item.partition} differs from the "
                                   f"partition {tp.partition} in the path")
        batches = [await state.run(_build, [r.record for r in records], codec)]
    else:
        raise RequestError(f"Content-Type {request.content_type!r} is not accepted: send "
                           f"{params.RECORD_BATCH} or {params.JSON}", status=415)
    started = time.perf_counter()
    result = await state.broker.append_records(tp, batches, acks, now)
    state.metrics.observe_append(acks.value, time.perf_counter() - started)
    _count_append(state, tp, result)
    return DataAnswer(JSON_UTF8, _append_answer(result))


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
        else:
            chosen = state.broker.partition_for(topic, record.key, partitions)
        grouped[chosen].append(record)
    return dict(sorted(grouped.items()))


async def produce_topic(request: web.Request) -> web.Response:
    """JSON records to a topic; each record's partition is Kafka's default partitioner's choice."""
    state = state_of(request)
    topic = params.topic(request)
    acks = _acks(request)
    codec = Compression.from_name(params.query_choice(request, "compression", _CODECS, "none") or "none")
    if params.media_type(request) != params.JSON:
        raise RequestError(f"Content-Type {request.content_type!r} is not accepted here: send {params.JSON} "
                           "(raw batches go to /v1/topics/{topic}/partitions/{partition}/records)", status=415)
    held = state.broker.held_partitions(topic)
    if held != list(range(len(held))):
        # An engine holding some of a topic's partitions (a Kubernetes LogDir's agent) does not know
        # the topic's partition count, so Kafka's partitioner cannot run here.
        raise RequestError(f"this engine holds partitions {held} of topic {topic!r}, not all of them: "
                           "produce to /v1/topics/{topic}/partitions/{partition}/records on the engine "
                           "holding each partition (a Topic's status.assignment says which)", status=409)
    data = await params.read_body(request, state.body_limit())
    now = state.engine.clock()
    records = await state.run(_json_records, data, now)
    grouped = _partition_records(state, topic, records, len(held))
    batches = {p: await state.run(_build, recs, codec) for p, recs in grouped.items()}
    started = time.perf_counter()
    results = await state.broker.append_to_partitions(topic, batches, acks, now)
    state.metrics.observe_append(acks.value, time.perf_counter() - started)
    out = []
    for partition, result in results.items():
        _count_append(state, TopicPartition(topic, partition), result)
        out.append({"partition": partition, **_append_result(result)})
    return web.json_response({"topic": topic, "recordCount": sum(len(r) for r in grouped.values()),
                              "partitions": out})


# -- fetch -----------------------------------------------------------------------------------
# A read_committed binary fetch names its aborted transactions in a header; past this many it
# serves fewer batches, so the header stays well inside HTTP clients' header limits (8 KiB).
MAX_ABORTED_IN_HEADER = 200


def _decode(fetched: FetchedBatches, offset: int) -> list[dict[str, Any]]:
    """The records at and after ``offset``; for read_committed without aborted transactions' records
    and without transaction markers, as a Kafka consumer returns them."""
    tp = fetched.topic_partition
    aborted = fetched.aborted_transactions
    tracker = TransactionTracker(list(aborted)) if aborted is not None else None
    out: list[dict[str, Any]] = []
    for info in fetched.batches:
        batch = fetched.data[info.position : info.position + info.size]
        try:
            if info.magic >= 2:
                header = parse_header(batch)
                timestamp_type = header.timestamp_type
                if tracker is not None:
                    if header.is_control:   # ends its transaction for the tracker, never shown
                        tracker.on_control_batch(header, control_type(batch, header))
                        continue
                    if tracker.on_data_batch(header):
                        continue
            else:
                timestamp_type = parse_legacy_entry(batch, verify_crc=False).timestamp_type
            records = decode_any(batch, 0, source=fetched.source)[1]
        except CorruptRecordError as error:
            raise StoredBatchError(f"{tp}: stored batch at offset {info.base_offset} does not decode: {error}") \
                from None
        out.extend(record_to_dict(r, topic=tp.topic, partition=tp.partition, timestamp_type=TimestampType(
            timestamp_type)) for r in records if r.offset >= offset)
    return out


def sends_from_file(binary: bool, max_bytes: int, *, tls: bool) -> bool:
    """Whether a fetch's batches go from the segment file to the socket without becoming bytes:
    raw batches, asked for in more than ``SENDFILE_ABOVE_BYTES``, on a plaintext connection (TLS
    must encrypt them in memory)."""
    return binary and not tls and max_bytes > SENDFILE_ABOVE_BYTES


def _wants_binary(request: ApiRequest) -> bool:
    fmt = params.query_choice(request, "format", ("json", "binary"), None)
    if fmt is not None:
        return fmt == "binary"
    accept = request.headers.get("Accept", "")
    return params.RECORD_BATCH in accept or (params.OCTET_STREAM in accept and params.JSON not in accept)


async def fetch(request: ApiRequest) -> DataAnswer:
    state = state_of(request)
    settings = state.settings
    tp = params.topic_partition(request)
    requested = params.query_int(request, "offset", None, minimum=0, maximum=INT64_MAX)
    max_bytes = params.query_int(request, "maxBytes", settings.default_fetch_bytes, minimum=1,
                                 maximum=settings.max_fetch_bytes) or settings.default_fetch_bytes
    max_wait_ms = params.query_int(request, "maxWaitMs", 0, minimum=0, maximum=settings.max_fetch_wait_ms) or 0
    isolation = params.isolation(request)
    binary = _wants_binary(request)
    plaintext = request.transport is not None and request.transport.get_extra_info("sslcontext") is None
    zero_copy = sends_from_file(binary, max_bytes, tls=not plaintext)
    fetched = await state.broker.fetch(tp, requested, max_bytes, max_wait_ms, isolation, zero_copy=zero_copy)
    if binary:
        fetched = _within_header_limit(fetched)
    state.metrics.count_fetch(tp.topic, tp.partition, fetched.size, fetched.read_seconds)
    headers = {"X-High-Watermark": str(fetched.high_watermark), "X-Log-Start-Offset": str(fetched.log_start_offset),
               "X-Log-End-Offset": str(fetched.log_end_offset), "X-Next-Offset": str(fetched.next_offset)}
    committed: dict[str, Any] = {}
    if isolation is FetchIsolation.TXN_COMMITTED:
        aborted = fetched.aborted_transactions or ()
        headers["X-Last-Stable-Offset"] = str(fetched.last_stable_offset)
        if binary:   # JSON names them in its body (and leaves their records out)
            headers["X-Aborted-Transactions"] = ",".join(f"{t.producer_id}:{t.first_offset}" for t in aborted)
        committed = {"lastStableOffset": fetched.last_stable_offset,
                     "abortedTransactions": [_aborted_to_dict(t) for t in aborted]}
    if binary:
        return DataAnswer(params.RECORD_BATCH, fetched.data, headers, fetched.region)
    records = await state.run(_decode, fetched, fetched.info.requested_offset)
    return DataAnswer(JSON_UTF8, json.dumps(
        {"topic": tp.topic, "partition": tp.partition, "records": records, "highWatermark": fetched.high_watermark,
         "logStartOffset": fetched.log_start_offset, "logEndOffset": fetched.log_end_offset,
         "nextOffset": fetched.next_offset, **committed}).encode(), headers)


def _aborted_to_dict(transaction: AbortedTransaction) -> dict[str, int]:
    return {"producerId": transaction.producer_id, "firstOffset": transaction.first_offset}


def _within_header_limit(fetched: FetchedBatches) -> FetchedBatches:
    """Fewer batches when more aborted transactions than a header holds meet them (at least one batch)."""
    aborted = fetched.aborted_transactions
    if aborted is None or len(aborted) <= MAX_ABORTED_IN_HEADER or not fetched.batches:
        return fetched
    cut = sorted(t.first_offset for t in aborted)[MAX_ABORTED_IN_HEADER]
    kept = [b for b in fetched.batches if b.last_offset < cut] or fetched.batches[:1]
    end = kept[-1].position + kept[-1].size
    info = dataclasses.replace(fetched.info, aborted_transactions=tuple(
        t for t in aborted if t.first_offset <= kept[-1].last_offset))
    if fetched.region is not None:
        return dataclasses.replace(fetched, info=info, batches=kept, region=fetched.region.narrowed(end))
    return dataclasses.replace(fetched, info=info, data=fetched.data[:end], batches=kept)


# -- offsets and delete-records ----------------------------------------------------------------
async def list_offsets(request: web.Request) -> web.Response:
    """Kafka's ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, or a time in ms."""
    state = state_of(request)
    tp = params.topic_partition(request)
    timestamp = params.query_int(request, "timestamp", -1, minimum=-4, maximum=INT64_MAX)
    assert timestamp is not None
    found = await state.broker.list_offsets(tp, timestamp, params.isolation(request))
    # As Kafka: no record at or after the time gives offset -1 / timestamp -1, not an error.
    offset, stamp = (found.offset, found.timestamp) if found is not None else (-1, -1)
    return web.json_response({"topic": tp.topic, "partition": tp.partition, "timestamp": stamp, "offset": offset,
                              "query": timestamp})


async def delete_records_handler(request: web.Request) -> web.Response:
    """Kafka's DeleteRecords: ``beforeOffset`` -1 means the high watermark."""
    state = state_of(request)
    tp = params.topic_partition(request)
    body = await params.json_object(request, 4096, allowed={"beforeOffset"}, required={"beforeOffset"})
    before = params.field_int(body, "beforeOffset", minimum=-1)
    low_watermark, segments = await state.broker.delete_records(tp, before)
    return web.json_response({"topic": tp.topic, "partition": tp.partition, "lowWatermark": low_watermark,
                              "segments": segments})
