"""Consumer groups through ``stratalog serve --kafka-listen``: real clients join, rebalance, commit.

kafka-python consumers share a topic and rebalance when one leaves; librdkafka and Kafka's own
console consumer and ``kafka-consumer-groups`` work with groups; committed offsets live in
``__consumer_offsets`` as Kafka writes them (its DumpLogSegments decodes them) and survive a
restart. The pure parts (protocol vote, lapsed sessions, the offsets partition) come last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kafka_tools import kafka_toolchain  # noqa: F401  (a fixture)
from server_harness import Server
from stratalog.broker.groups.group import Group, Member, lapsed_members, select_protocol
from stratalog.broker.groups.offsets_records import (
    CommittedOffset,
    offset_key,
    offset_value,
    parse_key,
    parse_value,
    partition_for,
)
from stratalog.common.names import TopicPartition

TOPIC = "shared"
PARTITIONS = 6


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("groups")
    running = Server([root / "data"], "--no-schedule", "--kafka-listen", "127.0.0.1:0",
                     "--config", "group.initial.rebalance.delay.ms=200", "--config", "offsets.topic.num.partitions=4",
                     "--create-topic", f"{TOPIC}:{PARTITIONS}", "--create-topic", "rd:2", "--create-topic", "console:1")
    running.start()
    yield running
    assert running.terminate() == 0, running.log()
    assert "Traceback" not in running.log(), running.log()


def produce(address: str, topic: str, count: int, partitions: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=address, acks="all")
    for i in range(count):
        producer.send(topic, key=b"k%d" % i, value=b"%s-%d" % (topic.encode(), i), partition=i % partitions)
    producer.flush()
    producer.close()


def test_three_consumers_share_a_topic_and_the_two_left_take_over_when_one_leaves(server: Server):
    from kafka import KafkaConsumer
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    address = server.kafka_address()
    produce(address, TOPIC, 60, PARTITIONS)
    consumers = [KafkaConsumer(TOPIC, bootstrap_servers=address, group_id="trio", auto_offset_reset="earliest",
                               enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300)
                 for _ in range(3)]
    seen: list[list[tuple[int, int]]] = [[] for _ in consumers]

    def poll_until(done: threading.Event, index: int) -> None:
        while not done.is_set():
            for records in consumers[index].poll(timeout_ms=200).values():
                seen[index] += [(r.partition, r.offset) for r in records]
            try:
                consumers[index].commit()
            except (CommitFailedError, RebalanceInProgressError):
                pass   # a rebalance came between the poll and the commit: the records may come again

    def settled(members: list[KafkaConsumer], each: int) -> bool:
        owned = [sorted(tp.partition for tp in c.assignment()) for c in members]
        return all(len(o) == each for o in owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))

    def run_until(members: list[KafkaConsumer], each: int, records: set[tuple[int, int]]) -> None:
        done = threading.Event()
        threads = [threading.Thread(target=poll_until, args=(done, i)) for i in range(len(members))]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (settled(members, each) and records <= {p for s in seen for p in s}):
            time.sleep(0.2)
        done.set()
        for thread in threads:
            thread.join()

    first = {(i % PARTITIONS, i // PARTITIONS) for i in range(60)}
    run_until(consumers, 2, first)
    assert settled(consumers, 2), [c.assignment() for c in consumers]   # two partitions each, disjoint
    assert {p for s in seen for p in s} == first                         # every record, at least once

    consumers[2].close()                        # LeaveGroup: the other two rebalance over all six
    produce(address, TOPIC, 12, PARTITIONS)     # two more per partition
    later = {(p, o) for p in range(PARTITIONS) for o in (10, 11)}
    run_until(consumers[:2], 3, later)
    assert settled(consumers[:2], 3), [c.assignment() for c in consumers[:2]]
    assert {p for s in seen for p in s} == first | later
    for consumer in consumers[:2]:
        consumer.close()


def test_librdkafka_consumes_in_a_group_and_commits(server: Server):
    from confluent_kafka import Consumer

    address = server.kafka_address()
    produce(address, "rd", 20, 2)
    consumer = Consumer({"bootstrap.servers": address, "group.id": "rd-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["rd"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    consumer.close()
    assert sorted(got) == sorted(b"rd-%d" % i for i in range(20))
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 10), (1, 10)]


def test_kafkas_console_consumer_and_consumer_groups_tool_see_the_group(server: Server, kafka_toolchain):
    address = server.kafka_address()
    produce(address, "console", 5, 1)
    consumed = kafka_toolchain.java("org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", address, "--topic", "console", "--group", "console-group", "--from-beginning",
        "--max-messages", "5"])
    assert consumed.returncode == 0, consumed.describe()
    assert consumed.stdout.splitlines() == [f"console-{i}" for i in range(5)]
    produce(address, "console", 3, 1)   # a lag of 3 behind the group's commit
    described = kafka_toolchain.java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", [
        "--bootstrap-server", address, "--describe", "--group", "console-group"])
    assert described.returncode == 0, described.describe()
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith("console-group")]
    assert [row[:6] for row in rows] == [["console-group", "console", "0", "5", "8", "3"]], described.stdout
    listed = kafka_toolchain.java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", [
        "--bootstrap-server", address, "--list"])
    assert "console-group" in listed.stdout.split(), listed.describe()


def test_committed_offsets_survive_a_restart_and_kafka_decodes_them(server: Server, kafka_toolchain):
    from kafka import KafkaConsumer, TopicPartition as KafkaTopicPartition
    from kafka.structs import OffsetAndMetadata

    address = server.kafka_address()
    committer = KafkaConsumer(bootstrap_servers=address, group_id="kept", enable_auto_commit=False)
    committer.commit({KafkaTopicPartition(TOPIC, 1): OffsetAndMetadata(7, "note", -1)})
    committer.close()
    assert server.terminate() == 0
    server.start()
    address = server.kafka_address()
    reader = KafkaConsumer(bootstrap_servers=address, group_id="kept", enable_auto_commit=False)
    assert reader.committed(KafkaTopicPartition(TOPIC, 1)) == 7
    assert reader.committed(KafkaTopicPartition(TOPIC, 2)) is None
    reader.close()
    partition = partition_for("kept", 4)
    files = sorted((server.data_dirs[0] / f"__consumer_offsets-{partition}").glob("*.log"))
    dumped = kafka_toolchain.dump_log_segments(files, "--offsets-decoder")
    assert dumped.returncode == 0, dumped.describe()
    assert '"group":"kept","topic":"shared","partition":1' in dumped.stdout.replace(" ", ""), dumped.stdout
    assert '"offset":7' in dumped.stdout.replace(" ", "") and '"metadata":"note"' in dumped.stdout.replace(" ", "")


# -- the pure parts --------------------------------------------------------------------------------
def member(member_id: str, *protocols: str, heartbeat_ms: int = 0) -> Member:
    return Member(member_id, "client", "/127.0.0.1", 10_000, 30_000, "consumer", [(p, b"") for p in protocols],
                  heartbeat_ms)


def test_the_members_vote_for_a_protocol_they_all_support():
    assert select_protocol([member("a", "range", "sticky"), member("b", "sticky", "range"),
                            member("c", "sticky", "range")]) == "sticky"
    assert select_protocol([member("a", "range", "sticky"), member("b", "roundrobin", "range")]) == "range"
    assert select_protocol([member("a", "range"), member("b", "sticky")]) is None


def test_a_member_whose_session_lapsed_is_found_unless_it_waits_on_the_coordinator():
    group = Group("g", members={m.member_id: m for m in (member("old", "r", heartbeat_ms=0),
                                                         member("fresh", "r", heartbeat_ms=9_000),
                                                         member("waiting", "r", heartbeat_ms=0))})
    assert lapsed_members(group, 10_001, waiting={"waiting"}) == ["old"]


def test_the_offsets_partition_is_javas_string_hash_of_the_group():
    assert partition_for("hello", 50) == 99162322 % 50      # "hello".hashCode() in Java
    assert partition_for("\U0001F600", 50) == (0xD83D * 31 + 0xDE00) % 50   # two UTF-16 units, as Java counts
    assert partition_for("polygenelubricants", 50) == 0     # hashCode() is Integer.MIN_VALUE: Utils.abs gives 0


def test_an_offset_commit_record_reads_back_as_written():
    tp = TopicPartition("orders", 3)
    committed = CommittedOffset(42, 5, "meta", 1_700_000_000_000)
    assert parse_key(offset_key("g", tp)) == ("g", tp)
    assert parse_value(offset_value(committed)) == committed


# -- the coordinator's protocol, on a real engine that is not serving ------------------------------------
@pytest.fixture
def coordinator(tmp_path):
    """GroupCoordinators over real engines (the join and sync protocol reads only their settings)."""
    from stratalog.broker.engine import Engine
    from stratalog.broker.groups.coordinator import GroupCoordinator
    from stratalog.broker.replica_manager import ReplicaManager

    brokers: list[ReplicaManager] = []

    def make(**settings: str) -> GroupCoordinator:
        brokers.append(ReplicaManager(Engine([tmp_path / f"engine-{len(brokers)}"], settings, schedule=False)))
        return GroupCoordinator(brokers[-1])

    yield make
    for broker in brokers:
        broker.shutdown_pools()


def test_members_that_keep_arriving_cannot_hold_a_new_group_past_its_rebalance_timeout(coordinator):
    import asyncio

    async def run() -> float:
        groups = coordinator(**{"group.initial.rebalance.delay.ms": "500"})
        loop = asyncio.get_running_loop()
        started = loop.time()

        def join(name: str):
            return asyncio.ensure_future(groups.join("g", "", name, "/h", 10_000, 1_500, "consumer",
                                                     [("range", b"")], require_known_member=False))

        first = join("m0")
        for i in range(1, 9):                 # a new member every 0.4 s for 3.2 s, each inside the 0.5 s delay
            await asyncio.sleep(0.4)
            if first.done():
                break
            join(f"m{i}")
        result = await first
        assert result.error == "NONE" and result.generation == 1
        return loop.time() - started

    assert asyncio.run(run()) < 2.5           # 1.5 s of rebalance timeout, not 3.7 s of ever-restarted delay


def test_a_repeated_sync_answers_the_earlier_one_and_gets_the_assignment(coordinator):
    import asyncio

    async def run() -> None:
        groups = coordinator(**{"group.initial.rebalance.delay.ms": "200"})   # both join generation 1
        joins = await asyncio.gather(*(groups.join("g", "", name, "/h", 10_000, 5_000, "consumer", [("range", b"")],
                                                   require_known_member=False) for name in ("a", "b")))
        leader = next(j for j in joins if j.members)
        follower = next(j for j in joins if not j.members)
        first = asyncio.ensure_future(groups.sync("g", 1, follower.member_id, []))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(groups.sync("g", 1, follower.member_id, []))
        await asyncio.sleep(0.05)
        assert first.done() and first.result().error == "REBALANCE_IN_PROGRESS"
        await groups.sync("g", 1, leader.member_id, [(follower.member_id, b"yours"), (leader.member_id, b"mine")])
        assert (await second).assignment == b"yours"

    asyncio.run(run())


def test_a_join_still_waiting_at_shutdown_is_told_to_find_the_coordinator_again(coordinator):
    import asyncio

    async def run() -> str:
        groups = coordinator(**{"group.initial.rebalance.delay.ms": "60000"})
        waiting = asyncio.ensure_future(groups.join("g", "", "m", "/h", 10_000, 120_000, "consumer",
                                                    [("range", b"")], require_known_member=False))
        await asyncio.sleep(0.05)
        await groups.close()
        return (await asyncio.wait_for(waiting, 1)).error

    assert asyncio.run(run()) == "NOT_COORDINATOR"


def test_a_coordinator_serves_only_the_groups_of_the_offsets_partitions_it_leads_and_reloads_them_at_a_new_epoch(
        started_broker):
    """Among replicas: the leader of a group's __consumer_offsets partition coordinates it; losing the
    partition answers NOT_COORDINATOR, and leading it again reads the commits in its log afresh (here
    one another leader wrote, which replication would have brought)."""
    import asyncio

    from stratalog.broker.groups.coordinator import GroupCoordinator
    from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, offset_key, offset_value, partition_for
    from stratalog.broker.groups.ownership import OffsetsPlacement
    from stratalog.broker.produce import Acks
    from stratalog.records import Record, build_batch

    broker = started_broker()
    broker.topics.create_topic(OFFSETS_TOPIC, 3, {"cleanup.policy": "compact"})
    led: dict[int, int] = {}
    groups = GroupCoordinator(broker, placement=OffsetsPlacement(lambda: 3, led.get, create_topic=False))
    group, tp = "billing", TopicPartition("orders", 0)
    mine, other = partition_for(group, 3), partition_for("trio", 3)
    assert mine != other

    async def run() -> None:
        await groups.start()
        assert await groups.commit(group, -1, "", [(tp, 10, -1, None)]) == {tp: "NOT_COORDINATOR"}
        led[mine] = 0
        assert await groups.commit(group, -1, "", [(tp, 10, -1, None)]) == {tp: "NONE"}
        assert (await groups.committed(group, [tp]))[tp].offset == 10
        assert [g.group_id for g in await groups.list_groups()] == [group]
        assert await groups.committed("trio", [tp]) == "NOT_COORDINATOR"   # another partition's group

        del led[mine]   # the leadership moved away
        assert await groups.committed(group, [tp]) == "NOT_COORDINATOR"
        assert await groups.heartbeat(group, 1, "m") == "NOT_COORDINATOR"
        assert await groups.list_groups() == []
        later = Record(0, 1, offset_key(group, tp), offset_value(CommittedOffset(20, -1, "", 1)))
        await broker.append_records(TopicPartition(OFFSETS_TOPIC, mine), [build_batch([later])], Acks.LEADER, 1,
                                    internal=True)

        led[mine] = 1   # back, at a new leader epoch: what its log holds now
        assert (await groups.committed(group, [tp]))[tp].offset == 20

        # Lost and led again between two requests: the new epoch alone says the log must be read again.
        again = Record(0, 2, offset_key(group, tp), offset_value(CommittedOffset(30, -1, "", 2)))
        await broker.append_records(TopicPartition(OFFSETS_TOPIC, mine), [build_batch([again])], Acks.LEADER, 2,
                                    internal=True)
        led[mine] = 2
        assert (await groups.committed(group, [tp]))[tp].offset == 30
        await groups.close()

    asyncio.run(run())


def test_committed_offsets_expire_after_the_retention_once_nobody_uses_them_and_stay_gone_after_a_restart(
        started_broker):
    """Kafka's offsets.retention.minutes (KIP-211): a standalone commit expires that long after it was
    made; a group's offsets are kept while it has members, and expire that long after the last one left."""
    import asyncio

    from stratalog.broker.groups.coordinator import GroupCoordinator

    broker = started_broker(**{"offsets.retention.minutes": "1", "group.initial.rebalance.delay.ms": "0",
                               "offsets.topic.num.partitions": "1"})
    now = [1_700_000_000_000]
    tp = TopicPartition("orders", 0)

    async def run() -> None:
        groups = GroupCoordinator(broker, clock=lambda: now[0])
        await groups.start()
        assert await groups.commit("standalone", -1, "", [(tp, 5, -1, None)]) == {tp: "NONE"}
        joined = await groups.join("members", "", "c", "/h", 1_000_000, 1_000_000, "consumer", [("range", b"")],
                                   require_known_member=False)
        assert (await groups.sync("members", joined.generation, joined.member_id,
                                  [(joined.member_id, b"")])).error == "NONE"
        assert await groups.commit("members", joined.generation, joined.member_id, [(tp, 7, -1, None)]) == \
            {tp: "NONE"}

        now[0] += 60_000
        assert await groups.expire_offsets() == 1   # the standalone commit; the group's member keeps its own
        assert (await groups.committed("standalone", [tp]))[tp] is None
        assert (await groups.committed("members", [tp]))[tp].offset == 7
        assert await groups.leave("members", joined.member_id) == "NONE"   # empty from now on
        now[0] += 59_999
        assert await groups.expire_offsets() == 0
        now[0] += 1
        assert await groups.expire_offsets() == 1
        assert await groups.list_groups() == []
        await groups.close()

        restarted = GroupCoordinator(broker, clock=lambda: now[0])   # reads the log back: the tombstones hold
        await restarted.start()
        assert await restarted.committed("standalone", None) == {}
        assert await restarted.committed("members", None) == {}
        await restarted.close()

    asyncio.run(run())


def test_a_coordinator_that_loses_the_groups_partition_answers_its_waiting_joins_at_once(started_broker):
    """Kafka's resignation happens at the leadership change, not at the group's next request: a join
    waiting out the initial rebalance delay is told NOT_COORDINATOR as soon as the engine's real
    replica set applies a state that makes another broker the leader of the group's partition, one
    this engine came to lead after the coordinator started."""
    import asyncio

    from stratalog.broker.controller import InProcessController
    from stratalog.broker.groups.coordinator import GroupCoordinator
    from stratalog.broker.groups.offsets_records import OFFSETS_TOPIC, partition_for
    from stratalog.broker.groups.ownership import replicated_placement
    from stratalog.broker.replication import ReplicaSet, ReplicationSettings
    from stratalog.server.replication import LeaderSession

    broker = started_broker(**{"group.initial.rebalance.delay.ms": "60000"})
    tp = TopicPartition(OFFSETS_TOPIC, partition_for("g", 1))
    controller = InProcessController()
    # Broker 1 is never started: as a follower this engine only tries to fetch from it.
    replicas = ReplicaSet(broker.engine.manager, ReplicationSettings(0), controller, LeaderSession,
                          clock=broker.engine.clock)
    endpoints = {0: "http://127.0.0.1:9", 1: "http://127.0.0.1:9"}

    async def run() -> tuple[bool, str]:
        broker.attach_replicas(replicas, asyncio.get_running_loop())
        groups = GroupCoordinator(broker, placement=replicated_placement(broker, lambda: 1))
        await groups.start()
        try:
            # It comes to lead the partition after its start: the join loads the partition's groups.
            replicas.apply_state(tp, controller.create(tp, (0, 1)), endpoints)   # broker 0, this one, leads
            waiting = asyncio.ensure_future(groups.join("g", "", "m", "/h", 10_000, 120_000, "consumer",
                                                        [("range", b"")], require_known_member=False))
            await asyncio.sleep(0.2)
            still_waiting = not waiting.done()
            await broker.run(replicas.apply_state, tp, controller.elect(tp, 1, unclean=True), endpoints)
            return still_waiting, (await asyncio.wait_for(waiting, 0.5)).error
        finally:
            await groups.close()
            replicas.stop()

    assert asyncio.run(run()) == (True, "NOT_COORDINATOR")
