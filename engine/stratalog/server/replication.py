"""Replication over HTTP: the controller's LeaderAndIsr in, followers' fetches out, and their clients.

* ``PUT /v1/replication/partitions/{topic}/{partition}``: the controller's word on one partition
  (replicas, leader, leader epoch, ISR, partition epoch, every replica's API endpoint and, where
  followers fetch elsewhere, its fetch endpoint: ``kafka://`` for its Kafka listener).
* ``POST /v1/replication/fetch``: a follower's fetch of every partition it follows on this leader,
  in one request (what followers use; the answer's framing is at ``replica_fetch_many``).
* ``GET /v1/replication/partitions/{topic}/{partition}/fetch``: one partition's fetch (replicaId,
  fetchOffset, lastFetchedEpoch, currentLeaderEpoch, maxBytes, maxWaitMs, minBytes). The body is whole
  batches as the leader wrote them; the high watermark, log start and end offsets and, on
  divergence, ``X-Diverging-Epoch: <epoch>:<end offset>`` travel as headers.

``LeaderSession`` and ``ControllerClient`` are the other ends (a follower's fetcher; a leader's
AlterPartition), over plain keep-alive HTTP/1.1 from the standard library, since they run on
fetcher threads rather than on the event loop.
"""

from __future__ import annotations

import http.client
import json
import struct
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from stratalog.broker.partition import ReplicaFetch, ReplicaFetchResult
from stratalog.broker.replica_state import PartitionState
from stratalog.common.errors import StratalogError, error_for_code
from stratalog.common.limits import INT32_MAX, INT64_MAX
from stratalog.common.names import TopicPartition, validate_topic_name
from stratalog.server import params
from stratalog.server.credentials import NO_CREDENTIALS, Credentials, TokenCache
from stratalog.server.errors import RequestError
from stratalog.server.state import state_of

BATCHES = params.RECORD_BATCH


def _int_list(obj: dict[str, Any], name: str) -> tuple[int, ...]:
    value = obj.get(name)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RequestError(f"body: {name!r} must be a list of broker ids")
    return tuple(value)


async def put_partition_state(request: web.Request) -> web.Response:
    state = state_of(request)
    replicas = state.broker.replicas
    if replicas is None:
        raise RequestError("this engine takes no part in replication: start it with --broker-id", status=409)
    if not state.settings.partition_state_over_http:
        # An agent takes partition state from the Topic's status only: over HTTP, a holder of the
        # replicate verb could point followers (and their tokens) at an address of its choosing.
        raise RequestError("this engine takes partition state from its controller's records, not over HTTP",
                           status=409)
    tp = TopicPartition(params.topic(request), params.partition(request))
    body = params.parse_json(await request.read())
    if not isinstance(body, dict):
        raise RequestError("body: expected a JSON object")
    partition_state = PartitionState(
        replicas=_int_list(body, "replicas"),
        leader=params.field_int(body, "leader", minimum=-1, maximum=INT32_MAX) or 0,
        leader_epoch=params.field_int(body, "leaderEpoch", minimum=0, maximum=INT32_MAX) or 0,
        isr=_int_list(body, "isr"),
        partition_epoch=params.field_int(body, "partitionEpoch", minimum=0, maximum=INT32_MAX) or 0,
    )
    endpoints = _endpoints(body, "endpoints")
    fetch_endpoints = _endpoints(body, "fetchEndpoints")
    partition = await state.run(replicas.apply_state, tp, partition_state, endpoints, fetch_endpoints)
    state.topics_changed()
    return web.json_response({"topic": tp.topic, "partition": tp.partition, "leader": partition_state.leader,
                              "leaderEpoch": partition_state.leader_epoch, "isLeader": partition.is_leader,
                              "logEndOffset": partition.log.log_end_offset,
                              "highWatermark": partition.log.high_watermark})


def _endpoints(body: dict[str, Any], name: str) -> dict[int, str]:
    field = body.get(name) or {}
    if not isinstance(field, dict):
        raise RequestError(f"body: {name!r} must map broker ids to URLs")
    try:
        return {int(k): str(v) for k, v in field.items()}
    except ValueError:
        raise RequestError(f"body: {name!r} must map broker ids (integers) to URLs") from None


async def replica_fetch(request: web.Request) -> web.Response:
    state = state_of(request)
    tp = TopicPartition(params.topic(request), params.partition(request))

    def query(name: str, minimum: int, maximum: int = INT64_MAX) -> int:
        value = params.query_int(request, name, None, minimum=minimum, maximum=maximum)
        if value is None:
            raise RequestError(f"query parameter {name!r} is required")
        return value

    fetch = ReplicaFetch(query("replicaId", 0, INT32_MAX), query("fetchOffset", 0),
                         query("lastFetchedEpoch", -1, INT32_MAX), query("currentLeaderEpoch", -1, INT32_MAX),
                         query("maxBytes", 0, INT32_MAX))
    max_wait = params.query_int(request, "maxWaitMs", 0, minimum=0, maximum=state.settings.max_fetch_wait_ms) or 0
    min_bytes = params.query_int(request, "minBytes", 1, minimum=1, maximum=INT32_MAX) or 1
    result = await state.broker.replica_fetch(tp, fetch, max_wait, min_bytes)
    headers = {"X-High-Watermark": str(result.high_watermark), "X-Log-Start-Offset": str(result.log_start_offset),
               "X-Log-End-Offset": str(result.log_end_offset)}
    if result.diverging_epoch is not None:
        headers["X-Diverging-Epoch"] = "%d:%d" % result.diverging_epoch
    if result.out_of_range:
        headers["X-Out-Of-Range"] = "true"
    return web.Response(body=result.data, content_type=BATCHES, headers=headers)


# A many-partition fetch's answer: a 4-byte big-endian length, a JSON list with one entry per partition
# (its marks and data size, or its error), then each partition's data in the same order.
REPLICA_FETCH = "application/vnd.stratalog.replica-fetch"
_HEADER_LENGTH = struct.Struct(">I")


async def replica_fetch_many(request: web.Request) -> web.Response:
    """``POST /v1/replication/fetch``: a follower's fetch of every partition it follows here, in one request."""
    state = state_of(request)
    if state.broker.replicas is None:
        raise RequestError("this engine takes no part in replication: start it with --broker-id", status=409)
    body = params.parse_json(await request.read())
    if not isinstance(body, dict) or not isinstance(body.get("partitions"), list):
        raise RequestError("body: expected a JSON object with a 'partitions' list")
    replica_id = params.field_int(body, "replicaId", minimum=0, maximum=INT32_MAX)
    max_wait = params.field_int(body, "maxWaitMs", 0, minimum=0, maximum=state.settings.max_fetch_wait_ms)
    min_bytes = params.field_int(body, "minBytes", 1, minimum=1, maximum=INT32_MAX)
    max_bytes = params.field_int(body, "maxBytes", INT32_MAX, minimum=0, maximum=INT32_MAX)
    fetches = []
    for i, entry in enumerate(body["partitions"]):
        if not isinstance(entry, dict):
            raise RequestError(f"body: partitions[{i}] must be an object")
        topic, at = entry.get("topic"), f"partitions[{i}]."
        if not isinstance(topic, str):
            raise RequestError(f"body field '{at}topic': expected a topic name")
        tp = TopicPartition(validate_topic_name(topic),
                            params.field_int(entry, "partition", minimum=0, maximum=INT32_MAX, within=at))
        fetches.append((tp, ReplicaFetch(
            replica_id, params.field_int(entry, "fetchOffset", minimum=0, within=at),
            params.field_int(entry, "lastFetchedEpoch", -1, minimum=-1, maximum=INT32_MAX, within=at),
            params.field_int(entry, "currentLeaderEpoch", -1, minimum=-1, maximum=INT32_MAX, within=at),
            params.field_int(entry, "maxBytes", INT32_MAX, minimum=0, maximum=INT32_MAX, within=at))))
    answers = await state.broker.replica_fetch_many(fetches, max_wait, min_bytes, max_bytes)
    header: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for (tp, _), answer in zip(fetches, answers):
        entry = {"topic": tp.topic, "partition": tp.partition}
        if isinstance(answer, StratalogError):
            entry.update(error_code=answer.code, message=str(answer))
            header.append(entry)
            continue
        entry.update(highWatermark=answer.high_watermark, logStartOffset=answer.log_start_offset,
                     logEndOffset=answer.log_end_offset, size=len(answer.data),
                     divergingEpoch=list(answer.diverging_epoch) if answer.diverging_epoch else None,
                     outOfRange=answer.out_of_range)
        header.append(entry)
        blobs.append(bytes(answer.data))
    encoded = json.dumps(header).encode()
    return web.Response(body=b"".join([_HEADER_LENGTH.pack(len(encoded)), encoded, *blobs]),
                        content_type=REPLICA_FETCH)


# -- clients (on fetcher threads) ----------------------------------------------------------------
def _raise_for(status: int, body: bytes, what: str) -> None:
    try:
        payload = json.loads(body)
        code, message = payload["error_code"], payload["message"]
    except (ValueError, KeyError, TypeError):
        raise OSError(f"{what}: HTTP {status}: {body[:200]!r}") from None
    raise error_for_code(code)(f"{what}: {message}")


class _Http:
    """One keep-alive connection, reopened after any failure; used by one thread at a time."""

    def __init__(self, base_url: str, timeout_s: float, credentials: Credentials = NO_CREDENTIALS) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        self.tls = parsed.scheme == "https"
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or (443 if self.tls else 80)
        self.timeout_s = timeout_s
        self.credentials = credentials
        self._context = credentials.ssl_context() if self.tls else None
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._token = TokenCache(credentials)

    def _authorization(self) -> dict[str, str]:
        self.credentials.require_tls_for_token(self.tls, f"{self.host}:{self.port} (http)")
        token = self._token.token()
        return {} if token is None else {"Authorization": f"Bearer {token}"}

    def _connect(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s, context=self._context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        with self._lock:
            # A kept-alive connection the server has closed while idle fails on first use: one
            # retry on a new connection. (Safe for AlterPartition too: it is a compare-and-swap.)
            reused = self._conn is not None
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connect()
                try:
                    self._conn.request(method, path, body=body,
                                       headers={**(headers or {}), **self._authorization()})
                    response = self._conn.getresponse()
                    response.data = response.read()  # type: ignore[attr-defined]
                    return response
                except (OSError, http.client.HTTPException) as error:
                    self._conn.close()
                    self._conn = None
                    if attempt == 1 and reused:
                        continue
                    raise OSError(f"{method} {self.host}:{self.port}{path}: {error}") from None
            raise AssertionError("unreachable")


class LeaderSession:
    """A follower's fetches from one leader's engine, every followed partition in one request."""

    def __init__(self, leader_url: str, credentials: Credentials = NO_CREDENTIALS) -> None:
        self.http = _Http(leader_url, timeout_s=60, credentials=credentials)
        self.base_path = urllib.parse.urlsplit(leader_url).path.rstrip("/")

    def __call__(self, fetches: Sequence[tuple[TopicPartition, ReplicaFetch]], max_wait_ms: int, min_bytes: int,
                 max_bytes: int) -> list[ReplicaFetchResult | StratalogError]:
        if not fetches:
            return []
        body = json.dumps({
            "replicaId": fetches[0][1].replica_id, "maxWaitMs": max_wait_ms, "minBytes": min_bytes,
            "maxBytes": max_bytes,
            "partitions": [{"topic": tp.topic, "partition": tp.partition, "fetchOffset": f.fetch_offset,
                            "lastFetchedEpoch": f.last_fetched_epoch, "currentLeaderEpoch": f.current_leader_epoch,
                            "maxBytes": f.max_bytes} for tp, f in fetches]}).encode()
        response = self.http.request("POST", self.base_path + "/v1/replication/fetch", body,
                                     {"Content-Type": "application/json"})
        data: bytes = response.data  # type: ignore[attr-defined]
        if response.status != 200:
            _raise_for(response.status, data, f"replica fetch of {len(fetches)} partition(s)")
        try:
            return _parse_fetch_answer(data, len(fetches))
        except (ValueError, KeyError, TypeError, IndexError, struct.error) as error:
            # A garbled answer (a proxy's page, a cut connection) is the leader being unreachable
            # for this round: the fetcher backs off and asks again, it never dies of it.
            raise OSError(f"replica fetch from {self.http.host}:{self.http.port}: malformed answer "
                          f"({len(data)} bytes): {error}") from None


def _parse_fetch_answer(data: bytes, expected: int) -> list[ReplicaFetchResult | StratalogError]:
    (length,) = _HEADER_LENGTH.unpack_from(data, 0)
    header = json.loads(data[_HEADER_LENGTH.size:_HEADER_LENGTH.size + length])
    if not isinstance(header, list) or len(header) != expected:
        raise ValueError(f"{len(header) if isinstance(header, list) else 'no'} answers for {expected} partitions")
    position = _HEADER_LENGTH.size + length
    out: list[ReplicaFetchResult | StratalogError] = []
    for entry in header:
        if "error_code" in entry:
            out.append(error_for_code(entry["error_code"])(entry["message"]))
            continue
        size = int(entry["size"])
        if position + size > len(data):
            raise ValueError(f"{entry.get('topic')}-{entry.get('partition')}: {size} bytes announced, "
                             f"{len(data) - position} left")
        diverging = entry.get("divergingEpoch")
        out.append(ReplicaFetchResult(
            data[position:position + size], int(entry["highWatermark"]), int(entry["logStartOffset"]),
            int(entry["logEndOffset"]), (int(diverging[0]), int(diverging[1])) if diverging else None,
            bool(entry.get("outOfRange"))))
        position += size
    return out


class ControllerClient:
    """AlterPartition to a controller reached over HTTP (``POST <url>/alter-partition``)."""

    def __init__(self, controller_url: str) -> None:
        self.http = _Http(controller_url, timeout_s=30)
        self.base_path = urllib.parse.urlsplit(controller_url).path.rstrip("/")

    def alter_partition(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
                        partition_epoch: int) -> PartitionState:
        body = json.dumps({"topic": tp.topic, "partition": tp.partition, "leader": leader,
                           "leaderEpoch": leader_epoch, "isr": list(isr), "partitionEpoch": partition_epoch})
        response = self.http.request("POST", self.base_path + "/alter-partition", body.encode(),
                                     {"Content-Type": "application/json"})
        data: bytes = response.data  # type: ignore[attr-defined]
        if response.status != 200:
            _raise_for(response.status, data, f"AlterPartition of {tp}")
        state = json.loads(data)
        return PartitionState(tuple(state["replicas"]), state["leader"], state["leaderEpoch"], tuple(state["isr"]),
                              state["partitionEpoch"])
