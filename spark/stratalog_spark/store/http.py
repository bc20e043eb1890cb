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
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stratalog.common.errors import CorruptRecordError, OffsetOutOfRangeError, StratalogError, UnknownTopicOrPartitionError
from stratalog.records import iter_batch_infos, parse_legacy_entry, validate_batch

from . import Appender, Chunk, DataLossHandler, PartitionOffsets

RECORD_BATCH = "application/vnd.kafka.record-batch"
FETCH_BYTES = 8 << 20
CHUNK_BYTES = 8 << 20  # planning granularity; planning groups chunks into tasks
TIMEOUT_S = 120.0
ATTEMPTS = 3
LEADER_HOPS = 3


class HttpError(StratalogError):
    """An error answer of the server, with its Kafka error code."""

    def __init__(self, status: int, code: str, message: str, *, leader_url: str | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.leader_url = leader_url   # with NOT_LEADER_OR_FOLLOWER: where the partition's leader is


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
        replicated cluster is thus a starting point, and a failover is followed as it happens."""
        for i, start in enumerate(self.urls):
            try:
                return self._request_following(start, method, path, query, body, headers)
            except HttpError as error:
                if error.code != "UNKNOWN_TOPIC_OR_PARTITION" or i == len(self.urls) - 1:
                    raise   # only "not here" sends the request on to the next engine listed
        raise AssertionError("unreachable")

    def _request_following(self, base: str, method: str, path: str, query: dict[str, Any] | None,
                           body: bytes | None, headers: dict[str, str] | None) -> tuple[bytes, dict[str, str]]:
        for _ in range(LEADER_HOPS):
            try:
                return self._request_at(base, method, path, query, body, headers)
            except HttpError as error:
                if error.code != "NOT_LEADER_OR_FOLLOWER" or not error.leader_url or error.leader_url == base:
                    raise
                base = error.leader_url
        return self._request_at(base, method, path, query, body, headers)

    def _request_at(self, base: str, method: str, path: str, query: dict[str, Any] | None, body: bytes | None,
                    headers: dict[str, str] | None) -> tuple[bytes, dict[str, str]]:
        url = base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                    return response.read(), dict(response.headers.items())
            except urllib.error.HTTPError as error:
                raise _error(error) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if attempt == ATTEMPTS or method != "GET":  # a produce is not retried: it may have landed
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
        found, first_error = [], None
        for base in self.urls:
            try:
                data, _ = self._request_at(base, "GET", path, None, None, {"Accept": "application/json"})
            except HttpError as error:
                if error.code != "UNKNOWN_TOPIC_OR_PARTITION":
                    raise
                first_error = first_error or error
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

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        summary = self._summary(topic, partition)
        return PartitionOffsets(summary["logStartOffset"], summary["highWatermark"])

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
        while position < end:
            try:
                data, headers = self._request("GET", path, {"offset": position, "maxBytes": self.fetch_bytes},
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
            if not data:
                return  # nothing more below the high watermark
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
            if position == before:
                return  # the server had nothing past what we asked for

    @contextmanager
    def appender(self) -> Iterator[Appender]:
        def append(topic: str, partition: int, batch: bytes) -> tuple[int, int]:
            data, _ = self._request("POST", self._topic_path(topic, "partitions", partition, "records"),
                                    body=batch, headers={"Content-Type": RECORD_BATCH,
                                                         "Accept": "application/json"})
            result = json.loads(data)
            return int(result["baseOffset"]), int(result["lastOffset"])

        yield append


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
