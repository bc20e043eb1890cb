"""Replication on real pods: a partition leader's pod deleted under acks=all producers.

Three LogDirs, each its own agent pod on its own volume; a Topic with 2 partitions × 3 replicas and
``min.insync.replicas=2``. A producer pod writes with ``acks=all``, following NOT_LEADER_OR_FOLLOWER
to the leader the answer names and retrying retriable errors, as Kafka's producer does. The pod of
partition 0's leader is deleted mid-stream (gracefully, as ``kubectl delete pod`` does): its
leadership moves, the StatefulSet brings the pod back on the same claim, it catches up as a
follower and rejoins the ISR, and every acknowledged record is on every replica, byte for byte.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from . import resources
from .conftest import Node
from .resources import condition, install, logdir, topic

NS = "replicated"
TOPIC = "payments"
LOGDIRS = ("dir-r1", "dir-r2", "dir-r3")
PARTITIONS = 2

# Runs in the producer pod. A record counts as acknowledged only on a 200 to acks=all; each line
# "ACK partition offset value" is one. Retriable errors are retried (a timed-out record may be
# written twice then, as with Kafka's producer without idempotence: the test checks acks only).
# BROKER_NOT_AVAILABLE is a 503 from an agent that is shutting down or still opening: another
# agent is tried, as a Kafka client goes to another broker when one goes away.
PRODUCER = resources.URLLIB_ACCESS + """
import json, sys, time, urllib.error, urllib.request
agents, topic, partitions, seconds = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
retriable = {"NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
             "REQUEST_TIMED_OUT", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "KAFKA_STORAGE_ERROR",
             "BROKER_NOT_AVAILABLE"}
leaders = {}
failed = 0

def send(p, value):
    url, turn = leaders.get(p, agents[p % len(agents)]), 0
    deadline = time.monotonic() + 60
    body = json.dumps({"records": [{"key": "k", "value": value}]}).encode()
    while time.monotonic() < deadline:
        request = urllib.request.Request(f"{url}/v1/topics/{topic}/partitions/{p}/records?acks=all", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=35) as reply:
                leaders[p] = url
                return json.load(reply)["baseOffset"]
        except urllib.error.HTTPError as error:
            answer = json.loads(error.read() or b"{}")
            if answer.get("error_code") not in retriable:
                raise SystemExit(f"partition {p}: {error.code} {answer}")
            hint = (answer.get("leader") or {}).get("url")
            if hint and hint != url:
                url = hint
                continue
        except OSError:
            pass
        turn += 1
        url = agents[(p + turn) % len(agents)]
        time.sleep(0.2)
    return None

i, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    p, value = i % partitions, f"v{i}"
    offset = send(p, value)
    if offset is None:
        failed += 1
    else:
        print(f"ACK {p} {offset} {value}", flush=True)
    i += 1
print(f"DONE sent={i} failed={failed}", flush=True)
"""

# Runs in a checker pod: each replica's stats, and each leader's records from offset 0.
CHECKER = resources.URLLIB_ACCESS + """
import json, sys, urllib.error, urllib.request
agents, topic, partitions = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
out = {"stats": [], "records": {}}
for agent in agents:
    for p in range(partitions):
        with urllib.request.urlopen(f"{agent}/v1/topics/{topic}/partitions/{p}", timeout=30) as reply:
            out["stats"].append([p, json.load(reply)])
        try:
            offset, got = 0, []
            while True:
                url = f"{agent}/v1/topics/{topic}/partitions/{p}/records?offset={offset}&maxBytes=1048576&maxWaitMs=0"
                with urllib.request.urlopen(url, timeout=30) as reply:
                    records = json.load(reply)["records"]
                if not records:
                    break
                got += [[r["offset"], r["value"]] for r in records]
                offset = records[-1]["offset"] + 1
            out["records"][str(p)] = got
        except urllib.error.HTTPError as error:
            if error.code != 421:     # a follower: its leader answers for it
                raise
print(json.dumps(out))
"""


def get(node: Node, *what: str) -> dict[str, Any]:
    return resources.get(node, NS, *what)


def partition_records(node: Node) -> dict[int, dict[str, Any]]:
    status = get(node, "topic", TOPIC).get("status") or {}
    return {r["partition"]: r for r in status.get("partitions") or []}


def settled(node: Node) -> dict[int, dict[str, Any]] | None:
    records = partition_records(node)
    if len(records) == PARTITIONS and all(r.get("leader") and len(r["isr"]) == 3 for r in records.values()):
        return records
    return None


def log_digest(node: Node, pod: str, partition: int) -> str:
    """The SHA-256 of a replica's .log files, read inside its pod."""
    return node.kubectl("-n", NS, "exec", pod, "--", "python", "-c", (
        "import glob, hashlib, sys; h = hashlib.sha256()\n"
        f"for f in sorted(glob.glob('/var/lib/stratalog/data-0/{TOPIC}-{partition}/*.log')): "
        "h.update(open(f, 'rb').read())\n"
        "print(h.hexdigest())")).strip()


@pytest.fixture(scope="module")
def replicated(node: Node) -> Node:
    node.kubectl("create", "namespace", NS)
    node.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    install(node, "replicated", NS)
    for name in LOGDIRS:
        node.kubectl("-n", NS, "apply", "-f", "-", input=logdir(name, "local-path", volumes=1, pool="replicated"))
    node.kubectl("-n", NS, "apply", "-f", "-", input=topic(TOPIC, "replicated", PARTITIONS, replicas=3,
                                                           config={"min.insync.replicas": 2}))
    for name in LOGDIRS:
        node.wait_for(f"LogDir {name} Ready", lambda: condition(get(node, "logdir", name), "Ready").get(
            "status") == "True", timeout=300, namespace=NS)
    node.wait_for("every partition led with three in-sync replicas", lambda: settled(node), timeout=180, namespace=NS)
    return node


def test_a_deleted_leader_pod_under_acks_all_loses_nothing_and_comes_back_to_catch_up(replicated):
    node = replicated
    agents = ",".join(resources.agent_url(name, NS) for name in LOGDIRS)
    before = partition_records(node)
    victim = before[0]["leader"]
    victim_pod = f"{victim}-0"
    uid = get(node, "pod", victim_pod)["metadata"]["uid"]

    resources.start_pod(node, NS, "producer", ["python", "-c", PRODUCER, agents, TOPIC, str(PARTITIONS), "60"])
    node.wait_for("the producer's first acknowledgements", lambda: node.kubectl(
        "-n", NS, "logs", "producer", check=False).count("ACK ") >= 20, timeout=120, namespace=NS)
    node.kubectl("-n", NS, "delete", "pod", victim_pod, "--wait=false")
    # Out of the ISR, so that the way back in is a follower's: fetch from the new leader until caught up.
    moved = node.wait_for(f"partition 0's leadership and ISR to leave {victim}", lambda: (
        r := partition_records(node)[0]).get("leader") not in (None, victim) and victim not in r["isr"] and r,
        timeout=120, namespace=NS)
    assert moved["leaderEpoch"] > before[0]["leaderEpoch"], moved
    node.wait_for(f"a new {victim_pod} Ready", lambda: (p := get(node, "pod", victim_pod)) and p["metadata"][
        "uid"] != uid and condition(p, "Ready").get("status") == "True", timeout=240, namespace=NS)
    out = resources.finish_pod(node, NS, "producer", timeout=180)

    acked = {(int(p), int(o)): v for line in out.splitlines() if line.startswith("ACK ")
             for _, p, o, v in [line.split()]}
    [done] = [line for line in out.splitlines() if line.startswith("DONE ")]
    assert done.endswith(" failed=0"), f"produces that gave up after 60 s of retries: {done}"
    assert len(acked) > 40, done

    checks = itertools.count()

    def caught_up() -> dict[str, Any] | None:
        if not settled(node):
            return None
        # A pod name of its own each time: the previous checker may still be terminating.
        state = json.loads(resources.python_client(node, NS, f"checker-{next(checks)}", CHECKER, agents, TOPIC,
                                                   str(PARTITIONS)))
        marks = {(p, s["logEndOffset"], s["highWatermark"]) for p, s in state["stats"]}
        # One log end per partition on every replica, and each replica's high watermark there too.
        return state if len(marks) == PARTITIONS and all(le == hw for _, le, hw in marks) else None

    state = node.wait_for(f"{victim} back in every ISR with every replica at one log end", caught_up,
                          timeout=180, namespace=NS)
    final = {(int(p), o): v for p, records in state["records"].items() for o, v in records}
    missing = {k: v for k, v in acked.items() if final.get(k) != v}
    assert not missing, f"acknowledged records not in the final log: {sorted(missing.items())[:5]}"
    for p in range(PARTITIONS):
        digests = {pod: log_digest(node, pod, p) for pod in (f"{name}-0" for name in LOGDIRS)}
        assert len(set(digests.values())) == 1, f"partition {p}'s replicas differ: {digests}"
    print(f"{victim}'s pod deleted under acks=all: {len(acked)} acknowledged, leadership of partition 0 moved "
          f"to {moved['leader']} at epoch {moved['leaderEpoch']}; {done}")


# Runs in a client pod with kafka-python (from a ConfigMap): bootstraps from the chart's Service with
# the pod's token over SASL_SSL, produces with acks=all, then reads everything back as a group.
KAFKA_CLIENT = """
import json, os, sys, time
from kafka import KafkaConsumer, KafkaProducer
bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
security = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL", "ssl_cafile": os.environ["STRATALOG_CA_FILE"],
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "client",
            "sasl_plain_password": open(os.environ["STRATALOG_TOKEN_FILE"]).read().strip()}
producer = KafkaProducer(acks="all", retries=20, **security)
sent = [f"kafka-{i}" for i in range(count)]
for value in sent:
    producer.send(topic, value.encode()).get(timeout=60)
brokers = sorted(f"{b.host}:{b.port}" for b in producer._metadata.brokers())
producer.close()
consumer = KafkaConsumer(topic, group_id="pods", auto_offset_reset="earliest", enable_auto_commit=False, **security)
read, deadline = set(), time.monotonic() + 150
while not set(sent) <= read and time.monotonic() < deadline:
    for records in consumer.poll(timeout_ms=500).values():
        read.update(r.value.decode() for r in records)
consumer.commit()
consumer.close()
print(json.dumps({"brokers": brokers, "missing": sorted(set(sent) - read)}))
"""


def test_a_kafka_client_pod_bootstraps_from_the_charts_service_produces_and_reads_back_as_a_group(replicated):
    node = replicated
    mounts = resources.kafka_python_configmap(node, NS)
    out = resources.python_client(
        node, NS, "kafka-client", KAFKA_CLIENT, f"replicated-stratalog-kafka-bootstrap.{NS}.svc:9092", TOPIC, "30",
        timeout=240, configmaps=mounts, env={"PYTHONPATH": f"{resources.KAFKA_PYTHON_DIR}/kafka.zip"})
    result = json.loads(out.strip().splitlines()[-1])
    # Metadata names every agent by its Service; every record sent came back to the group.
    assert result["brokers"] == sorted(f"{name}.{NS}.svc:9092" for name in LOGDIRS), result
    assert result["missing"] == [], result
    # The group's first FindCoordinator had the controller make the namespace's offsets Topic.
    offsets = get(node, "topic", "consumer-offsets")
    assert offsets["spec"]["topicName"] == "__consumer_offsets" and offsets["spec"]["replicas"] == 3
