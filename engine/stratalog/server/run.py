"""The serve loop: listen, open the engine, serve, and drain cleanly on SIGTERM / SIGINT.

Order matters for operators:

1. listen first, so ``/healthz`` answers (and ``/readyz`` says 503) during a
   long recovery instead of the port looking dead;
2. ``Engine.start()`` on a thread (recovery as needed), then ``--create-topic``;
   only then ``/readyz`` turns 200;
3. on SIGTERM / SIGINT: stop accepting connections, wake long polls, let the
   requests in flight finish (their appends complete: a produce that was
   accepted is answered), wait for every engine call on the pools, then
   ``Engine.stop()`` (flush, checkpoints, ``.kafka_cleanshutdown``), exit 0.
   The next start then finds the clean-shutdown marker and skips recovery.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ssl import SSLContext

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from stratalog.common.addresses import split_host_port
from stratalog.common.errors import StratalogError
from stratalog.broker.engine import Engine
from stratalog.broker.groups.coordinator import GroupCoordinator
from stratalog.broker.producer_ids import ProducerIdAllocator
from stratalog.broker.replication import ReplicaSet, ReplicationSettings
from stratalog.server.access.model import OPEN, AccessControl
from stratalog.server.access.static_tokens import StaticTokens, TokenFileError
from stratalog.server.access.tls import ReloadingTLS, TLSFilesError
from stratalog.server.app import DATA_HANDLERS, create_app
from stratalog.server import event_loop as event_loops
from stratalog.server.direct.listener import HttpListener, direct_enabled, start_listener
from stratalog.server.socket_writes import thread_writes_enabled
from stratalog.server.kafka.context import KafkaContext
from stratalog.server.kafka.listener import KafkaListener
from stratalog.server.credentials import NO_CREDENTIALS, Credentials
from stratalog.server.direct.framing import MAX_LINE_BYTES
from stratalog.server.replica_clients import leader_session
from stratalog.server.replication import ControllerClient
from stratalog.server.state import ServerState, Settings
from stratalog.broker.topics import TopicAdmin

logger = logging.getLogger("stratalog.serve")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class ServeOptions:
    data_dirs: Sequence[Path]
    host: str = "127.0.0.1"
    port: int = 8092
    properties: Mapping[str, str] = field(default_factory=dict)
    schedule: bool = True
    create_topics: Sequence[tuple[str, int]] = ()
    settings: Settings = field(default_factory=Settings)
    shutdown_timeout: float = 30.0
    access_log: bool = False
    broker_id: int | None = None        # take part in replication (with controller_url)
    controller_url: str | None = None
    kafka_listen: tuple[str, int] | None = None      # the Kafka-protocol listener, off when None
    kafka_advertise: tuple[str, int] | None = None   # what Metadata tells clients; the listener's address by default
    tls: tuple[Path, Path] | None = None    # certificate and key: both listeners speak TLS
    tls_reload_seconds: float = 10.0
    token_file: Path | None = None          # access control by a static token file
    replication: Credentials = NO_CREDENTIALS   # what a follower presents to its leaders


def access_from(options: ServeOptions) -> AccessControl:
    """The token file's access control, or open; raises ``TokenFileError`` naming what is wrong."""
    if options.token_file is None:
        return OPEN
    tokens = StaticTokens.from_file(options.token_file)
    return AccessControl(tokens, tokens)


def parse_listen(text: str, *, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT``; port 0 picks a free one (printed when listening)."""
    address = split_host_port(text)
    if address is None:
        example = "127.0.0.1:9092" if flag.startswith("--kafka") else "127.0.0.1:8092"
        raise ValueError(f"{flag} {text!r}: expected HOST:PORT, e.g. {example}")
    host, port = address
    return host or "0.0.0.0", port


def parse_create_topic(text: str) -> tuple[str, int]:
    name, sep, count = text.partition(":")
    if sep and (not count.isdigit() or int(count) < 1):
        raise ValueError(f"--create-topic {text!r}: expected NAME[:PARTITIONS] with PARTITIONS ≥ 1")
    return name, int(count) if sep else 1


def _start_engine(engine: Engine, create_topics: Sequence[tuple[str, int]]) -> None:
    engine.start()
    manager = engine.manager
    for line in engine.opening_summary():
        logger.info("%s", line)
    for name, partitions in create_topics:
        if name in manager.topics():
            have = len(manager.describe_topic(name).partitions)
            logger.info("topic %s exists (%d partitions); --create-topic leaves it as it is", name, have)
            continue
        TopicAdmin(manager).create_topic(name, partitions)
        logger.info("created topic %s with %d partition(s)", name, partitions)


def _replica_set(engine: Engine, broker_id: int, controller_url: str, credentials: Credentials) -> ReplicaSet:
    return ReplicaSet(engine.manager, ReplicationSettings.from_config(broker_id, engine.config),
                      ControllerClient(controller_url), functools.partial(leader_session, credentials=credentials),
                      clock=engine.clock)


class _MalformedRequests(logging.Filter):
    """aiohttp logs every request its parser refuses (answered 400) as an ERROR with a traceback;
    anyone who can connect could fill the log that way. One INFO line says what was refused."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, BadHttpMessage):
            first = next((line.strip() for line in str(error.message).splitlines() if line.strip()), "malformed")
            record.msg, record.args = "refused a malformed HTTP request (400): %s", (first,)
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info, record.exc_text = None, None
        return True


_MALFORMED = _MalformedRequests()
MAX_REQUEST_LINE = MAX_LINE_BYTES


async def listen(app: web.Application, host: str, port: int, *, shutdown_timeout: float = 30.0,
                 access_log: bool = False, ssl_context: SSLContext | None = None) -> HttpListener | None:
    """Start serving ``app``; None (with the reason logged) when the address cannot be bound."""
    # A request line of up to 64 KiB (aiohttp's default is 8190 bytes): past that aiohttp's parser
    # answers 400 in text/plain before the API's JSON errors can; no URL of this API comes close.
    logging.getLogger("aiohttp.server").addFilter(_MALFORMED)   # idempotent: one filter object
    options = {"access_log": logging.getLogger("aiohttp.access") if access_log else None,
               "max_line_size": MAX_REQUEST_LINE}
    try:
        direct = direct_enabled(access_log)
        thread_writes_enabled()   # checked here, before either listener starts
    except ValueError as error:   # STRATALOG_HTTP_DIRECT or STRATALOG_SOCKET_WRITES names neither choice
        logger.error("cannot listen: %s", error)
        return None
    try:
        return await start_listener(app, DATA_HANDLERS, host, port, runner_options=options,
                                    shutdown_timeout=shutdown_timeout, direct=direct, ssl_context=ssl_context)
    except OSError as error:
        logger.error("cannot listen on %s:%d: %s", host, port, error.strerror)
        return None


async def serve(options: ServeOptions) -> int:
    # The engine is built (settings checked) before we listen: a bad --config fails fast.
    engine = Engine(options.data_dirs, dict(options.properties), schedule=options.schedule)
    try:
        access = access_from(options)
        tls = ReloadingTLS(*options.tls) if options.tls is not None else None
    except (TokenFileError, TLSFilesError) as error:
        logger.error("cannot start: %s", error)
        return 1
    if access.enabled and tls is None and options.host not in LOOPBACK:
        logger.warning("bearer tokens will cross the network in the clear: give --tls-cert/--tls-key")
    state = ServerState(engine, options.settings, access)
    runner = await listen(create_app(state), options.host, options.port, shutdown_timeout=options.shutdown_timeout,
                          access_log=options.access_log, ssl_context=tls.context if tls else None)
    if runner is None:
        return 1
    for address in runner.addresses:
        host, port = address[0], address[1]
        shown = f"[{host}]" if ":" in host else host
        logger.info("listening on %s://%s:%d (API under /v1, OpenAPI at /v1/openapi.json)",
                    "https" if tls else "http", shown, port)
    if access.enabled:
        logger.info("access control on: bearer tokens from %s", options.token_file)
    watching = asyncio.create_task(tls.watch(options.tls_reload_seconds)) if tls is not None else None

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            logger.info("%s again: already stopping", signal.Signals(signum).name)
            return
        logger.info("%s: stopping (draining requests in flight)", signal.Signals(signum).name)
        state.begin_draining()  # new requests get 503 while the listener closes; long polls answer now
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    status = 0
    kafka: KafkaListener | None = None
    try:
        try:
            # The start cannot be interrupted half-way (recovery renames files); a signal
            # during it is acted on once it is done.
            await loop.run_in_executor(state.broker.maintenance, _start_engine, engine, options.create_topics)
            if options.broker_id is not None and options.controller_url is not None:
                replicas = _replica_set(engine, options.broker_id, options.controller_url, options.replication)
                state.broker.attach_replicas(replicas.start(), loop)
                logger.info("replication: broker %d, controller %s", options.broker_id, options.controller_url)
            if options.kafka_listen is not None:
                kafka = await _listen_kafka(state, options, tls.context if tls else None)
            state.started = True
            logger.info("ready (schedule %s; event loop %s)", "on" if options.schedule else "off: use /v1/maintenance/*",
                        event_loops.running())
            await stop.wait()
        except StratalogError as error:
            logger.error("cannot start: %s: %s", error.code, error)
            status = 1
        except OSError as error:   # the Kafka listener's address is taken or not ours
            logger.error("cannot start: %s", error.strerror)
            status = 1
        finally:
            state.draining = True
            if kafka is not None:
                await kafka.close()
            await runner.cleanup()  # stop accepting; wake long polls; wait for the requests in flight (both paths)
            # Engine calls already on the pools finish (an accepted append is completed) before the stop.
            await loop.run_in_executor(None, state.shutdown_pools)
            if state.broker.replicas is not None:
                await loop.run_in_executor(None, state.broker.replicas.stop)
            if engine.ready:
                report = await loop.run_in_executor(None, engine.stop)
                status = max(status, report.log(logger))
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        if watching is not None:
            watching.cancel()
    return status


async def _listen_kafka(state: ServerState, options: ServeOptions, ssl_context: SSLContext | None) -> KafkaListener:
    assert options.kafka_listen is not None
    host, port = options.kafka_listen
    node_id = options.broker_id or 0
    # Replicated engines share no cluster view yet: their listener is for followers only, and
    # coordinates no groups (it would load, or create, a __consumer_offsets of its own).
    replication_only = options.broker_id is not None
    groups = GroupCoordinator(state.broker)
    if not replication_only:
        await groups.start()
    ctx = KafkaContext(state.broker, state.engine, node_id, host, port, state.settings.max_fetch_wait_ms,
                       ProducerIdAllocator(state.engine.manager.data_dirs[0], node_id), groups, state.access)
    listener = KafkaListener(ctx, replication_only=replication_only)
    try:
        addresses = await listener.start(host, port, ssl=ssl_context)
    except OSError as error:
        raise OSError(error.errno, f"cannot listen for Kafka clients on {host}:{port}: {error.strerror}") from None
    bound_host, bound_port = addresses[0]
    ctx.advertised_host, ctx.advertised_port = options.kafka_advertise or (
        host if host not in ("0.0.0.0", "::") else "127.0.0.1", bound_port)
    logger.info("listening for %s on %s:%d (advertised as %s:%d; %s)",
                "followers (replication only)" if replication_only else "Kafka clients", bound_host, bound_port,
                ctx.advertised_host, ctx.advertised_port,
                {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                 (True, True): "SASL_SSL"}[(ssl_context is not None, state.access.enabled)])
    return listener


def main(options: ServeOptions, *, log_level: str = "INFO", event_loop: str = "asyncio") -> int:
    logging.basicConfig(level=log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return event_loops.run(serve(options), event_loop)
