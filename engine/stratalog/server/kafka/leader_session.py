"""A follower's end of replication over the Kafka listener (Kafka's ``RemoteLeaderEndPoint``).

The follower's fetcher thread asks its leader, in one Fetch (v12, KIP-320's last fetched epoch)
with its broker id as replica id, for every partition it follows there, on one connection kept
open between rounds. Before the first request of a connection it authenticates with SASL
OAUTHBEARER when it has a token and the leader's ApiVersions offers SASL, as a Kafka client of a
SASL listener does; over TLS when the endpoint says so (``kafka+ssl://``). A partition answered
OFFSET_OUT_OF_RANGE is followed by ListOffsets (earliest and latest, as a replica: the leader's
log start and end) so that the follower can truncate to the leader's end or start again at its
start.

This is a client on a plain blocking socket: it runs on the fetcher's thread, not on the
engine's event loop. Any failure (refused, closed, garbled, timed out) closes the connection and
is raised as ``OSError``: the fetcher backs off and asks again on a new one. An error the leader
gives one partition is that partition's answer, as over HTTP.
"""

from __future__ import annotations

import itertools
import socket
import struct
import urllib.parse
from collections.abc import Sequence
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.list_offsets.v7.request import ListOffsetsRequest
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader

from stratalog.broker.partition import ReplicaFetch, ReplicaFetchResult
from stratalog.common.errors import StratalogError, error_for_code
from stratalog.common.names import TopicPartition
from stratalog.server.credentials import NO_CREDENTIALS, Credentials, TokenCache
from stratalog.server.kafka.compiled_writer import write_frame
from stratalog.server.kafka.frame_guard import check_frame

SCHEMES = {"kafka": False, "kafka+ssl": True}   # an endpoint's scheme → whether it is TLS
EARLIEST, LATEST = -2, -1
SASL_HANDSHAKE = 17       # its API key, offered in ApiVersions by a listener with access control
FINAL_EPOCH = -1          # a full fetch that opens no fetch session (KIP-227)
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def is_kafka_endpoint(endpoint: str) -> bool:
    return urllib.parse.urlsplit(endpoint).scheme in SCHEMES


class KafkaLeaderSession:
    """A follower's fetches from one leader's Kafka listener, every followed partition in one request."""

    def __init__(self, endpoint: str, credentials: Credentials = NO_CREDENTIALS, *, timeout_s: float = 60.0,
                 client_id: str = "stratalog-replica-fetcher") -> None:
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme not in SCHEMES or not parsed.hostname or parsed.port is None:
            raise ValueError(f"{endpoint!r}: a leader's Kafka endpoint is kafka://HOST:PORT or kafka+ssl://HOST:PORT")
        self.host, self.port, self.tls = parsed.hostname, parsed.port, SCHEMES[parsed.scheme]
        self.credentials = credentials
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._token = TokenCache(credentials)
        self._context = credentials.ssl_context() if self.tls else None
        self._sock: socket.socket | None = None
        self._correlation = itertools.count(1)

    def __call__(self, fetches: Sequence[tuple[TopicPartition, ReplicaFetch]], max_wait_ms: int, min_bytes: int,
                 max_bytes: int) -> list[ReplicaFetchResult | StratalogError]:
        if not fetches:
            return []
        # A connection the leader closed while it was idle fails on first use: one retry on a new
        # one (a fetch is a read: asking twice is harmless).
        for attempt in (1, 2):
            reused = self._sock is not None
            try:
                return self._fetch(fetches, max_wait_ms, min_bytes, max_bytes)
            except StratalogError:
                raise
            except Exception as error:   # noqa: BLE001 - kio's readers raise what the bytes provoke
                self.close()
                if isinstance(error, OSError) and reused and attempt == 1:
                    continue
                raise OSError(f"replica fetch from {self.host}:{self.port}: {type(error).__name__}: {error}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _fetch(self, fetches: Sequence[tuple[TopicPartition, ReplicaFetch]], max_wait_ms: int, min_bytes: int,
               max_bytes: int) -> list[ReplicaFetchResult | StratalogError]:
        response = self._call(FetchRequest, _fetch_request(fetches, max_wait_ms, min_bytes, max_bytes), FetchResponse,
                              extra_timeout_s=max_wait_ms / 1000)
        answers = {(topic.topic, p.partition_index): p for topic in response.responses for p in topic.partitions}
        out: list[ReplicaFetchResult | StratalogError] = []
        for tp, fetch in fetches:
            data = answers.get((tp.topic, tp.partition))
            if data is None:
                raise ValueError(f"no answer for {tp}")
            out.append(self._result(tp, fetch, data))
        return out

    # -- answers -----------------------------------------------------------------------------
    def _result(self, tp: TopicPartition, fetch: ReplicaFetch, data: Any) -> ReplicaFetchResult | StratalogError:
        code = ErrorCode(data.error_code)
        if code is ErrorCode.offset_out_of_range:
            try:
                start, end = (self._list_offset(tp, fetch, ts) for ts in (EARLIEST, LATEST))
            except StratalogError as error:   # the leadership moved meanwhile: this partition only
                return error
            return ReplicaFetchResult(b"", data.high_watermark, start, end, out_of_range=True)
        if code is not ErrorCode.none:
            return _error(code, f"replica fetch of {tp} from {self.host}:{self.port}")
        diverging = data.diverging_epoch
        return ReplicaFetchResult(
            bytes(data.records or b""), data.high_watermark, data.log_start_offset, -1,
            (diverging.epoch, diverging.end_offset) if diverging is not None and diverging.epoch >= 0 else None)

    def _list_offset(self, tp: TopicPartition, fetch: ReplicaFetch, timestamp: int) -> int:
        request = {"replica_id": fetch.replica_id, "isolation_level": 0, "topics": [{
            "name": tp.topic, "partitions": [{"partition_index": tp.partition,
                                              "current_leader_epoch": fetch.current_leader_epoch,
                                              "timestamp": timestamp}]}]}
        response = self._call(ListOffsetsRequest, request, ListOffsetsResponse)
        partition = response.topics[0].partitions[0]
        code = ErrorCode(partition.error_code)
        if code is not ErrorCode.none:
            raise _error(code, f"ListOffsets of {tp} from {self.host}:{self.port}")
        return int(partition.offset)

    # -- the connection ----------------------------------------------------------------------
    def _call(self, request_class: Any, values: dict[str, Any], response_class: Any, *,
              extra_timeout_s: float = 0.0) -> Any:
        sock = self._sock if self._sock is not None else self._connect()
        sock.settimeout(self.timeout_s + extra_timeout_s)
        correlation_id = next(self._correlation)
        sock.sendall(b"".join(write_frame(request_class.__header_schema__, {
            "request_api_key": request_class.__api_key__, "request_api_version": request_class.__version__,
            "correlation_id": correlation_id, "client_id": self.client_id}, request_class, values)))
        frame = _read_frame(sock)
        # Lengths first: kio's reader aborts the process on an array too long to allocate.
        check_frame(response_class, frame, check_frame(response_class.__header_schema__, frame))
        header, used = entity_reader(response_class.__header_schema__)(frame, 0)
        if header.correlation_id != correlation_id:
            raise ValueError(f"the answer is to request {header.correlation_id}, not {correlation_id}")
        response, size = entity_reader(response_class)(frame, used)
        if used + size != len(frame):
            raise ValueError(f"{len(frame) - used - size} bytes follow the answer")
        return response

    def _connect(self) -> socket.socket:
        token = self._token.token()
        if token is not None:
            self.credentials.require_tls_for_token(self.tls, f"{self.host}:{self.port} (kafka)")
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._context is not None:
            sock = self._context.wrap_socket(sock, server_hostname=self.host)
        self._sock = sock
        if token is not None:
            self._authenticate(token)
        return sock

    def _authenticate(self, token: str) -> None:
        versions = self._call(ApiVersionsRequest, {"client_software_name": "stratalog",
                                                   "client_software_version": "replica-fetcher"}, ApiVersionsResponse)
        if SASL_HANDSHAKE not in {key.api_key for key in versions.api_keys}:
            return   # a leader without access control offers no SASL: the token is not needed there
        handshake = self._call(SaslHandshakeRequest, {"mechanism": "OAUTHBEARER"}, SaslHandshakeResponse)
        if handshake.error_code != ErrorCode.none:
            raise ValueError(f"SASL handshake: {ErrorCode(handshake.error_code).name.upper()} "
                             f"(the leader offers {list(handshake.mechanisms)})")
        message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        answer = self._call(SaslAuthenticateRequest, {"auth_bytes": message}, SaslAuthenticateResponse)
        if answer.error_code != ErrorCode.none:
            raise ValueError(f"SASL authentication: {answer.error_message or ErrorCode(answer.error_code).name}")


def _error(code: ErrorCode, what: str) -> StratalogError:
    name = code.name.upper()
    return error_for_code(name)(f"{what}: {name}")


def _fetch_request(fetches: Sequence[tuple[TopicPartition, ReplicaFetch]], max_wait_ms: int, min_bytes: int,
                   max_bytes: int) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, fetch in fetches:
        by_topic.setdefault(tp.topic, []).append({
            "partition": tp.partition, "current_leader_epoch": fetch.current_leader_epoch,
            "fetch_offset": fetch.fetch_offset, "last_fetched_epoch": fetch.last_fetched_epoch,
            "log_start_offset": -1, "partition_max_bytes": fetch.max_bytes})
    return {
        "replica_id": fetches[0][1].replica_id, "max_wait": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": FINAL_EPOCH,
        "topics": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()],
        "forgotten_topics_data": [], "rack_id": ""}


def _read_frame(sock: socket.socket) -> memoryview:
    (size,) = struct.unpack(">i", _read_exactly(sock, 4))
    if not 0 <= size <= MAX_RESPONSE_BYTES:
        raise ValueError(f"an answer of {size} bytes")
    return memoryview(_read_exactly(sock, size)).toreadonly()   # kio reads read-only buffers


def _read_exactly(sock: socket.socket, n: int) -> bytearray:
    buffer = bytearray(n)
    view = memoryview(buffer)
    got = 0
    while got < n:
        read = sock.recv_into(view[got:], n - got)
        if not read:
            raise ConnectionResetError(f"the leader closed the connection after {got} of {n} bytes")
        got += read
    return buffer
