"""Three real ``stratalog serve`` processes replicating on loopback, and a test controller.

The controller is the engine's own ``InProcessController`` behind a small HTTP server in the test
process (``POST /alter-partition``), pushing each new partition state to every engine
(``PUT /v1/replication/partitions/...``) from one background thread, in order. Pushing from
another thread matters: a leader's AlterPartition must not wait for a push back to itself.
Leases do not exist here (that is part 2, the operator); the test tells the controller which
engine it killed, as a lapsed lease would.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from server_harness import Server
from stratalog.broker.controller import InProcessController
from stratalog.broker.replica_state import PartitionState
from stratalog.common.errors import StratalogError
from stratalog.common.names import TopicPartition


class ClusterController:
    """The in-process controller, reachable over HTTP by the engines."""

    def __init__(self, *, ca: Path | None = None, token: str | None = None) -> None:
        """``ca`` and ``token``: engines with TLS and access control (the token needs ``replicate``)."""
        self.controller = InProcessController()
        self.endpoints: dict[int, str] = {}               # each engine's HTTP API: where states are pushed
        self.replication_endpoints: dict[int, str] = {}   # where followers fetch, if not there (kafka://)
        self._pushes: queue.Queue[tuple[TopicPartition, PartitionState] | None] = queue.Queue()
        self.controller.subscribe(lambda tp, state: self._pushes.put((tp, state)))
        self.session = requests.Session()
        if ca is not None:
            self.session.verify, self.session.trust_env = str(ca), False
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    state = owner.controller.alter_partition(
                        TopicPartition(body["topic"], body["partition"]), body["leader"], body["leaderEpoch"],
                        tuple(body["isr"]), body["partitionEpoch"])
                except StratalogError as error:
                    self._reply(409, {"error_code": error.code, "message": str(error)})
                    return
                self._reply(200, _state_json(state))

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self._pusher = threading.Thread(target=self._push_loop, daemon=True)
        self._pusher.start()

    def _push_loop(self) -> None:
        while (item := self._pushes.get()) is not None:
            tp, state = item
            for broker in state.replicas:
                self.push(broker, tp, state)
            self._pushes.task_done()

    def push(self, broker: int, tp: TopicPartition, state: PartitionState | None = None) -> bool:
        """LeaderAndIsr to one engine; False if it is down (it gets the state when it is back)."""
        url = self.endpoints.get(broker)
        if url is None:
            return False
        state = state or self.controller.state(tp)
        body = {**_state_json(state), "endpoints": {str(b): u for b, u in self.endpoints.items()},
                "fetchEndpoints": {str(b): u for b, u in self.replication_endpoints.items()}}
        try:
            reply = self.session.put(f"{url}/v1/replication/partitions/{tp.topic}/{tp.partition}", json=body,
                                     timeout=30)
        except requests.RequestException:
            return False
        return reply.status_code == 200

    def settle(self) -> None:
        """Wait until every push so far has been sent."""
        self._pushes.join()

    def close(self) -> None:
        self._pushes.put(None)
        self.http.shutdown()


def _state_json(state: PartitionState) -> dict[str, Any]:
    return {"replicas": list(state.replicas), "leader": state.leader, "leaderEpoch": state.leader_epoch,
            "isr": list(state.isr), "partitionEpoch": state.partition_epoch}


class Engines:
    """Brokers 0..n-1, each a ``stratalog serve --broker-id i`` on its own data directory."""

    def __init__(self, root: Path, controller: ClusterController, count: int, *config: str,
                 server_args: Sequence[str] = (), ca: Path | None = None, token: str | None = None,
                 transport: str = "http") -> None:
        """``server_args``: more ``stratalog serve`` arguments for every engine (TLS, tokens); ``ca`` and
        ``token``: what the tests' own requests to the engines trust and present; ``transport``: how
        followers fetch, ``http`` (the replication API) or ``kafka`` (each engine's Kafka listener)."""
        assert transport in ("http", "kafka"), transport
        self.transport = transport
        self.root = root
        self.controller = controller
        self.config = config
        self.server_args, self.ca, self.token = list(server_args), ca, token
        self.servers: dict[int, Server] = {}
        for broker in range(count):
            self.start(broker)

    def start(self, broker: int) -> Server:
        args = ["--broker-id", str(broker), "--controller", self.controller.url]
        for setting in self.config:
            args += ["--config", setting]
        if self.transport == "kafka":
            args += ["--kafka-listen", "127.0.0.1:0"]
        server = Server([self.root / f"broker-{broker}"], *args, *self.server_args,
                        log_path=self.root / f"broker-{broker}.log", ca=self.ca, token=self.token).start()
        self.servers[broker] = server
        self.controller.endpoints[broker] = server.base
        if self.transport == "kafka":
            scheme = "kafka+ssl" if server.base.startswith("https:") else "kafka"
            self.controller.replication_endpoints[broker] = f"{scheme}://{server.kafka_address()}"
        return server

    def url(self, broker: int) -> str:
        return self.servers[broker].base

    def stop_all(self) -> None:
        for server in self.servers.values():
            if server.proc is not None and server.proc.poll() is None:
                server.terminate()


def round_woken_by_an_append(session: Any, fetches: Sequence[tuple[TopicPartition, Any]], append: Any) -> list[Any]:
    """A follower's round with nothing new waits (up to 30 s); ``append`` (an append to one of its
    partitions) ends the wait. The round's answers, once it has ended, well before its 30 s."""
    answer: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: answer.update(r=session(fetches, 30_000, 1, 1 << 20)))
    started = time.monotonic()
    waiting.start()
    time.sleep(0.5)
    assert waiting.is_alive(), "the round answered before anything was appended"
    append()
    waiting.join(timeout=20)
    assert not waiting.is_alive() and time.monotonic() - started < 20, "the append did not end the wait"
    return list(answer["r"])
