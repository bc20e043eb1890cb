"""``LogStore`` over a ``stratalog serve`` endpoint (option ``url``).

For data the Spark machines cannot read as files (another host, a pod's
volume): every read is a fetch of raw v2 batches
(``Accept: application/vnd.kafka.record-batch``), every append a produce of
one raw batch, offsets come from ``/offsets`` and the partition summaries.
The server knows no segment layout over HTTP, so planning cuts a partition
by offsets, sized from its average bytes per offset. Only the standard
library is used: executors need nothing beyond the engine and PySpark.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stratalog.common.bearer import read_token_file
from stratalog.common.errors import CorruptRecordError, OffsetOutOfRangeError, StratalogError, UnknownTopicOrPartitionError
from stratalog.records import iter_batch_infos, parse_legacy_entry, validate_batch

from . import Appender, Chunk, DataLossHandler, PartitionOffsets

RECORD_BATCH = "application/vnd.kafka.record-batch"
FETCH_BYTES = 8 << 20
CHUNK_BYTES = 8 << 20  # planning granularity; planning groups chunks into tasks
TIMEOUT_S = 120.0
ATTEMPTS = 3
LEADER_HOPS = 3
# How long a request keeps trying the listed engines while none of them can answer for the
# partition (an engine down, a leader being elected): Kafka's default.api.timeout.ms.
FIND_LEADER_TIMEOUT_S = 60.0
# How long a read waits for offsets it was planned to read (they were below a high watermark)
# when the leader serving them has not reached them yet, as after a failover: Spark's
# kafkaConsumer.pollTimeoutMs (spark.network.timeout).
READ_STALL_TIMEOUT_S = 120.0
STALL_WAIT_MS = 500
# Answers that mean "no engine can serve this partition right now, and nothing was written".
RETRIABLE = frozenset({"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "BROKER_NOT_AVAILABLE"})


class HttpError(StratalogError):
    """An error answer of the server, with its Kafka error code."""

    def __init__(self, status: int, code: str, message: str, *, leader_url: str | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.leader_url = leader_url   # with NOT_LEADER_OR_FOLLOWER: where the partition's leader is


class NoEngineAnsweredError(StratalogError):
    """Every listed engine was down, or none could name a reachable leader, until the time ran out."""

    code = "LEADER_NOT_AVAILABLE"


class StalledReadError(StratalogError):
    """Offsets that were below the high watermark when planned never came from the leader."""

    code = "REQUEST_TIMED_OUT"


class HttpStore:
    """``url`` may list several engines, comma-separated (as Kafka clients take bootstrap servers):
    topics and partitions are the union of what they hold, and a partition's requests go to the
    first engine holding it, then on to its leader."""

    def __init__(self, url: str) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self.urls:
            raise ValueError("option 'url' names no engine")
        self.url = ",".join(self.urls)
        self._fetch_bytes: int | None = None
        # Engines with access control (docs/access.md): the driver's and executors' environment
        # names the token file and the CA, as for the CLI (spark.executorEnv.* on a cluster).
        self.token_file = os.environ.get("STRATALOG_TOKEN_FILE") or None
        self.ca_file = os.environ.get("STRATALOG_CA_FILE") or None
        self._context: ssl.SSLContext | None = None   # made on first use: an SSLContext does not pickle

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_context": None}

    def _ssl(self) -> ssl.SSLContext | None:
        if self.ca_file is not None and self._context is None:
            self._context = ssl.create_default_context(cafile=self.ca_file)
        return self._context

    def _authorization(self) -> dict[str, str]:
        return {} if self.token_file is None else {"Authorization": f"Bearer {read_token_file(self.token_file)}"}

    @property
    def fetch_bytes(self) -> int:
        """8 MiB per fetch, or the server's ``maxFetchBytes`` if it allows less."""
        if self._fetch_bytes is None:
            limits = self._json("/v1/status").get("limits", {})
            self._fetch_bytes = min(FETCH_BYTES, int(limits.get("maxFetchBytes", FETCH_BYTES)))
        return self._fetch_bytes

    # -- transport -----------------------------------------------------------------------------
    def _request(self, method: str, path: str, query: dict[str, Any] | None = None, *, body: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        """One request; sent on to the partition's leader when a replica that does not lead it says
        where the leader is (it wrote nothing, so a produce may follow too). Any agent of a
        replicated cluster is thus a starting point, and a failover is followed as it happens.

        An engine that is down, or a partition without a reachable leader, sends the request on to
        the next engine listed, round after round for up to ``FIND_LEADER_TIMEOUT_S``, as a Kafka
        client refreshes its metadata; a produce is sent again only when it was surely not written
        (the connection was refused, or the engine does not lead the partition)."""
        deadline = time.monotonic() + FIND_LEADER_TIMEOUT_S
        backoff = 0.1
        while True:
            retriable: Exception | None = None
            listed = list(self.urls)
            for i, start in enumerate(listed):
                try:
                    return self._request_following(start, method, path, query, body, headers)
                except HttpError as error:
                    if error.code in RETRIABLE:
                        retriable = error
                    elif error.code != "UNKNOWN_TOPIC_OR_PARTITION" or (i == len(listed) - 1 and not retriable):
                        raise   # "not here" sends the request on to the next engine listed
                except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                    if method != "GET" and not _refused(error):
                        raise   # a produce may have landed: not sent again
                    retriable = error
            if retriable is None:
                raise AssertionError("no engine listed")   # the constructor refuses an empty url
            if time.monotonic() + backoff > deadline:
                # Named here: urllib's own message names neither the request nor the engines.
                raise NoEngineAnsweredError(
                    f"{method} {path}: no engine of {self.url} could serve it for {FIND_LEADER_TIMEOUT_S:g}s; "
                    f"last: {retriable}") from retriable
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _last_resort(self, base: str) -> None:
        """An engine that could not be reached is tried last from now on, as long as it stays down."""
        if base in self.urls and len(self.urls) > 1:
            self.urls.remove(base)
            self.urls.append(base)

    def _request_following(self, base: str, method: str, path: str, query: dict[str, Any] | None,
                           body: bytes | None, headers: dict[str, str] | None) -> tuple[bytes, dict[str, str]]:
        first = base
        for hop in range(LEADER_HOPS + 1):
            try:
                return self._request_at(base, method, path, query, body, headers)
            except HttpError as error:
                if (hop == LEADER_HOPS or error.code != "NOT_LEADER_OR_FOLLOWER" or not error.leader_url
                        or error.leader_url == base):
                    raise
                base = error.leader_url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if base == first:
                    self._last_resort(base)   # not a leader it pointed to: the listed engine itself
                raise
        raise AssertionError("unreachable")

    def _request_at(self, base: str, method: str, path: str, query: dict[str, Any] | None, body: bytes | None,
                    headers: dict[str, str] | None) -> tuple[bytes, dict[str, str]]:
        url = base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        request = urllib.request.Request(url, data=body, method=method,
                                         headers={**(headers or {}), **self._authorization()})
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=self._ssl()) as response:
                    return response.read(), dict(response.headers.items())
            except urllib.error.HTTPError as error:
                raise _error(error) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                # A produce is not retried (it may have landed), nor a refused connection (the
                # engine is down: the caller goes on to the next one listed).
                if attempt == ATTEMPTS or method != "GET" or _refused(error):
                    raise
                time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    def _json(self, path: str, query: dict[str, Any] | None = None) -> Any:
        data, _ = self._request("GET", path, query, headers={"Accept": "application/json"})
        return json.loads(data)

    @staticmethod
    def _topic_path(topic: str, *rest: object) -> str:
        return "/v1/topics/" + "/".join(urllib.parse.quote(str(p), safe="") for p in (topic, *rest))

    # -- metadata ------------------------------------------------------------------------------
    def _each(self, path: str) -> list[Any]:
        """``path``'s JSON from every engine listed that has it (at least one, or the first error)."""
        found: list[Any] = []
        first_error: Exception | None = None
        for base in list(self.urls):
            try:
                data, _ = self._request_at(base, "GET", path, None, None, {"Accept": "application/json"})
            except HttpError as error:
                if error.code != "UNKNOWN_TOPIC_OR_PARTITION":
                    raise
                first_error = first_error or error
                continue
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                first_error = first_error or error   # an engine that is down: the others answer
                self._last_resort(base)
                continue
            found.append(json.loads(data))
        if not found and first_error is not None:
            raise first_error
        return found

    def topics(self) -> list[str]:
        return sorted({t["name"] for answer in self._each("/v1/topics") for t in answer["topics"]})

    def partitions(self, topic: str) -> list[int]:
        try:
            answers = self._each(self._topic_path(topic))
        except HttpError as error:
            if error.code == "UNKNOWN_TOPIC_OR_PARTITION":
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist on {self.url}") from None
            raise
        return sorted({p["partition"] for answer in answers for p in answer["partitions"]})

    def offsets(self, topic: str, partition: int, *, read_committed: bool = False) -> PartitionOffsets:
        summary = self._summary(topic, partition)
        end = summary["highWatermark"]
        if read_committed:   # the leader's last stable offset: ListOffsets latest, read_committed
            end = int(self._json(self._topic_path(topic, "partitions", partition, "offsets"),
                                 {"timestamp": -1, "isolation": "read_committed"})["offset"])
        return PartitionOffsets(summary["logStartOffset"], end)

    def _summary(self, topic: str, partition: int) -> Any:
        try:
            return self._json(self._topic_path(topic, "partitions", partition))
        except HttpError as error:
            if error.code == "UNKNOWN_TOPIC_OR_PARTITION":
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist on {self.url}") from None
            raise

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        found = self._json(self._topic_path(topic, "partitions", partition, "offsets"), {"timestamp": timestamp})
        return None if found["offset"] < 0 else int(found["offset"])

    def chunks(self, topic: str, partition: int, start: int, end: int) -> list[Chunk]:
        summary = self._summary(topic, partition)
        held = max(summary["logEndOffset"] - summary["logStartOffset"], 1)
        per_offset = max(summary["size"] / held, 1.0)
        step = max(int(CHUNK_BYTES / per_offset), 1)
        return [Chunk(low, min(low + step, end), int(per_offset * (min(low + step, end) - low)))
                for low in range(start, end, step)]

    # -- data ------------------------------------------------------------------------------------
    def read_batches(self, topic: str, partition: int, start: int, end: int,
                     on_data_loss: DataLossHandler) -> Iterator[bytes]:
        path = self._topic_path(topic, "partitions", partition, "records")
        position = start
        stalled_since: float | None = None
        while position < end:
            # [start, end) was below a high watermark when planned, so every offset in it was
            # committed: a leader that serves nothing at ``position`` has not reached it yet (a new
            # leader's high watermark trails the old one's for a fetch round), so wait for it.
            wait_ms = STALL_WAIT_MS if stalled_since is not None else None
            try:
                data, headers = self._request("GET", path, {"offset": position, "maxBytes": self.fetch_bytes,
                                                            "maxWaitMs": wait_ms},
                                              headers={"Accept": RECORD_BATCH})
            except HttpError as error:
                if error.code != "OFFSET_OUT_OF_RANGE":
                    raise
                available = self.offsets(topic, partition).log_start
                if position >= available:
                    raise OffsetOutOfRangeError(str(error)) from None
                on_data_loss(topic, partition, position, available)
                position = available
                continue
            before = position
            for info in iter_batch_infos(data, source=self.url):
                if info.last_offset < position:
                    continue
                if info.magic >= 2 and info.base_offset >= end:
                    return
                batch = data[info.position : info.position + info.size]
                if info.magic >= 2:
                    validate_batch(batch, 0, source=f"{self.url} {topic}-{partition}")
                else:
                    parse_legacy_entry(batch, 0, verify_crc=True, source=f"{self.url} {topic}-{partition}")
                yield batch
                position = info.last_offset + 1
                if position >= end:
                    return
            position = max(position, int(headers.get("X-Next-Offset", position)))
            if position > before:
                stalled_since = None
                continue
            now = time.monotonic()
            if stalled_since is None:
                stalled_since = now
            elif now - stalled_since > READ_STALL_TIMEOUT_S:
                raise StalledReadError(
                    f"{topic}-{partition}: offsets {position}..{end - 1} were below the high watermark when "
                    f"the read was planned, but {self.url} served nothing from offset {position} for "
                    f"{READ_STALL_TIMEOUT_S:g}s (its leader's high watermark never reached them)")

    @contextmanager
    def appender(self) -> Iterator[Appender]:
        def append(topic: str, partition: int, batch: bytes) -> tuple[int, int]:
            data, _ = self._request("POST", self._topic_path(topic, "partitions", partition, "records"),
                                    body=batch, headers={"Content-Type": RECORD_BATCH,
                                                         "Accept": "application/json"})
            result = json.loads(data)
            return int(result["baseOffset"]), int(result["lastOffset"])

        yield append


def _refused(error: Exception) -> bool:
    """The connection was refused: the request never reached an engine."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    return isinstance(reason, ConnectionRefusedError)


def _error(error: urllib.error.HTTPError) -> StratalogError:
    body = error.read()
    leader: Any = None
    try:
        parsed = json.loads(body)
        code, message = str(parsed.get("error_code")), str(parsed.get("message"))
        leader = parsed.get("leader")
    except (ValueError, AttributeError):
        code, message = "UNKNOWN_SERVER_ERROR", body[:200].decode("utf-8", "replace")
    if code == "CORRUPT_MESSAGE":
        return CorruptRecordError(0, message)
    leader_url = leader.get("url") if isinstance(leader, dict) and isinstance(leader.get("url"), str) else None
    return HttpError(error.code, code, message, leader_url=leader_url.rstrip("/") if leader_url else None)
