"""An agent's liveness on the real API server: it holds and renews its Lease; paused, the Lease lapses.

The agent runs as a real process with a short session (3 s, heartbeat 0.5 s). The controller's
rule for "dead" is ``stratalog_operator.leases.expired`` applied to the Lease the API server holds.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from kubernetes import client, config

from stratalog_operator.agent.lease import AgentLease
from stratalog_operator.kube import Kube
from stratalog_operator.leases import ADVERTISED_ANNOTATION, REJOINING_ANNOTATION, expired, lease_name

from .conftest import KubeCluster
from .roles import Agent, kubectl_json, wait_for

NS = "leases"


@pytest.fixture(scope="module")
def agent(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    root = tmp_path_factory.mktemp("leases")
    role = Agent(kube_cluster.env, NS, "dir-a", [root / "data-0"], root / "dir-a.log",
                 "--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500").start()
    try:
        yield role
    finally:
        if role.proc is not None and role.proc.poll() is None:
            role.proc.send_signal(signal.SIGCONT)
        role.stop()


def load_client_configuration_from(kubeconfig: Path) -> client.Configuration:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return configuration


def lease(cluster: KubeCluster) -> dict[str, Any]:
    found: dict[str, Any] = kubectl_json(cluster, "-n", NS, "get", "lease", "stratalog-agent-dir-a")
    return found


def now() -> datetime:
    return datetime.now(timezone.utc)


def test_an_agent_holds_a_lease_naming_its_logdir_and_where_it_is_reached(kube_cluster, agent):
    held = wait_for("the agent's Lease", lambda: lease(kube_cluster), logs=[agent.log_path])
    assert held["metadata"]["labels"]["stratalog.io/logdir"] == "dir-a"
    assert held["metadata"]["annotations"][ADVERTISED_ANNOTATION] == agent.base
    assert held["spec"]["leaseDurationSeconds"] == 3 and held["spec"]["holderIdentity"]
    first = held["spec"]["renewTime"]
    wait_for("a renewal", lambda: lease(kube_cluster)["spec"]["renewTime"] != first, logs=[agent.log_path])
    assert not expired(lease(kube_cluster), now())


def test_a_paused_agent_s_lease_lapses_and_it_renews_once_resumed(kube_cluster, agent):
    assert agent.proc is not None
    wait_for("a current Lease", lambda: not expired(lease(kube_cluster), now()), logs=[agent.log_path])
    agent.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for("the Lease to lapse", lambda: expired(lease(kube_cluster), now()), timeout=30,
                 logs=[agent.log_path])
    finally:
        agent.proc.send_signal(signal.SIGCONT)
    wait_for("the Lease renewed again", lambda: not expired(lease(kube_cluster), now()), timeout=30,
             logs=[agent.log_path])


def test_after_a_lapse_a_renewed_lease_lets_its_agent_lead_only_once_the_records_are_read_again(kube_cluster):
    clock = [1000.0]   # the agent's monotonic clock, moved by hand: a pause is a jump
    kube = Kube(load_client_configuration_from(kube_cluster.kubeconfig))
    held = AgentLease(kube, NS, "dir-z", "holder-z", session_timeout_ms=3000, heartbeat_interval_ms=500,
                      advertised_url=None, monotonic=lambda: clock[0])
    assert held.renew_once() and not held.may_lead()       # registered, records not read yet
    held.confirm(held.registration)
    assert held.may_lead()
    clock[0] += 2.0
    assert held.renew_once() and held.may_lead()            # renewed in time: the same registration
    clock[0] += 3.5                                          # paused past the session
    assert not held.may_lead()
    first = held.registration
    assert held.renew_once()
    assert held.registration == first + 1 and not held.may_lead()   # renewed, but may have been replaced
    held.confirm(first)
    assert not held.may_lead()                               # a read from before the lapse does not count
    held.confirm(held.registration)
    assert held.may_lead()


def test_a_rejoining_agent_marks_its_lease_and_leads_nothing_until_it_has_rejoined(kube_cluster):
    kube = Kube(load_client_configuration_from(kube_cluster.kubeconfig))
    held = AgentLease(kube, NS, "dir-r", "holder-r", session_timeout_ms=3000, heartbeat_interval_ms=500,
                      advertised_url=None)
    held.rejoining = True

    def marks() -> dict[str, str]:
        body = kube.get("Lease", NS, lease_name("dir-r"))
        assert body is not None
        return (body["metadata"].get("annotations") or {})

    assert held.renew_once()
    held.confirm(held.registration)
    assert marks().get(REJOINING_ANNOTATION) == "true" and not held.may_lead()
    assert held.renew_once() and marks().get(REJOINING_ANNOTATION) == "true"   # said with every renewal
    held.rejoined()
    assert REJOINING_ANNOTATION not in marks() and held.may_lead()
