"""``stratalog serve``: run the engine as a service with an HTTP API (default 127.0.0.1:8092), and
with ``--kafka-listen`` Kafka's wire protocol for Kafka clients too.

The HTTP default port is 8092, not Kafka's 9092: a Kafka client pointed at it by habit should
fail to connect rather than talk HTTP. The Kafka listener is off unless asked for, so that a
local Kafka broker on 9092 does not stop the service from starting. The server needs the
``server`` extra (aiohttp, prometheus_client, kio), imported only when this command runs, so the
rest of the CLI works without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from stratalog.common.config import parse_key_value_pairs
from stratalog.common.names import validate_topic_name
from stratalog.server.event_loop import EVENT_LOOPS   # no aiohttp: the names alone, one list for both

DEFAULT_LISTEN = "127.0.0.1:8092"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "serve", help="run the engine as a service: HTTP API, Kafka's maintenance schedule, Prometheus metrics",
        description="Open the data directories (recovering as needed) and serve the HTTP API under /v1 "
                    "(OpenAPI document at /v1/openapi.json), /metrics, /healthz and /readyz. SIGTERM or SIGINT "
                    "drains requests in flight, then flushes, checkpoints and marks the directories cleanly shut "
                    "down.")
    parser.add_argument("--data-dir", dest="data_dirs", action="append", required=True, metavar="DIR",
                        help="a data directory (repeat for several, like Kafka's log.dirs); created if missing")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address to serve on (default {DEFAULT_LISTEN}; port 0 picks a free port, "
                             "printed on startup)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="an engine-level setting under Kafka's name, e.g. log.retention.check.interval.ms=60000 "
                             "(repeatable)")
    parser.add_argument("--no-schedule", dest="schedule", action="store_false",
                        help="run no periodic task (retention, flush, checkpoints, cleaner threads); an outside "
                             "scheduler triggers them through POST /v1/maintenance/*")
    parser.add_argument("--create-topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                        help="create this topic at startup if it does not exist (repeatable)")
    parser.add_argument("--io-threads", type=int, default=16,
                        help="threads for appends, fsyncs, reads and topic admin (default 16)")
    parser.add_argument("--max-fetch-wait-ms", type=int, default=30_000,
                        help="upper bound of a fetch's maxWaitMs long poll (default 30000)")
    parser.add_argument("--max-partitions-per-topic", type=int, default=1000,
                        help="largest partition count the API creates (default 1000)")
    parser.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long SIGTERM waits for requests in flight (default 30)")
    parser.add_argument("--broker-id", type=int, default=None, metavar="N",
                        help="take part in replication as broker N: partition states arrive from a controller "
                             "(PUT /v1/replication/partitions/...), followers fetch from their leaders")
    parser.add_argument("--controller", default=None, metavar="URL",
                        help="where a leader proposes ISR changes (POST URL/alter-partition); needs --broker-id")
    parser.add_argument("--kafka-listen", default=None, metavar="HOST:PORT",
                        help="also serve Kafka's wire protocol here, for Kafka clients (e.g. 127.0.0.1:9092; "
                             "port 0 picks a free port, printed on startup); off unless given. With --broker-id "
                             "it serves followers only: a leader's endpoint kafka://HOST:PORT (kafka+ssl:// with "
                             "TLS) has its followers fetch here rather than over HTTP")
    parser.add_argument("--kafka-advertise", default=None, metavar="HOST:PORT",
                        help="the address Metadata gives Kafka clients (default: the --kafka-listen address)")
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                        help="serve both listeners over TLS with this PEM certificate (chain); reloaded when the "
                             "file changes, e.g. a cert-manager Secret's tls.crt; needs --tls-key")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="the certificate's PEM key")
    parser.add_argument("--tls-reload-seconds", type=float, default=10.0, metavar="SECONDS",
                        help="how often to look for a renewed certificate (default 10)")
    parser.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                        help="require a bearer token (HTTP Authorization, Kafka SASL PLAIN or OAUTHBEARER) from "
                             "this file, in kube-apiserver's token-auth-file format; groups stratalog:VERB[:TOPIC] "
                             "grant consume, produce, administer or replicate (docs/access.md)")
    parser.add_argument("--replication-token-file", type=Path, default=None, metavar="FILE",
                        help="with --broker-id: the token this engine presents to its leaders (it needs the "
                             "replicate verb there); read again every 30 s over HTTP, for a new connection "
                             "over Kafka")
    parser.add_argument("--replication-ca-file", type=Path, default=None, metavar="FILE",
                        help="with --broker-id: the CA of TLS leaders' certificates (https:// or kafka+ssl://)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default=None,
                        help="the event loop to serve on (default uvloop where installed, as the server extra "
                             "installs it; else asyncio's own)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        from stratalog.server.credentials import Credentials
        from stratalog.server.event_loop import chosen as chosen_event_loop
        from stratalog.server.run import ServeOptions, main, parse_create_topic, parse_listen
        from stratalog.server.state import Settings
    except ImportError as error:  # the server extra is not installed
        raise SystemExit(f"stratalog serve: {error}; install the server extra: pip install 'stratalog[server]'") \
            from None
    try:
        host, port = parse_listen(args.listen)
        topics = [parse_create_topic(t) for t in args.create_topic]
        kafka_listen = parse_listen(args.kafka_listen, flag="--kafka-listen") if args.kafka_listen else None
        kafka_advertise = parse_listen(args.kafka_advertise, flag="--kafka-advertise") if args.kafka_advertise \
            else None
        event_loop = chosen_event_loop(args.event_loop)
    except ValueError as error:
        raise SystemExit(f"stratalog serve: {error}") from None
    for name, _ in topics:
        validate_topic_name(name)
    for flag, value in (("--io-threads", args.io_threads), ("--max-partitions-per-topic",
                                                           args.max_partitions_per_topic)):
        if value < 1:
            raise SystemExit(f"stratalog serve: {flag} must be at least 1")
    if args.max_fetch_wait_ms < 0:
        raise SystemExit("stratalog serve: --max-fetch-wait-ms must be ≥ 0")
    properties = parse_key_value_pairs(args.config, where="--config")
    settings = Settings(io_threads=args.io_threads, max_fetch_wait_ms=args.max_fetch_wait_ms,
                        max_partitions_per_topic=args.max_partitions_per_topic)
    if kafka_advertise is not None and kafka_listen is None:
        raise SystemExit("stratalog serve: --kafka-advertise needs --kafka-listen")
    if (args.broker_id is None) != (args.controller is None):
        raise SystemExit("stratalog serve: --broker-id and --controller go together")
    if args.broker_id is not None and args.broker_id < 0:
        raise SystemExit("stratalog serve: --broker-id must be ≥ 0")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SystemExit("stratalog serve: --tls-cert and --tls-key go together")
    if args.tls_reload_seconds <= 0:
        raise SystemExit("stratalog serve: --tls-reload-seconds must be > 0")
    options = ServeOptions([Path(d) for d in args.data_dirs], host, port, properties, args.schedule, topics,
                           settings, args.shutdown_timeout, args.access_log, args.broker_id, args.controller,
                           kafka_listen, kafka_advertise,
                           tls=(args.tls_cert, args.tls_key) if args.tls_cert is not None else None,
                           tls_reload_seconds=args.tls_reload_seconds, token_file=args.token_file,
                           replication=Credentials(args.replication_token_file, args.replication_ca_file))
    return main(options, log_level=args.log_level, event_loop=event_loop)
