"""``stratalog agent``: the engine of one LogDir, its HTTP API, its Kafka listener and its kopf
side, in one process.

Order, as in ``stratalog serve``: listen first (``/healthz`` answers during a long
recovery), open the engine (recovering as needed), listen for Kafka clients (``--kafka-listen``;
its address goes on the Lease, so the Lease waits for it), then start kopf, so no Topic is acted
on before the data is there. SIGTERM stops kopf, drains the API, and closes the engine
cleanly (flush, checkpoints, clean-shutdown marker); SIGKILL is recovered from at the next
start like any crash.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import functools
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
from aiohttp import web
from kopf._core.intents.registries import SmartOperatorRegistry  # OperatorRegistry + default logins

from stratalog.common.properties import parse_properties
from stratalog.common.config import parse_key_value_pairs
from stratalog.server import event_loop as event_loops
from stratalog.server.access.model import OPEN, AccessControl
from stratalog.server.access.tls import ReloadingTLS, TLSFilesError
from stratalog.server.app import create_app
from stratalog.server.direct.listener import HttpListener
from stratalog.server.run import listen
from stratalog.server.state import ServerState, Settings
from stratalog.broker.engine import Engine
from stratalog.broker.replication import ReplicaSet, ReplicationSettings
from stratalog.server.credentials import NO_CREDENTIALS, Credentials
from stratalog.server.replica_clients import leader_session

from ..kube import Kube
from ..metrics import OperatorMetrics
from ..names import GROUP, agent_timer_finalizer
from ..replica_records import broker_id
from .access import DEFAULT_AUDIENCE, AccessReviewer, TokenReviewer
from .agent import Agent, AgentSettings, agent_manager
from .figures import WritePolicy
from .lease import AgentLease
from .replicas import KubeAlterPartition, ReplicaDriver
from .handlers import AgentRuntime, Intervals
from .kafka import KafkaSettings, listen_kafka

__all__ = ["AgentRunOptions", "run_agent", "main"]

logger = logging.getLogger("stratalog.agent")

TLS_RELOAD_S = 10.0   # how often to look for a renewed certificate (the kubelet updates Secrets in about a minute)
# How long a restarted agent waits, at least, for the controller to move what it led before it
# reports ready anyway (still leading nothing until the move is seen).
REJOIN_WAIT_S = 15.0
# How long kopf may take to stop its handlers and timers before the agent shuts down without it.
KOPF_STOP_TIMEOUT_S = 20.0
# After that and this, a stop still under way logs every thread's stack (the controlled shutdown,
# 15 s by default, and the engine's clean close come after kopf's stop).
STOP_DIAGNOSIS_AFTER_S = 30.0


@dataclass(frozen=True)
class AgentRunOptions:
    logdir: str
    namespace: str
    data_dirs: list[Path]
    host: str = "0.0.0.0"
    port: int = 8092
    properties: dict[str, str] = field(default_factory=dict)
    status_min_interval: float = 10.0
    status_interval: float = 300.0
    disk_pressure_free_ratio: float = 0.1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    advertise: str | None = None
    controlled_shutdown_timeout_ms: int = 15000
    tls: tuple[Path, Path] | None = None
    authentication: str = "none"
    token_audience: str = DEFAULT_AUDIENCE
    authorization_cache_s: float = 10.0
    replication: Credentials = NO_CREDENTIALS
    kafka_listen: tuple[str, int] | None = None      # the Kafka-protocol listener, off when None
    kafka_advertise: tuple[str, int] | None = None   # what Metadata tells clients (default: the bound address)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AgentRunOptions:
        props: dict[str, str] = {}
        if args.config_file is not None:
            props.update(parse_properties(args.config_file))
        props.update(parse_key_value_pairs(args.config, where="--config"))
        host, port = args.listen
        if not 0 < args.broker_heartbeat_interval_ms < args.broker_session_timeout_ms:
            raise SystemExit("stratalog agent: --broker-heartbeat-interval-ms must be positive and shorter than "
                             "--broker-session-timeout-ms")
        if (args.tls_cert is None) != (args.tls_key is None):
            raise SystemExit("stratalog agent: --tls-cert and --tls-key go together")
        return cls(args.logdir, args.namespace, list(args.data_dirs), host, port, props,
                   args.status_min_interval, args.status_interval, args.disk_pressure_free_ratio,
                   args.broker_session_timeout_ms, args.broker_heartbeat_interval_ms, args.advertise,
                   args.controlled_shutdown_timeout_ms,
                   (args.tls_cert, args.tls_key) if args.tls_cert is not None else None,
                   args.authentication, args.token_audience, args.authorization_cache_seconds,
                   Credentials(args.replication_token_file, args.replication_ca_file),
                   args.kafka_listen, args.kafka_advertise)


def settings_for(options: AgentRunOptions) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Several agents and the controller act on the same Topics: each has its own finalizer
    # and annotation prefixes, and none takes part in another's peering.
    prefix = f"{options.logdir}.agent.{GROUP}"[:253]
    settings.persistence.finalizer = agent_timer_finalizer(options.logdir)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=prefix)
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = "stratalog-agent"
    settings.posting.reporting_instance = options.logdir
    settings.scanning.disabled = True          # namespaced: no CRD or namespace listing rights needed
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    return settings


async def run_agent(options: AgentRunOptions) -> int:
    engine = Engine(options.data_dirs, dict(options.properties), schedule=False)
    owner: list[Agent] = []   # the Agent, once made: it names each topic's Topic resource
    access = _access(options, lambda topic: _resource_name(owner, topic))
    try:
        tls = ReloadingTLS(*options.tls) if options.tls is not None else None
    except TLSFilesError as error:
        logger.error("LogDir %s: cannot start: %s", options.logdir, error)
        return 1
    state = ServerState(engine, Settings(partition_state_over_http=False), access=access)
    metrics = OperatorMetrics("agent", registry=state.metrics.registry)   # one /metrics for both
    runner = await listen(create_app(state), options.host, options.port, ssl_context=tls.context if tls else None)
    if runner is None:
        return 1
    scheme = "https" if tls else "http"
    for address in runner.addresses:
        logger.info("LogDir %s: API on %s://%s:%d (authentication: %s)", options.logdir, scheme, address[0],
                    address[1], options.authentication)
    if access.enabled and tls is None:
        logger.warning("LogDir %s: clients' tokens cross the network in the clear: give the agents a TLS Secret "
                       "(stratalog operator --agent-tls-secret, the chart's tls.secretName)", options.logdir)
    watching = asyncio.create_task(tls.watch(TLS_RELOAD_S)) if tls is not None else None

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGUSR2, _log_tasks)   # where each coroutine waits (SIGUSR1: threads)
    runtime: AgentRuntime | None = None
    lease: AgentLease | None = None
    abandoned = False   # kopf did not stop in time: its tasks would keep the loop from closing
    status = 0
    driver: ReplicaDriver | None = None
    kafka = None
    try:
        await loop.run_in_executor(state.broker.maintenance, engine.start)
        logger.info("LogDir %s: engine open on %s (%d partitions)", options.logdir,
                    ", ".join(map(str, options.data_dirs)), len(engine.manager.logs()))
        for line in engine.opening_summary():
            logger.info("LogDir %s: %s", options.logdir, line)
        kube = Kube(field_manager=agent_manager(options.logdir), on_write=metrics.wrote,
                    on_conflict=metrics.conflicted)
        advertised = options.advertise or _bound_url(runner, scheme)
        topics: dict[str, dict[str, Any]] = {}   # the Agent's watched Topics, once it exists
        kafka_advertised: str | None = None
        if options.kafka_listen is not None:
            kafka, (host, port) = await listen_kafka(
                KafkaSettings(options.logdir, options.namespace, options.kafka_listen, options.kafka_advertise),
                state, engine, tls, topics, lambda: driver, kube,
                lambda: owner[0].topic_defaults() if owner else {})
            kafka_advertised = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lease = AgentLease(kube, options.namespace, options.logdir, f"{socket.gethostname()}-{os.getpid()}",
                           session_timeout_ms=options.broker_session_timeout_ms,
                           heartbeat_interval_ms=options.broker_heartbeat_interval_ms,
                           advertised_url=advertised, kafka_advertised=kafka_advertised)
        lease.rejoining = True   # a new process leads nothing it led before until the controller has moved it
        await loop.run_in_executor(None, lease.start)
        agent = Agent(kube, engine, AgentSettings(
            options.logdir, options.namespace,
            WritePolicy(options.status_min_interval, options.status_interval),
            options.disk_pressure_free_ratio), topics=topics)
        owner.append(agent)
        # Replication before the first request: every log serves nothing until its record arrives.
        driver = _replication(kube, options, engine, agent, lease)
        state.broker.attach_replicas(driver.replicas.start(), loop)
        # Ready only once the records are applied: a restarted agent's /readyz must not send clients
        # to partitions it would refuse (421) until its first round. If the API is away now, the
        # driver's own rounds catch up.
        try:
            await loop.run_in_executor(None, driver.sync_once)
        except Exception as error:  # noqa: BLE001
            logger.warning("LogDir %s: first replica sync failed (retried every second): %s", options.logdir, error)
        driver.start()
        # Ready once rejoined and every partition it is in sync for has a leader again, so clients
        # sent here right after a restart are not refused; bounded, as without a controller
        # nothing moves (the driver's rounds finish the rejoining whenever it comes).
        deadline = loop.time() + max(REJOIN_WAIT_S, 3 * options.broker_session_timeout_ms / 1000)
        while not stop.is_set() and loop.time() < deadline:
            try:
                if await loop.run_in_executor(None, driver.serving):
                    break
            except Exception as error:  # noqa: BLE001 - the API is away: wait as for the controller
                logger.warning("LogDir %s: rejoining: %s", options.logdir, error)
            await asyncio.sleep(0.5)   # each look lists Topics and Leases; the controller elects every second
        state.started = True
        tick = max(0.5, min(options.status_min_interval, 10.0))
        runtime = AgentRuntime(agent, metrics, Intervals.from_engine(agent, tick))
        registry = SmartOperatorRegistry()
        runtime.register(registry)
        if not stop.is_set():   # a signal during recovery: the start finished, now just stop
            abandoned = not await _run_kopf(registry, settings_for(options), options.namespace, stop)
    except Exception as error:
        logger.error("LogDir %s: cannot run: %s", options.logdir, error)
        status = 1
    finally:
        logger.info("LogDir %s: stopping", options.logdir)
        if driver is not None and lease is not None and status == 0 and options.controlled_shutdown_timeout_ms > 0:
            # Still serving: followers keep fetching and clients are sent to the new leaders.
            try:
                still = await loop.run_in_executor(None, driver.controlled_shutdown, lease,
                                                   options.controlled_shutdown_timeout_ms / 1000)
            except Exception as error:   # noqa: BLE001 - the API is unreachable: stop all the same
                logger.warning("LogDir %s: controlled shutdown failed: %s", options.logdir, error)
            else:
                if still:
                    logger.warning("LogDir %s: controlled shutdown timed out; still leading %s", options.logdir,
                                   ", ".join(map(str, still[:5])) + (" ..." if len(still) > 5 else ""))
                else:
                    logger.info("LogDir %s: controlled shutdown: no leadership left here", options.logdir)
        state.begin_draining()
        if kafka is not None:
            await kafka.close()
        await runner.cleanup()
        if runtime is not None:
            await loop.run_in_executor(None, runtime.shutdown)
        if driver is not None:
            await loop.run_in_executor(None, driver.stop)
            await loop.run_in_executor(None, driver.replicas.stop)
        if lease is not None:
            await loop.run_in_executor(None, lease.stop)
        await loop.run_in_executor(None, state.shutdown_pools)
        if engine.ready:
            report = await loop.run_in_executor(None, engine.stop)
            status = max(status, report.log(logger))
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        faulthandler.cancel_dump_traceback_later()
        if watching is not None:
            watching.cancel()
        if abandoned:
            logging.shutdown()
            os._exit(status)
    return status


async def _run_kopf(registry: SmartOperatorRegistry, settings: kopf.OperatorSettings, namespace: str,
                    stop: asyncio.Event) -> bool:
    """kopf's handlers and timers until ``stop`` is set (or kopf ends); whether kopf stopped in time.

    kopf takes SIGTERM and SIGINT for itself when its tasks are spawned; they are taken back at
    once, so every stop goes through ``stop`` (kopf's stop flag) and the agent knows when it began.
    kopf's own stop has no time limit (and CI twice saw an agent's stop never end after kopf's
    "Operator is stopping", cause unknown): after KOPF_STOP_TIMEOUT_S the agent logs where kopf's
    tasks wait and goes on with its own shutdown without it.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.ensure_future(stop.wait())
    existing = asyncio.all_tasks()   # not kopf's: it neither waits for them nor cancels them
    tasks = await kopf.spawn_tasks(registry=registry, settings=settings, standalone=True,
                                   namespaces=[namespace], stop_flag=stop)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    running = asyncio.ensure_future(kopf.run_tasks(tasks, ignored=existing))
    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    # Should the whole stop hang anyway (ours included), every thread's stack goes to the log.
    faulthandler.dump_traceback_later(KOPF_STOP_TIMEOUT_S + STOP_DIAGNOSIS_AFTER_S, exit=False)
    if not running.done():
        await asyncio.wait({running}, timeout=KOPF_STOP_TIMEOUT_S)
    if not running.done():
        logger.warning("kopf did not stop within %gs of the stop signal; shutting down without it. "
                       "Its tasks:", KOPF_STOP_TIMEOUT_S)
        _log_tasks()
        return False
    running.result()   # kopf's own failure is the agent's
    return True


def _log_tasks() -> None:
    """Every asyncio task with the line it waits on: how to see which task a stop waits for."""
    for task in asyncio.all_tasks():
        frames = task.get_stack()[-4:]   # oldest first: the last is where it waits
        where = " -> ".join(f"{f.f_code.co_name} ({f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno})"
                            for f in frames)
        logger.warning("task %s: %s", task.get_name(), where or "(not started or done)")


def _replication(kube: Kube, options: AgentRunOptions, engine: Engine, agent: Agent,
                 lease: AgentLease) -> ReplicaDriver:
    settings = ReplicationSettings.from_config(broker_id(options.logdir), engine.config)
    driver: ReplicaDriver | None = None

    def alive() -> set[str]:
        return driver.alive if driver is not None else set()

    controller = KubeAlterPartition(kube, options.namespace, agent.owner_of, alive)
    replicas = ReplicaSet(engine.manager, settings, controller,
                          functools.partial(leader_session, credentials=options.replication), clock=engine.clock,
                          may_lead=lease.may_lead)
    agent.replicas = replicas
    driver = ReplicaDriver(kube, options.namespace, options.logdir, replicas, agent.topics, agent.partitions_lock,
                           lease)
    agent.on_topic_event = driver.wake
    return driver


def _bound_url(runner: HttpListener, scheme: str) -> str | None:
    for address in runner.addresses:
        host, port = address[0], address[1]
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
    return None


def _access(options: AgentRunOptions, resource_name: Callable[[str], str | None]) -> AccessControl:
    """Kubernetes identities and RBAC, or open (``--authentication none``)."""
    if options.authentication != "kubernetes":
        return OPEN
    kube = Kube(field_manager=agent_manager(options.logdir))
    return AccessControl(TokenReviewer(kube, (options.token_audience,)),
                         AccessReviewer(kube, options.namespace, resource_name,
                                        cache_s=options.authorization_cache_s))


def _resource_name(owner: list[Agent], topic: str) -> str | None:
    """The Topic resource whose Kafka topic this is; None while the agent knows of none (just after
    a start, or data whose Topic is gone): then only a grant on every Topic lets one in."""
    body = owner[0].owner_of(topic) if owner else None
    return str(body["metadata"]["name"]) if body is not None else None


def main(options: AgentRunOptions, *, log_level: str = "INFO", event_loop: str = "asyncio") -> int:
    logging.basicConfig(level=log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level != "DEBUG":   # kopf logs every handler and timer run at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # `kill -USR1` prints every thread's stack to the log: how to see where a stop hangs.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return event_loops.run(run_agent(options), event_loop)
