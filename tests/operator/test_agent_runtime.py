"""The agent's own judgement, on a real engine without a cluster: DiskPressure, CheckpointStale,
and maintenance ticks that never stack up."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from stratalog.broker.engine import Engine
from stratalog_operator.agent.agent import Agent, AgentSettings
from stratalog_operator.agent.handlers import AgentRuntime, Intervals
from stratalog_operator.kube import Kube
from stratalog_operator.metrics import OperatorMetrics
from stratalog_operator.outcome import Outcome
from stratalog.broker.topics import TopicAdmin

NO_CLUSTER = cast(Kube, None)   # these paths never reach the API server


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine([tmp_path / "data-0"], {"log.flush.offset.checkpoint.interval.ms": 1000}, schedule=False).start()
    try:
        yield e
    finally:
        e.stop()


def agent(engine: Engine, **settings: Any) -> Agent:
    return Agent(NO_CLUSTER, engine, AgentSettings("dir-a", "ns", **settings))


def test_volumes_report_capacity_usage_and_the_partitions_they_hold(engine: Engine) -> None:
    TopicAdmin(engine.manager).ensure_partitions("orders", [0, 2])
    [volume] = agent(engine).volumes()
    assert volume["name"] == "data-0" and volume["partitions"] == 2
    assert volume["capacityBytes"] >= volume["usedBytes"] > 0 and volume["freeBytes"] >= 0


def test_disk_pressure_is_raised_when_free_space_falls_under_the_threshold(engine: Engine) -> None:
    volume = {"name": "data-0", "capacityBytes": 100, "usedBytes": 95, "freeBytes": 5, "logBytes": 0, "partitions": 0}
    [pressure, *_] = agent(engine, disk_pressure_free_ratio=0.1).conditions([volume])
    assert pressure.type == "DiskPressure" and pressure.status is True and "data-0 (5.0% free)" in pressure.message
    [relaxed, *_] = agent(engine, disk_pressure_free_ratio=0.01).conditions([volume])
    assert relaxed.status is False


def test_checkpoints_are_stale_once_they_stop_for_three_intervals(engine: Engine) -> None:
    a = agent(engine)
    [_, fresh, *_] = a.conditions([])
    assert fresh.type == "CheckpointStale" and fresh.status is False and "no checkpoint written yet" in fresh.message
    assert fresh.reason == "NoCheckpointYet"   # a reason of its own: the first checkpoint is news worth a write
    a.write_checkpoints()
    assert a.conditions([])[1].status is False and a.conditions([])[1].reason == "CheckpointsCurrent"
    engine.tasks["checkpoints"].last_run_ms = engine.clock() - 3_500   # three 1 s intervals missed
    stale = a.conditions([])[1]
    assert stale.status is True and stale.reason == "CheckpointsStopped"


def test_a_tick_that_finds_another_engine_task_running_is_skipped_not_queued(engine: Engine) -> None:
    a = agent(engine)
    metrics = OperatorMetrics("agent")
    runtime = AgentRuntime(a, metrics, Intervals.from_engine(a, status=1.0))
    release = threading.Event()
    ran: list[str] = []

    def slow() -> Outcome:
        release.wait(10)
        ran.append("slow")
        return Outcome()

    def quick() -> Outcome:
        ran.append("quick")
        return Outcome()

    async def scenario() -> None:
        first = asyncio.create_task(runtime.task("cleaner", slow))
        await asyncio.sleep(0.05)
        await runtime.task("retention", quick)           # finds the cleaner pass running
        release.set()
        await first
        await runtime.task("retention", quick)           # the next tick runs

    asyncio.run(scenario())
    runtime.shutdown()
    assert ran == ["slow", "quick"]
    assert metrics.reconciles.labels("retention", "skipped")._value.get() == 1


def test_intervals_follow_the_engine_settings_and_never_means_never(engine: Engine) -> None:
    intervals = Intervals.from_engine(agent(engine), status=5.0)
    assert intervals.retention == 300.0 and intervals.cleaner == 15.0 and intervals.checkpoints == 1.0
    assert intervals.flush is None    # log.flush.scheduler.interval.ms defaults to Long.MAX
    assert intervals.deletion == 30.0 and intervals.status == 5.0
    assert intervals.producer_expiration == 600.0   # producer.id.expiration.check.interval.ms


def test_the_agents_producer_expiration_task_forgets_idle_producers(tmp_path: Path) -> None:
    from stratalog.records import Record, build_batch
    e = Engine([tmp_path / "data-0"], {"producer.id.expiration.ms": 1000}, schedule=False).start()
    try:
        TopicAdmin(e.manager).create_topic("t", 1, {})
        log = e.manager.get_log("t", 0)
        log.append(build_batch([Record(0, 1_700_000_000_000, None, b"v")], producer_id=7, producer_epoch=0,
                               base_sequence=0))                       # written long ago
        assert log.remove_expired_producers(1_700_000_000_000, 1000) == 0   # not yet at that time
        agent(e).remove_expired_producers()
        assert log.remove_expired_producers(e.clock(), 1) == 0     # the agent's task took it already
        assert e.tasks["producer-expiration"].runs == 1
    finally:
        e.stop()


def test_retention_is_unhealthy_while_its_last_check_failed(engine: Engine) -> None:
    a = agent(engine)
    assert a.conditions([])[2].reason == "NoFailures"   # the first run changes nothing worth writing
    a.run_retention()
    healthy = a.conditions([])[2]
    assert healthy.type == "RetentionHealthy" and healthy.status is True and "every 300s" in healthy.message
    engine.tasks["retention"].last_error = "disk I/O error"
    failing = a.conditions([])[2]
    assert failing.status is False and failing.reason == "RetentionFailing" and "disk I/O error" in failing.message


def test_a_data_directory_that_went_offline_is_named_in_the_logdir_condition(tmp_path: Path) -> None:
    from filesystems import Tmpfs
    from stratalog.common.errors import KafkaStorageError
    from stratalog.records import Record, build_batch

    small = Tmpfs(tmp_path / "small", size="1m")
    engine = Engine([small.path, tmp_path / "data-1"], schedule=False).start()
    try:
        a = agent(engine)
        assert a.conditions([])[-1].reason == "AllOnline"
        TopicAdmin(engine.manager).ensure_partitions("t", [0, 1])
        log = next(log for log in engine.manager.logs().values() if log.log_dir == small.path.resolve())
        with pytest.raises(KafkaStorageError):
            for _ in range(1000):   # until the disk is full
                log.append(build_batch([Record(0, 0, b"k", b"x" * 8000)]))
        online = a.conditions([])[-1]
        assert online.type == "LogDirectoriesOnline" and online.status is False
        assert online.reason == "LogDirectoryOffline"
        assert str(small.path.resolve()) in online.message and "ENOSPC" in online.message
    finally:
        engine.stop()
        small.unmount()
