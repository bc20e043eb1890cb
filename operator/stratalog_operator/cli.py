"""The ``stratalog operator`` and ``stratalog agent`` subcommands.

Registered into the engine's ``stratalog`` command line (one entry point for every role,
as the one image runs them all); kopf and the Kubernetes client are imported only when
these commands run, so the engine's CLI works without the operator extra.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from stratalog.common.addresses import split_host_port

__all__ = ["register"]


def _listen(text: str) -> tuple[str, int]:
    address = split_host_port(text)
    if address is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT, e.g. 0.0.0.0:8080")
    host, port = address
    return host or "0.0.0.0", port


def _advertised(text: str) -> tuple[str, int]:
    """An address clients are given: a host is needed, and a port that is not 0."""
    address = split_host_port(text)
    if address is None or not address[0] or not address[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT that clients can reach, e.g. "
                                         "dir-a.kafka-agents.svc:9092")
    return address


def _missing_extra(command: str, error: ImportError) -> SystemExit:
    return SystemExit(f"stratalog {command}: {error}; install the operator extra: "
                      "pip install 'stratalog[server,operator]'")


def register(sub: Any) -> None:
    op = sub.add_parser(
        "operator", help="run the Kubernetes controller (LogDir and Topic custom resources)",
        description="Reconcile LogDirs into PVCs, a ConfigMap, a Service and an agent StatefulSet, and Topics "
                    "into replica assignments over LogDirs. Uses the in-cluster service account, else the "
                    "kubeconfig (KUBECONFIG).")
    op.add_argument("--namespace", action="append", default=[], metavar="NS",
                    help="watch only this namespace (repeatable; default: all namespaces)")
    op.add_argument("--metrics-listen", type=_listen, default=("0.0.0.0", 8080), metavar="HOST:PORT",
                    help="address of /metrics and /healthz (default 0.0.0.0:8080)")
    op.add_argument("--image", default=os.environ.get("STRATALOG_IMAGE", "ghcr.io/stratalog/stratalog:0.1.0"),
                    help="image of the agent pods (default: $STRATALOG_IMAGE)")
    op.add_argument("--agent-service-account",
                    default=os.environ.get("STRATALOG_AGENT_SERVICE_ACCOUNT", "stratalog-agent"),
                    help="service account of the agent pods (default: $STRATALOG_AGENT_SERVICE_ACCOUNT)")
    op.add_argument("--agent-image-pull-policy", choices=["Always", "IfNotPresent", "Never"],
                    default=os.environ.get("STRATALOG_IMAGE_PULL_POLICY", "IfNotPresent"),
                    help="imagePullPolicy of the agent pods (default: $STRATALOG_IMAGE_PULL_POLICY or IfNotPresent)")
    op.add_argument("--agent-volume-permissions", action=argparse.BooleanOptionalAction,
                    default=os.environ.get("STRATALOG_AGENT_VOLUME_PERMISSIONS", "false").lower() == "true",
                    help="give each agent volume to the agent's user in a root init step, for storage classes "
                         "that apply no fsGroup; not allowed under restricted Pod Security (default: "
                         "$STRATALOG_AGENT_VOLUME_PERMISSIONS or false)")
    op.add_argument("--agent-authentication", choices=["kubernetes", "none"],
                    default=os.environ.get("STRATALOG_AGENT_AUTHENTICATION", "kubernetes"),
                    help="the agents' access control: ServiceAccount tokens and RBAC on Topics (kubernetes, the "
                         "default), or none")
    op.add_argument("--agent-tls-secret", default=os.environ.get("STRATALOG_AGENT_TLS_SECRET") or None,
                    metavar="NAME", help="serve the agents' API over TLS with this Secret (tls.crt, tls.key, ca.crt: "
                                         "cert-manager's layout) from each LogDir's namespace")
    op.add_argument("--agent-token-audience", default=os.environ.get("STRATALOG_AGENT_TOKEN_AUDIENCE") or "stratalog",
                    metavar="AUDIENCE", help="the audience the agents accept ServiceAccount tokens for (default "
                                             "stratalog; the chart sets one per release)")
    op.add_argument("--agent-kafka-port", type=int, default=int(os.environ.get("STRATALOG_AGENT_KAFKA_PORT") or 9092),
                    metavar="PORT", help="the agents' Kafka listener, on each LogDir's Service (default: "
                                         "$STRATALOG_AGENT_KAFKA_PORT or 9092; 0: no Kafka listener)")
    op.add_argument("--offsets-topic-partitions", type=int, default=50, metavar="N",
                    help="partitions of the __consumer_offsets Topic made in each namespace with a LogDir "
                         "(Kafka's offsets.topic.num.partitions; default 50)")
    op.add_argument("--offsets-topic-replicas", type=int, default=3, metavar="N",
                    help="its copies, at most one per LogDir there is when it is made (Kafka's "
                         "offsets.topic.replication.factor; default 3)")
    op.add_argument("--resync-seconds", type=float, default=300.0,
                    help="reconcile everything this often, besides watch events (default 300)")
    op.add_argument("--peering", default=None, metavar="NAME",
                    help="use kopf peering NAME (needs the kopf.dev peering CRDs); default: standalone")
    op.add_argument("--log-level", default=os.environ.get("STRATALOG_LOG_LEVEL", "INFO"),
                    choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    op.set_defaults(run=_run_operator)

    ag = sub.add_parser(
        "agent", help="run the engine sidecar of one LogDir: engine, HTTP API, kopf timers and status",
        description="Embed the engine on the LogDir's volumes, serve its HTTP API, hold the Topic partitions "
                    "assigned to this LogDir, and run retention, cleaning and checkpoints on kopf timers.")
    ag.add_argument("--logdir", required=True, help="name of the LogDir this agent serves")
    ag.add_argument("--namespace", required=True, help="namespace of the LogDir")
    ag.add_argument("--data-dir", dest="data_dirs", action="append", required=True, type=Path, metavar="DIR",
                    help="a data directory (one per volume; repeatable)")
    ag.add_argument("--listen", type=_listen, default=("0.0.0.0", 8092), metavar="HOST:PORT",
                    help="address of the engine's HTTP API, /metrics, /healthz and /readyz (default 0.0.0.0:8092)")
    ag.add_argument("--config-file", type=Path, default=None,
                    help="engine properties (Kafka's names), e.g. the ConfigMap the operator mounts")
    ag.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="an engine setting, overriding the file (repeatable)")
    ag.add_argument("--status-interval", type=float, default=300.0, metavar="SECONDS",
                    help="write unchanged figures into Topic status at most this often (default 300)")
    ag.add_argument("--status-min-interval", type=float, default=10.0, metavar="SECONDS",
                    help="write changed figures at most this often per Topic (default 10)")
    ag.add_argument("--broker-session-timeout-ms", type=int, default=9000, metavar="MS",
                    help="the agent's Lease lasts this long without a renewal (Kafka's broker.session.timeout.ms)")
    ag.add_argument("--broker-heartbeat-interval-ms", type=int, default=2000, metavar="MS",
                    help="how often the agent renews its Lease (Kafka's broker.heartbeat.interval.ms)")
    ag.add_argument("--controlled-shutdown-timeout-ms", type=int, default=15000, metavar="MS",
                    help="on SIGTERM, how long to wait for the controller to move this agent's leaderships to "
                         "in-sync followers before stopping anyway (Kafka's controlled shutdown; 0: do not wait)")
    ag.add_argument("--advertise", default=None, metavar="URL",
                    help="where other agents and clients reach this engine (default: the address it listens on; "
                         "in a cluster, the LogDir's Service)")
    ag.add_argument("--kafka-listen", type=_listen, default=None, metavar="HOST:PORT",
                    help="also serve Kafka's wire protocol here, for Kafka clients (default: off)")
    ag.add_argument("--kafka-advertise", type=_advertised, default=None, metavar="HOST:PORT",
                    help="the address Kafka clients are given for this engine (Metadata; put on the agent's Lease "
                         "so every agent lists it); default: this host's name and the bound port; in a cluster, "
                         "the LogDir's Service")
    ag.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                    help="serve the API (and the Kafka listener) over TLS with this certificate (a cert-manager "
                         "Secret's tls.crt), reloaded when it changes; needs --tls-key")
    ag.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="the certificate's key (tls.key)")
    ag.add_argument("--authentication", choices=["none", "kubernetes"], default="none",
                    help="kubernetes: every request presents a ServiceAccount token (TokenReview) and needs the "
                         "verb on the Topic (SubjectAccessReview); none: anyone who reaches the agent (default)")
    ag.add_argument("--token-audience", default="stratalog",
                    help="the audience accepted tokens are minted for (default stratalog)")
    ag.add_argument("--authorization-cache-seconds", type=float, default=10.0, metavar="SECONDS",
                    help="how long an RBAC decision is reused; a revoked RoleBinding takes effect within it "
                         "(default 10)")
    ag.add_argument("--replication-token-file", type=Path, default=None, metavar="FILE",
                    help="the agent's own token, presented to leaders when it fetches as a follower (a projected "
                         "ServiceAccount token with the audience above)")
    ag.add_argument("--replication-ca-file", type=Path, default=None, metavar="FILE",
                    help="the CA the other agents' certificates chain to (a Secret's ca.crt)")
    ag.add_argument("--disk-pressure-free-ratio", type=float, default=0.1,
                    help="DiskPressure when a volume's free space falls under this share (default 0.1)")
    ag.add_argument("--log-level", default=os.environ.get("STRATALOG_LOG_LEVEL", "INFO"),
                    choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    ag.add_argument("--event-loop", choices=["uvloop", "asyncio"], default=None,
                    help="the event loop to run on (default uvloop where installed, as the server extra installs "
                         "it; else asyncio's own)")
    ag.set_defaults(run=_run_agent)


def _run_operator(args: argparse.Namespace) -> int:
    try:
        from .children import AgentOptions
        from .controller.offsets_topic import OffsetsTopicOptions
        from .controller.run import OperatorOptions, main
    except ImportError as error:
        raise _missing_extra("operator", error) from None
    host, port = args.metrics_listen
    options = OperatorOptions(namespaces=tuple(args.namespace), metrics_host=host, metrics_port=port,
                              agent=AgentOptions(image=args.image, service_account=args.agent_service_account,
                                                 image_pull_policy=args.agent_image_pull_policy,
                                                 volume_permissions=args.agent_volume_permissions,
                                                 authentication=args.agent_authentication,
                                                 tls_secret=args.agent_tls_secret,
                                                 token_audience=args.agent_token_audience,
                                                 kafka_port=args.agent_kafka_port),
                              offsets_topic=OffsetsTopicOptions(args.offsets_topic_partitions,
                                                                args.offsets_topic_replicas),
                              resync_seconds=args.resync_seconds, peering=args.peering)
    return main(options, log_level=args.log_level)


def _run_agent(args: argparse.Namespace) -> int:
    try:
        from stratalog.server.event_loop import chosen as chosen_event_loop

        from .agent.run import AgentRunOptions, main
    except ImportError as error:
        raise _missing_extra("agent", error) from None
    try:
        event_loop = chosen_event_loop(args.event_loop)
    except ValueError as error:
        raise SystemExit(f"stratalog agent: {error}") from None
    return main(AgentRunOptions.from_args(args), log_level=args.log_level, event_loop=event_loop)
