"""Kafka clients against a namespace's agents: every agent is a broker of one Kafka cluster.

The controller and three LogDir agents run as real processes against the real API server, each
agent with a Kafka listener (``--kafka-listen``) that it advertises on its Lease. Topics of
3 replicas with ``min.insync.replicas=2`` are made as Topic resources. Real clients
(kafka-python, and librdkafka through confluent-kafka, and Kafka's own tools) are given one
agent to bootstrap from; Metadata from any agent lists all three and each partition's leader as
the Topic's status records it, so the clients send each request to its leader, follow a
leadership that moves, and read back through any agent what they wrote, which the HTTP API
agrees with.

Spark's own Kafka source and sink (``format("kafka")``) read the agents in batch and streaming and
write to them, given one agent.

Consumer groups: the first FindCoordinator has the controller make the namespace's
``__consumer_offsets`` Topic (3 partitions here, ``--offsets-topic-partitions``); each group is
coordinated by the leader of its partition, and when that agent is killed the next leader
coordinates the group with its committed offsets.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kafka_tools import kafka_toolchain  # noqa: F401 - the fixture
from kafka_wire import call
from stratalog.common.names import OFFSETS_TOPIC
from stratalog_operator.replica_records import broker_id

from .conftest import KubeCluster
from .roles import Agent, Operator, free_port, logdir_manifests, wait_for

NS = "kafka-agents"
LOGDIRS = ("kafka-a", "kafka-b", "kafka-c")
TOPIC = "clicks"
PARTITIONS = 2
GROUP_TOPIC = "views"
GROUP_PARTITIONS = 3
OFFSETS_PARTITIONS = 3
SOLO_TOPIC = "solo"   # one copy: held by one agent, described by all
AGENT_ARGS = ("--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500",
              "--config", "replica.lag.time.max.ms=3000", "--config", "replica.fetch.wait.max.ms=200")


class Bed:
    def __init__(self, kube: KubeCluster, root: Path) -> None:
        self.kube = kube
        self.root = root
        self.operator = Operator(kube.env, NS, root / "operator.log", "--offsets-topic-partitions",
                                 str(OFFSETS_PARTITIONS))
        self.ports = {n: free_port() for n in LOGDIRS}
        self.agents = {n: Agent(kube.env, NS, n, [root / n / "data-0"], root / f"{n}.log", *AGENT_ARGS,
                                "--kafka-listen", f"127.0.0.1:{self.ports[n]}") for n in LOGDIRS}
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {kube.token}"

    @property
    def logs(self) -> list[Path]:
        return [self.operator.log_path, *(a.log_path for a in self.agents.values())]

    def kafka(self, logdir: str) -> str:
        return f"127.0.0.1:{self.ports[logdir]}"

    def records(self, topic: str = TOPIC) -> dict[int, dict[str, Any]]:
        r = self.api.get(f"{self.kube.server}/apis/stratalog.io/v1alpha1/namespaces/{NS}/topics/{topic}",
                         verify=str(self.kube.ca), timeout=10)
        if r.status_code == 404:
            return {}
        r.raise_for_status()
        return {p["partition"]: p for p in (r.json().get("status") or {}).get("partitions") or []}

    def settled(self, topic: str = TOPIC, partitions: int = PARTITIONS, resource: str | None = None
                ) -> dict[int, dict[str, Any]] | None:
        """Every partition led with all three replicas in its ISR, each leader acting on its record,
        and every agent's Metadata listing all three brokers and those leaders."""
        records = self.records(resource or topic)
        if len(records) != partitions or any(r.get("leader") is None or len(r["isr"]) != 3
                                             for r in records.values()):
            return None
        for p, record in records.items():
            leader = self.agents[record["leader"]]
            if requests.get(f"{leader.base}/v1/topics/{topic}/partitions/{p}/offsets", params={"timestamp": -1},
                            timeout=10).status_code != 200:
                return None
        for logdir in LOGDIRS:
            brokers, described = metadata(self.kafka(logdir), topic)
            if len(brokers) != 3 or {p: leader for p, (leader, _, _) in described.items()} != \
                    {p: broker_id(r["leader"]) for p, r in records.items()}:
                return None
        return records


def metadata(address: str, name: str = TOPIC
             ) -> tuple[dict[int, tuple[str, int]], dict[int, tuple[int, list[int], list[int]]]]:
    """Metadata v12 of a topic from one listener: brokers by id, and partition -> (leader, replicas, ISR)."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse

    _, answer = call(address, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=name),),
                                              allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), MetadataResponse)
    brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
    (topic,) = answer.topics
    assert topic.error_code == 0, topic
    return brokers, {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                     for p in topic.partitions}


def _manifests() -> str:
    docs = logdir_manifests(LOGDIRS)
    docs.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
                f"metadata: {{name: {TOPIC}}}\n"
                f"spec: {{partitions: {PARTITIONS}, replicas: 3, config: {{min.insync.replicas: 2}}}}\n")
    docs.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
                f"metadata: {{name: {GROUP_TOPIC}}}\n"
                f"spec: {{partitions: {GROUP_PARTITIONS}, replicas: 3, config: {{min.insync.replicas: 2}}}}\n")
    docs.append("apiVersion: stratalog.io/v1alpha1\nkind: Topic\n"
                f"metadata: {{name: {SOLO_TOPIC}}}\n"
                "spec: {partitions: 1, replicas: 1, config: {retention.ms: 3600000}}\n")
    return "---\n".join(docs)


@pytest.fixture(scope="module")
def bed(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    repo = Path(__file__).resolve().parents[2]
    kube_cluster.kubectl_run("apply", "-f", str(repo / "crds"))
    kube_cluster.kubectl_run("create", "namespace", NS)
    bed = Bed(kube_cluster, tmp_path_factory.mktemp("kafka-agents"))
    bed.operator.start()
    for agent in bed.agents.values():
        agent.start()
    kube_cluster.kubectl_run("-n", NS, "apply", "-f", "-", input=_manifests())
    try:
        wait_for("every partition led, replicated and described alike by every agent", bed.settled, timeout=120,
                 logs=bed.logs)
        yield bed
    finally:
        for role in (*bed.agents.values(), bed.operator):
            role.stop()


@pytest.fixture(autouse=True)
def every_role_up(request: pytest.FixtureRequest) -> None:
    """Each test starts with every role running and the partitions settled again."""
    if "bed" in request.fixturenames:
        bed: Bed = request.getfixturevalue("bed")
        for role in (bed.operator, *bed.agents.values()):
            if not role.alive():
                role.start()
        wait_for("the partitions to settle", bed.settled, timeout=120, logs=bed.logs)


def test_every_agent_lists_the_three_agents_as_brokers_and_each_partitions_leader_and_isr_as_recorded(bed):
    records = bed.records()
    expected_brokers = {broker_id(n): ("127.0.0.1", bed.ports[n]) for n in LOGDIRS}
    for logdir in LOGDIRS:
        brokers, partitions = metadata(bed.kafka(logdir))
        assert brokers == expected_brokers, logdir
        for p, (leader, replicas, isr) in partitions.items():
            assert leader == broker_id(records[p]["leader"])
            assert replicas == [broker_id(r) for r in records[p]["replicas"]]
            assert sorted(isr) == sorted(broker_id(r) for r in records[p]["isr"])


def test_producers_given_one_agent_write_to_each_leader_and_a_consumer_reads_it_all_back_as_http_does(bed):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    records = bed.records()
    # Bootstrap from an agent that leads nothing, when there is one: every produce must be routed by Metadata.
    leaders = {r["leader"] for r in records.values()}
    bootstrap = bed.kafka(next((n for n in LOGDIRS if n not in leaders), LOGDIRS[0]))
    python = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(100):
        python.send(TOPIC, key=b"k", value=f"python-{i}".encode(), partition=i % PARTITIONS)
    python.flush(timeout=60)
    python.close()
    delivered: list[Any] = []
    rdkafka = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                        "linger.ms": 5})
    for i in range(100):
        rdkafka.produce(TOPIC, value=f"rdkafka-{i}".encode(), partition=i % PARTITIONS,
                        on_delivery=lambda error, message: delivered.append(error))
    assert rdkafka.flush(60) == 0
    assert delivered == [None] * 100

    consumer = KafkaConsumer(bootstrap_servers=bed.kafka(LOGDIRS[0]), enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for message in consumer:
        read[message.partition].append((message.offset, message.value))
    consumer.close()
    for p in range(PARTITIONS):
        values = [v for _, v in read[p]]
        assert values == [f"python-{i}".encode() for i in range(p, 100, PARTITIONS)] + \
            [f"rdkafka-{i}".encode() for i in range(p, 100, PARTITIONS)], f"partition {p}"
        leader = bed.agents[records[p]["leader"]]
        over_http = leader.consume(TOPIC, p)
        assert [(r["offset"], r["value"].encode()) for r in over_http] == read[p]


def test_the_java_clients_console_tools_aiokafka_and_a_librdkafka_group_work_through_the_agents(
        bed, kafka_toolchain):  # noqa: F811 - the fixture
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AIOTopicPartition
    from confluent_kafka import Consumer

    # The Java producer as it comes (idempotent, acks=all), given one agent; it writes to each leader.
    lines = "".join(f"java line {i}\n" for i in range(6)).encode()
    produced = kafka_toolchain.java("org.apache.kafka.tools.ConsoleProducer", [
        "--bootstrap-server", bed.kafka(LOGDIRS[1]), "--topic", GROUP_TOPIC], input=lines)
    assert produced.returncode == 0, produced.describe()

    async def aio() -> list[str]:
        producer = AIOKafkaProducer(bootstrap_servers=bed.kafka(LOGDIRS[2]), acks="all")
        await producer.start()
        try:
            sent = [await producer.send_and_wait(GROUP_TOPIC, f"aiokafka {i}".encode(), partition=0)
                    for i in range(6)]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bed.kafka(LOGDIRS[0]), enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AIOTopicPartition(GROUP_TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, sent[0].offset)
            got: list[str] = []
            while len(got) < 6:
                batch = await consumer.getmany(timeout_ms=10000)
                assert batch, "no records within 10 s"
                got += [m.value.decode() for messages in batch.values() for m in messages]
            return got[:6]
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == [f"aiokafka {i}" for i in range(6)]
    wanted = {f"java line {i}" for i in range(6)} | {f"aiokafka {i}" for i in range(6)}

    # The Java console consumer in a group reads them all, and so does a librdkafka consumer in another.
    consumed = kafka_toolchain.java("org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", bed.kafka(LOGDIRS[0]), "--topic", GROUP_TOPIC, "--group", "console-group",
        "--from-beginning", "--timeout-ms", "20000"])
    assert wanted <= set(consumed.stdout.splitlines()), consumed.describe()
    consumer = Consumer({"bootstrap.servers": bed.kafka(LOGDIRS[2]), "group.id": "rd-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([GROUP_TOPIC])
    got: set[str] = set()
    ends: dict[int, int] = {}   # partition -> past the last offset read there
    deadline = time.monotonic() + 90
    while not wanted <= got and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.add(message.value().decode())
            ends[message.partition()] = max(ends.get(message.partition(), 0), message.offset() + 1)
    consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    consumer.close()
    assert wanted <= got
    # Each partition read from has its commit, where the reading ended.
    assert {tp.partition: tp.offset for tp in committed if tp.partition in ends} == ends, committed


def test_sparks_kafka_source_reads_the_agents_in_batch_and_stream_and_its_sink_writes_to_them(bed, spark):
    from kafka import KafkaProducer

    records = bed.records()
    producer = KafkaProducer(bootstrap_servers=bed.kafka(LOGDIRS[0]), acks="all")
    for i in range(20):
        producer.send(TOPIC, key=b"spark", value=f"for spark {i}".encode(), partition=i % PARTITIONS)
    producer.flush(timeout=60)
    producer.close()
    over_http = sorted((p, r["offset"], r["value"]) for p in range(PARTITIONS)
                       for r in bed.agents[records[p]["leader"]].consume(TOPIC, p))

    through_kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", bed.kafka(LOGDIRS[1]))
                     .option("subscribe", TOPIC).load())
    batch = sorted((r.partition, r.offset, bytes(r.value).decode()) for r in through_kafka.collect())
    assert batch == over_http and len(batch) >= 20

    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bed.kafka(LOGDIRS[2]))
             .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("memory").queryName("agents_stream").trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    streamed = sorted((r.partition, r.offset, r.value) for r in spark.sql("SELECT * FROM agents_stream").collect())
    assert streamed == over_http

    frame = spark.createDataFrame([(f"written by spark {i}", i % PARTITIONS) for i in range(10)],
                                  "value STRING, partition INT")
    frame.write.format("kafka").option("kafka.bootstrap.servers", bed.kafka(LOGDIRS[0])).option("topic", TOPIC).save()
    written = {r["value"] for p in range(PARTITIONS) for r in bed.agents[records[p]["leader"]].consume(TOPIC, p)}
    assert {f"written by spark {i}" for i in range(10)} <= written


def test_kafka_topics_describes_the_topic_through_any_agent_and_topic_changes_name_the_resource_to_edit(
        bed, kafka_toolchain):  # noqa: F811 - the fixture
    records = bed.records()
    described = kafka_toolchain.java("org.apache.kafka.tools.TopicCommand",
                                     ["--bootstrap-server", bed.kafka(LOGDIRS[2]), "--describe", "--topic", TOPIC])
    assert described.returncode == 0, described.describe()
    assert f"PartitionCount: {PARTITIONS}" in described.stdout and "ReplicationFactor: 3" in described.stdout
    for p in range(PARTITIONS):
        line = next(line for line in described.stdout.splitlines() if f"Partition: {p}" in line)
        assert f"Leader: {broker_id(records[p]['leader'])}" in line, line

    created = kafka_toolchain.java("org.apache.kafka.tools.TopicCommand",
                                   ["--bootstrap-server", bed.kafka(LOGDIRS[0]), "--create", "--topic", "made-by-cli",
                                    "--partitions", "1"])
    assert created.returncode != 0
    assert "PolicyViolationException" in created.stderr + created.stdout
    assert f"topics of namespace {NS} are Topic resources" in created.stderr + created.stdout

    deleted = kafka_toolchain.java("org.apache.kafka.tools.TopicCommand",
                                   ["--bootstrap-server", bed.kafka(LOGDIRS[1]), "--delete", "--topic", TOPIC])
    assert deleted.returncode != 0
    assert f"is the Topic resource {NS}/{TOPIC}" in deleted.stderr + deleted.stdout
    assert len(bed.records()) == PARTITIONS   # nothing was deleted, on any agent
    for logdir in LOGDIRS:
        assert requests.get(f"{bed.agents[logdir].base}/v1/topics/{TOPIC}", timeout=10).status_code == 200


def test_every_agent_describes_a_topics_configs_even_one_holding_no_replica_of_it(bed):
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse

    record = wait_for("the one-copy topic placed", lambda: bed.records(SOLO_TOPIC).get(0), timeout=60,
                      logs=bed.logs)
    holder = record["replicas"][0]
    for logdir in LOGDIRS:
        _, answer = call(bed.kafka(logdir), DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=2, resource_name=SOLO_TOPIC,
                                               configuration_keys=("retention.ms", "cleanup.policy")),),
            include_synonyms=False, include_documentation=False), DescribeConfigsResponse)
        (result,) = answer.results
        assert result.error_code == 0, (logdir, holder, result.error_message)
        assert {c.name: (c.value, c.config_source) for c in result.configs} == {
            "retention.ms": ("3600000", 1), "cleanup.policy": ("delete", 5)}, (logdir, holder)


def test_the_first_find_coordinator_has_the_offsets_topic_made_and_then_names_its_partitions_leader(bed):
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse

    from stratalog.broker.groups.offsets_records import partition_for

    def find(group: str) -> Any:
        _, answer = call(bed.kafka(LOGDIRS[0]), FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)),
                         FindCoordinatorResponse)
        (found,) = answer.coordinators
        return found

    first = find("billing")
    if not bed.records("consumer-offsets"):   # the first ask of the namespace: none yet, and it is asked for
        assert first.error_code == 15, first   # COORDINATOR_NOT_AVAILABLE: clients retry
    wait_for("the offsets topic made and settled", lambda: bed.settled(OFFSETS_TOPIC, OFFSETS_PARTITIONS, "consumer-offsets"),
             timeout=120, logs=bed.logs)
    offsets = bed.records("consumer-offsets")
    found = wait_for("a coordinator", lambda: (lambda f: f if f.error_code == 0 else None)(find("billing")),
                     timeout=30, logs=bed.logs)
    leader = offsets[partition_for("billing", OFFSETS_PARTITIONS)]["leader"]
    assert (found.node_id, found.host, found.port) == (broker_id(leader), "127.0.0.1", bed.ports[leader])


class Members:
    """Consumers of one group, each polling (and committing) on a thread of its own, as applications do."""

    def __init__(self, consumers: list[Any]) -> None:
        self.consumers = consumers
        self.read: list[list[tuple[int, int, bytes]]] = [[] for _ in consumers]
        self._done = [threading.Event() for _ in consumers]
        self._threads = [threading.Thread(target=self._poll, args=(i,), daemon=True) for i in range(len(consumers))]
        for thread in self._threads:
            thread.start()

    def _poll(self, index: int) -> None:
        from kafka.errors import CommitFailedError, RebalanceInProgressError

        consumer = self.consumers[index]
        while not self._done[index].is_set():
            for records in consumer.poll(timeout_ms=200).values():
                self.read[index] += [(r.partition, r.offset, r.value) for r in records]
            try:
                consumer.commit()
            except (CommitFailedError, RebalanceInProgressError):
                pass   # a rebalance came between the poll and the commit: the records may come again

    def owned(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for i, c in enumerate(self.consumers)
                if not self._done[i].is_set()]

    def leave(self, index: int) -> None:
        """The member stops polling and closes (LeaveGroup)."""
        self._done[index].set()
        self._threads[index].join(timeout=30)
        self.consumers[index].close()

    def stop(self) -> None:
        for index in range(len(self.consumers)):
            if not self._done[index].is_set():
                self.leave(index)


def test_a_group_of_three_consumes_every_partition_and_rebalances_when_one_leaves(bed, kafka_toolchain):  # noqa: F811
    from kafka import KafkaConsumer, KafkaProducer

    wait_for("the group topic settled", lambda: bed.settled(GROUP_TOPIC, GROUP_PARTITIONS), timeout=120,
             logs=bed.logs)
    members = Members([KafkaConsumer(GROUP_TOPIC, bootstrap_servers=bed.kafka(LOGDIRS[i]), group_id="trio",
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     session_timeout_ms=10000, heartbeat_interval_ms=500) for i in range(3)])
    try:
        wait_for("the three members to own one partition each",
                 lambda: sorted(len(p) for p in members.owned()) == [1, 1, 1], timeout=90, logs=bed.logs)
        assert set().union(*members.owned()) == set(range(GROUP_PARTITIONS))

        producer = KafkaProducer(bootstrap_servers=bed.kafka(LOGDIRS[2]), acks="all")
        sent = {f"view-{i}".encode(): i % GROUP_PARTITIONS for i in range(60)}   # value -> its partition
        for value, partition in sent.items():
            producer.send(GROUP_TOPIC, value=value, partition=partition)
        producer.flush(timeout=60)
        producer.close()
        wait_for("the group to read every record", lambda: set(sent.items()) <= {
            (v, p) for got in members.read for p, _, v in got}, timeout=60, logs=bed.logs)
        # Each partition was read by the one member that owns it.
        for index, got in enumerate(members.read):
            assert {p for p, _, _ in got} <= members.owned()[index]

        def described() -> list[list[str]] | None:
            result = kafka_toolchain.java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                                          ["--bootstrap-server", bed.kafka(LOGDIRS[1]), "--describe", "--group",
                                           "trio"])
            assert result.returncode == 0, result.describe()
            rows = [line.split() for line in result.stdout.splitlines() if line.startswith("trio ")]
            # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID ...: all committed, no lag
            done = sorted(int(r[2]) for r in rows) == list(range(GROUP_PARTITIONS)) and \
                all(r[3] == r[4] and r[5] == "0" and r[6] != "-" for r in rows)
            return rows if done else None

        wait_for("kafka-consumer-groups to describe three members with nothing left to read", described,
                 timeout=60, interval=1.0, logs=bed.logs)

        members.leave(2)   # LeaveGroup: the other two share its partition
        wait_for("the two left to own all three partitions", lambda: sorted(
            len(p) for p in members.owned()) == [1, 2] and set().union(*members.owned()) == set(range(3)),
            timeout=90, logs=bed.logs)
    finally:
        members.stop()


def test_when_the_coordinator_agent_is_killed_the_next_leader_coordinates_the_group_with_its_commits(bed):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    from stratalog.broker.groups.offsets_records import partition_for

    wait_for("the offsets topic settled", lambda: bed.settled(OFFSETS_TOPIC, OFFSETS_PARTITIONS, "consumer-offsets"),
             timeout=120, logs=bed.logs)
    group = "survivors"
    tp = TopicPartition(GROUP_TOPIC, 0)
    producer = KafkaProducer(bootstrap_servers=bed.kafka(LOGDIRS[0]), acks="all")
    for i in range(20):
        producer.send(GROUP_TOPIC, value=f"s-{i}".encode(), partition=0)
    producer.flush(timeout=60)
    producer.close()
    end = KafkaConsumer(bootstrap_servers=bed.kafka(LOGDIRS[0])).end_offsets([tp])[tp]

    committer = KafkaConsumer(bootstrap_servers=bed.kafka(LOGDIRS[0]), group_id=group, enable_auto_commit=False)
    committer.assign([tp])
    committer.commit({tp: OffsetAndMetadata(end - 5, "", -1)})
    assert committer.committed(tp) == end - 5
    committer.close()

    coordinator = bed.records("consumer-offsets")[partition_for(group, OFFSETS_PARTITIONS)]["leader"]
    bed.agents[coordinator].kill()
    survivor = next(n for n in LOGDIRS if n != coordinator)
    wait_for("the group's offsets partition led elsewhere", lambda: bed.records("consumer-offsets")[
        partition_for(group, OFFSETS_PARTITIONS)]["leader"] not in (None, coordinator), timeout=60, logs=bed.logs)

    reader = KafkaConsumer(bootstrap_servers=bed.kafka(survivor), group_id=group, enable_auto_commit=False,
                           consumer_timeout_ms=3000)
    reader.assign([tp])
    assert wait_for("the committed offset from the new coordinator", lambda: reader.committed(tp), timeout=60,
                    logs=bed.logs) == end - 5
    assert [m.value for m in reader] == [f"s-{i}".encode() for i in range(15, 20)]
    reader.close()


def test_an_acks_all_producer_follows_the_leadership_when_its_leader_agent_is_killed(bed):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    records = bed.records()
    victim = records[0]["leader"]
    survivor = next(n for n in LOGDIRS if n != victim)
    producer = KafkaProducer(bootstrap_servers=bed.kafka(survivor), acks="all", retries=1000,
                             retry_backoff_ms=200, request_timeout_ms=10000, max_in_flight_requests_per_connection=1)
    acked: list[tuple[int, bytes]] = []
    before = len([1 for _ in bed.agents[victim].consume(TOPIC, 0)])
    for i in range(200):
        if i == 50:
            bed.agents[victim].proc.send_signal(signal.SIGKILL)   # type: ignore[union-attr]
            bed.agents[victim].proc.wait(timeout=30)              # type: ignore[union-attr]
        value = f"failover-{i}".encode()
        metadata_of = producer.send(TOPIC, value=value, partition=0).get(timeout=60)
        acked.append((metadata_of.offset, value))
        time.sleep(0.01)
    producer.close()
    moved = bed.records()[0]["leader"]
    assert moved != victim, "the controller moved partition 0's leadership away from the killed agent"

    consumer = KafkaConsumer(bootstrap_servers=bed.kafka(survivor), enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek(TopicPartition(TOPIC, 0), before)
    read = {m.offset: m.value for m in consumer}
    consumer.close()
    lost = [(o, v) for o, v in acked if read.get(o) != v]
    assert not lost, f"acknowledged records not read back at their offsets: {lost[:5]}"
