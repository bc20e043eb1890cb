"""The agent's Lease: created once, renewed every ``broker.heartbeat.interval.ms`` on a thread of its own.

A thread rather than a kopf timer, so that a slow handler never delays a heartbeat. The agent
also asks it, before acknowledging anything as a leader, whether it may still lead: only while
its last successful renewal, timed from the moment it was *sent*, is younger than the session
timeout — so a paused agent that wakes up knows it may have been replaced before anyone tells it.

Renewing again after a lapse is not enough to lead again: meanwhile the controller may have
moved every leadership away, and the records saying so may not have reached this agent yet. So
each renewal after a lapse (and the first one) opens a new *registration*, and the agent may not
lead until it has read the partition records afresh under it (``confirm``), as a Kafka broker
that lost its session is unfenced only after it has caught up with the metadata log.

A new process starts *rejoining* (``rejoining``): it may have crashed and lost its unflushed tail
so fast that its Lease never lapsed, and the records may still name it leader at its old leader
epoch, at which followers would truncate to its shorter log. The Lease says so, the controller
moves its leaderships and ISR places away, and until the agent has seen that (``rejoined``) it
leads nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from ..kube import Kube
from ..leases import lease_body, lease_name, renewal

__all__ = ["AgentLease"]

logger = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class AgentLease:
    def __init__(self, kube: Kube, namespace: str, logdir: str, holder: str, *, session_timeout_ms: int,
                 heartbeat_interval_ms: int, advertised_url: str | None, kafka_advertised: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic, now: Callable[[], datetime] = _utcnow) -> None:
        self.kube = kube
        self.namespace = namespace
        self.logdir = logdir
        self.holder = holder
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.advertised_url = advertised_url
        self.kafka_advertised = kafka_advertised   # host:port of the Kafka listener, if it runs
        self._monotonic = monotonic
        self._now = now
        self._last_renewal_sent: float | None = None
        self._exists = False
        self.registration = 0          # moves with each renewal after a lapse
        self._confirmed = -1           # the registration under which the records were last read
        self.leaving = False           # in a controlled shutdown: said with every renewal from now on
        self.rejoining = False         # restarted, its old leaderships not yet moved: said likewise
        self.renewals = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return lease_name(self.logdir)

    def renew_once(self) -> bool:
        sent = self._monotonic()
        try:
            if not self._exists and self.kube.get("Lease", self.namespace, self.name) is None:
                self.kube.create("Lease", self.namespace, lease_body(
                    self.logdir, self.namespace, self.holder, self.session_timeout_ms, self._now(), self.advertised_url,
                    rejoining=self.rejoining, kafka_advertised=self.kafka_advertised))
            else:
                self.kube.patch("Lease", self.namespace, self.name, renewal(
                    self.holder, self.session_timeout_ms, self._now(), self.advertised_url, leaving=self.leaving,
                    rejoining=self.rejoining, kafka_advertised=self.kafka_advertised))
        except Exception as error:  # noqa: BLE001 - any failure is a missed heartbeat; keep trying
            self.failures += 1
            self._exists = False
            logger.warning("LogDir %s: lease renewal failed: %s", self.logdir, error)
            return False
        self._exists = True
        last = self._last_renewal_sent
        # Lapsed if the previous renewal was older than the session when this one *landed*: the
        # controller may have judged it dead at any moment up to then.
        if last is None or (self._monotonic() - last) * 1000 >= self.session_timeout_ms:
            self.registration += 1
            logger.info("LogDir %s: lease (re)registered; leading waits for fresh partition records",
                        self.logdir)
        self._last_renewal_sent = sent
        self.renewals += 1
        return True

    def may_lead(self) -> bool:
        last = self._last_renewal_sent
        return (last is not None and (self._monotonic() - last) * 1000 < self.session_timeout_ms
                and self._confirmed == self.registration and not self.rejoining)

    def leave(self) -> bool:
        """Start a controlled shutdown: mark the Lease so the controller moves this agent's leaderships."""
        self.leaving = True
        return self.renew_once()

    def rejoined(self) -> None:
        """The records no longer name this agent leader, nor in-sync: clear the mark at once."""
        self.rejoining = False
        self.renew_once()

    def confirm(self, registration: int) -> None:
        """The partition records were read afresh after ``registration`` began: leading may resume."""
        self._confirmed = registration

    def start(self) -> AgentLease:
        self.renew_once()

        def run() -> None:
            while not self._stop.wait(self.heartbeat_interval_ms / 1000):
                self.renew_once()

        self._thread = threading.Thread(target=run, name=f"lease-{self.logdir}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
