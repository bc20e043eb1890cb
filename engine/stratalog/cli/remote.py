"""A small client of ``stratalog serve`` for the CLI's ``--server URL`` mode.

Standard library only (``urllib.request``): the CLI must keep working where
the server extra (aiohttp) is not installed. An error answer of the server
becomes a ``RemoteError`` carrying the server's Kafka error code, so
``stratalog ... --server`` reports failures exactly as the local mode does
(``error: CODE: message``, exit 1); a server that cannot be reached is
``NETWORK_EXCEPTION``, Kafka's name for it. A server still starting -- one that refuses the
connection, or answers 503 BROKER_NOT_AVAILABLE while it opens its directories -- is tried again for
``--wait-for-server`` seconds first, as a Kafka client keeps trying its bootstrap servers and
retries a broker not yet available: nothing was done with the request, so it may be sent again.

Against a server with access control, ``STRATALOG_TOKEN_FILE`` names a file holding the bearer
token to present and ``STRATALOG_CA_FILE`` the CA of an https server's certificate.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from stratalog.common.bearer import read_token_file
from stratalog.common.errors import StratalogError

JSON = "application/json"
RECORD_BATCH = "application/vnd.kafka.record-batch"
MAX_LEADER_HOPS = 3
WAIT_FOR_SERVER_S = 10.0       # --wait-for-server's default
_BACKOFF_S = (0.05, 1.0)       # the first wait after a refused connection, and the longest (Kafka's reconnect.backoff)


class RemoteError(StratalogError):
    def __init__(self, code: str, message: str, status: int | None = None, *, leader_url: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.leader_url = leader_url   # where the partition's leader is, when a follower said so


TOKEN_FILE_ENV = "STRATALOG_TOKEN_FILE"   # a bearer token to present (e.g. a projected ServiceAccount token)
CA_FILE_ENV = "STRATALOG_CA_FILE"         # the CA an https server's certificate must chain to


class Client:
    def __init__(self, base_url: str, *, timeout: float = 60.0, wait_for_server: float = 0.0,
                 token_file: str | None = None, ca_file: str | None = None) -> None:
        """``wait_for_server``: how long a server still starting is tried again (0: not at all)."""
        if "://" not in base_url:
            base_url = "http://" + base_url
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.wait_for_server = wait_for_server
        self.token_file = token_file or os.environ.get(TOKEN_FILE_ENV) or None
        ca = ca_file or os.environ.get(CA_FILE_ENV) or None
        self._context = ssl.create_default_context(cafile=ca) if ca else None

    def _authorization(self) -> str | None:
        return None if self.token_file is None else f"Bearer {read_token_file(self.token_file)}"

    def url(self, path: str, query: dict[str, object] | None = None) -> str:
        url = self.base_url + path
        if query:
            pairs = {k: _query_value(v) for k, v in query.items() if v is not None}
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        return url

    def request(self, method: str, path: str, *, query: dict[str, object] | None = None, body: bytes | None = None,
                content_type: str | None = None, accept: str = JSON, timeout: float | None = None
                ) -> tuple[int, dict[str, str], bytes]:
        """One request; a follower's NOT_LEADER_OR_FOLLOWER naming the leader is followed there (a few
        hops at most, as a Kafka client follows KIP-951's current leader). Nothing was written by the
        follower that refused, so sending the same request to the leader is safe."""
        base = self.base_url
        for _ in range(MAX_LEADER_HOPS):
            try:
                return self._request_at(base, method, path, query, body, content_type, accept, timeout)
            except RemoteError as error:
                if error.code != "NOT_LEADER_OR_FOLLOWER" or not error.leader_url or error.leader_url == base:
                    raise
                base = error.leader_url
        return self._request_at(base, method, path, query, body, content_type, accept, timeout)

    def _request_at(self, base: str, method: str, path: str, query: dict[str, object] | None, body: bytes | None,
                    content_type: str | None, accept: str, timeout: float | None) -> tuple[int, dict[str, str], bytes]:
        url = base + self.url(path, query)[len(self.base_url):]
        request = urllib.request.Request(url, data=body, method=method)
        request.add_header("Accept", accept)
        if content_type is not None:
            request.add_header("Content-Type", content_type)
        authorization = self._authorization()
        if authorization is not None:
            request.add_header("Authorization", authorization)
        waiting_until: float | None = None
        backoff = _BACKOFF_S[0]
        while True:
            try:
                return self._send(base, request, timeout)
            except _NotYet as not_yet:
                now = time.monotonic()
                if waiting_until is None:
                    waiting_until = now + self.wait_for_server
                    if self.wait_for_server > 0:
                        print(f"stratalog: {base} {not_yet.what}; trying again for up to "
                              f"{self.wait_for_server:g} s (--wait-for-server)", file=sys.stderr, flush=True)
                if now >= waiting_until:
                    raise not_yet.error(f" (waited {self.wait_for_server:g} s: --wait-for-server)"
                                        if self.wait_for_server > 0 else "") from None
                time.sleep(min(backoff, waiting_until - now))
                backoff = min(backoff * 2, _BACKOFF_S[1])

    def _send(self, base: str, request: urllib.request.Request, timeout: float | None
              ) -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout if timeout is None else timeout,
                                        context=self._context) as response:
                return response.status, dict(response.headers.items()), response.read()
        except urllib.error.HTTPError as error:
            raw = error.read()
            leader_url = None
            try:
                payload = json.loads(raw)
                code, message = str(payload["error_code"]), str(payload["message"])
                leader = payload.get("leader")
                if isinstance(leader, dict) and isinstance(leader.get("url"), str):
                    leader_url = leader["url"].rstrip("/")
            except (ValueError, KeyError, TypeError, AttributeError):
                code, message = "UNKNOWN_SERVER_ERROR", raw.decode("utf-8", "replace")[:500] or str(error)
            if error.code == 503 and code == "BROKER_NOT_AVAILABLE":   # refused before anything was done
                raise _NotYet("is not ready", code, message, error.code) from None
            raise RemoteError(code, message, error.code, leader_url=leader_url) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, ConnectionRefusedError):
                raise _NotYet("refused the connection", "NETWORK_EXCEPTION",
                              f"cannot reach {base}: the connection was refused", None) from None
            raise RemoteError("NETWORK_EXCEPTION", f"cannot reach {base}: {reason}") from None

    def json(self, method: str, path: str, *, query: dict[str, object] | None = None, body: Any = None,
             timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        _, _, raw = self.request(method, path, query=query, body=data,
                                 content_type=JSON if data is not None else None, timeout=timeout)
        return json.loads(raw)

    def produce_batch(self, topic: str, partition: int, batch: bytes, *, fsync: bool) -> Any:
        _, _, raw = self.request("POST", f"/v1/topics/{_quote(topic)}/partitions/{partition}/records",
                                 query={"acks": "all" if fsync else "1"}, body=batch, content_type=RECORD_BATCH)
        return json.loads(raw)


class _NotYet(Exception):
    """A server still starting: it refused the connection, so nothing of the request was sent, or it
    answered 503 BROKER_NOT_AVAILABLE before doing anything (``server/gate.py``: the engine is still
    opening its directories). Either way the same request may be sent again."""

    def __init__(self, what: str, code: str, message: str, status: int | None) -> None:
        super().__init__(what)
        self.what, self.code, self.message, self.status = what, code, message, status

    def error(self, waited: str) -> RemoteError:
        """The error the command reports once it has waited long enough (``status``: the HTTP one, if any)."""
        return RemoteError(self.code, self.message + waited, self.status)


def client_for(args: Any, *, timeout: float = 60.0) -> Client:
    """The client of the server a command's ``--server`` names, with its ``--wait-for-server``."""
    return Client(args.server, timeout=timeout, wait_for_server=args.wait_for_server)


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_path(topic: str, *rest: object) -> str:
    return "/".join([f"/v1/topics/{_quote(topic)}", *(str(r) for r in rest)]).rstrip("/")


def check_local_only(args: Any, *names: str) -> None:
    """Refuse local-only options given together with --server."""
    for name in names:
        value = getattr(args, name, None)
        if value:
            flag = "--" + name.replace("_", "-")
            raise SystemExit(f"stratalog {args.command}: {flag} applies to local directories; the server at "
                             f"{args.server} uses its own settings")
