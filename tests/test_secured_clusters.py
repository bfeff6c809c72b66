"""A flow between two SASL_SSL clusters (TLS, SCRAM-SHA-512 and PLAIN, ACLs enforced) copies and checkpoints.

The two brokers are this module's own (``LocalBroker(sasl_users=...)``): TLS material made with
openssl in their cluster dirs, ``allow.everyone.if.no.acl.found=false``, ``admin`` the only super
user besides the controller listener. The flow runs as ``alice``, who holds only the ACLs granted
here; the source side authenticates with SCRAM-SHA-512 and the target side with PLAIN.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from bench.faults import free_port, health, metrics
from mirrorlake.cli import main
from mirrorlake.groundtruth import read_partition
from mirrorlake.localkafka import LocalBroker
from replicator.access.permissions import Permission, required_permissions
from replicator.client.failover_consumer import FailoverConsumer, Move
from replicator.client.state_reader import read_state_log
from replicator.config import parse_config
from replicator.errors import AuthenticationFailedError, FailoverError, MissingPermissionError
from replicator.events import Checkpoint, Cutover
from replicator.failover.cutover import fenced_cutover
from replicator.flow.control.outage import TRANSPORT_CODES
from replicator.flow.runtime import Replicator
from replicator.kafka.connectivity import wait_for_cluster
from tests.broker_pair import broker_pair
from tests.consuming_app import App, checkpointed
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
USERS = {"admin": f"admin-{uuid.uuid4().hex[:10]}", "alice": f"alice-{uuid.uuid4().hex[:10]}"}
RECORDS = 2000
ROOT = Path(__file__).resolve().parents[1]
SCRAM = "SCRAM-SHA-512"
ALLOW = AclPermissionType.ALLOW


@contextmanager
def secured_brokers(work: Path) -> Iterator[dict[str, LocalBroker]]:
    """Two SASL_SSL brokers, S and T, with alice's ACLs granted; stopped on exit."""
    with broker_pair(work, "secured clusters", sasl_users=USERS) as brokers:
        for broker in brokers.values():
            grant_alice(broker)
        yield brokers


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[dict[str, LocalBroker]]:
    with secured_brokers(tmp_path_factory.mktemp("secured")) as brokers:
        yield brokers


def grant_alice(broker: LocalBroker) -> None:
    """What a flow's principal needs on either side (topics, groups, transactional ids, cluster)."""
    admin = AdminClient(broker.client_config("admin", mechanism="PLAIN"))
    allow = [
        AclBinding(
            kind, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW
        )
        for kind, name in (
            (ResourceType.TOPIC, "*"),
            (ResourceType.GROUP, "*"),
            (ResourceType.TRANSACTIONAL_ID, "*"),
            (ResourceType.BROKER, "kafka-cluster"),
        )
    ]
    for future in admin.create_acls(allow).values():
        future.result(timeout=30)


def committed(group: Consumer, topic: str) -> bool:
    try:
        group.commit(offsets=[TopicPartition(topic, 0, RECORDS // 2)], asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in TRANSPORT_CODES:  # the group coordinator is not there yet
            raise
        return False
    return True


def keys(conf: dict[str, str], topic: str) -> list[bytes]:
    """The keys of ``topic``'s partition 0 a read_committed consumer sees, read to the end."""
    consumer = Consumer(
        {**conf, "group.id": f"reader-{uuid.uuid4().hex}", "enable.partition.eof": True,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        while True:
            for msg in consumer.consume(1000, 5):
                if (err := msg.error()) is None:
                    out.append(msg.key())  # type: ignore[arg-type]
                elif err.code() == KafkaError._PARTITION_EOF:
                    return out  # markers and aborted records are never delivered
    finally:
        consumer.close()


def test_a_flow_over_sasl_ssl_copies_and_checkpoints_as_a_principal_with_acls(secured):
    source, target = secured["S"], secured["T"]
    alice_s = source.client_config("alice")  # SCRAM-SHA-512
    alice_t = target.client_config("alice", mechanism="PLAIN")
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(alice_s)  # kept referenced: a collected client fails its pending futures
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer(alice_s)
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(60) == 0
    group = Consumer({**alice_s, "group.id": "app", "enable.auto.commit": False})
    wait_for(lambda: committed(group, topic), "group app's commit (its coordinator loads first)", every_s=1)
    group.close()

    def client(conf: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in conf.items() if k != "bootstrap.servers"}

    config = parse_config(
        {
            "clusters": {
                "S": {"bootstrap_servers": source.bootstrap, "client": client(alice_s)},
                "T": {"bootstrap_servers": target.bootstrap, "client": client(alice_t)},
            },
            "flows": [
                {"source": "S", "target": "T", "topics": [topic], "groups": ["app"], "sync_topic_acls": False,
                 "emit_checkpoints_interval_seconds": 1}
            ],
            "replicator_id": "secured-test",
        },
        source="tests/test_secured_clusters.py",
    )  # fmt: skip
    stats = Replicator(config, status_port=None).run_until_caught_up()
    assert stats["S->T"].records == RECORDS
    assert keys(alice_t, f"S.{topic}") == [f"k{i}".encode() for i in range(RECORDS)]
    events = read_state_log(alice_t, "mirrorlake.events").events
    checkpoints = [e for e in events if isinstance(e, Checkpoint) and e.group == "app" and e.source_topic == topic]
    assert checkpoints, "no checkpoint of group app in T's state topic"
    assert checkpoints[-1].upstream_offset == RECORDS // 2
    assert checkpoints[-1].downstream_offset == RECORDS // 2


def test_a_canary_password_from_env_and_file_appears_nowhere(secured, tmp_path):
    """alice's password is the canary: given as ${env:...} and ${file:...}, never in the config text."""
    source, target = secured["S"], secured["T"]
    canary = USERS["alice"]
    password_file = tmp_path / "alice.password"
    password_file.write_text(canary + "\n")
    topic = f"canary-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(source.client_config("alice"))
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer(source.client_config("alice"))
    for i in range(100):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(60) == 0

    def client(broker: LocalBroker, password: str, mechanism: str) -> dict[str, str]:
        conf = broker.client_config("alice", mechanism=mechanism)
        return {**{k: v for k, v in conf.items() if k != "bootstrap.servers"}, "sasl.password": password}

    def write_config(target_password: str) -> Path:
        data = {
            "clusters": {
                "S": {
                    "bootstrap_servers": source.bootstrap,
                    "client": client(source, "${env:ML_CANARY}", "SCRAM-SHA-512"),
                },
                "T": {"bootstrap_servers": target.bootstrap, "client": client(target, target_password, "PLAIN")},
            },
            "flows": [{"source": "S", "target": "T", "topics": [topic], "sync_topic_acls": False}],
            "replicator_id": "canary-test",
            "connect_timeout_seconds": 5,
        }
        path = tmp_path / f"canary-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump(data))
        assert canary not in path.read_text()
        return path

    env = {**os.environ, "ML_CANARY": canary}
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorlake.cli", "-vv", "replicate", str(write_config(f"${{file:{password_file}}}")),
         "--until-caught-up", "--status-port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pages = []
    while proc.poll() is None:
        pages += [metrics(port), json.dumps(health(port))]
        time.sleep(0.2)
    output = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, output[-3000:]
    assert "S->T: 100 records" in output
    assert any("mirrorlake_records" in page for page in pages), "no /metrics page was read while it ran"
    # a wrong password (from a file) and a missing variable: the error names neither value
    wrong = f"wrong-{uuid.uuid4().hex}"
    wrong_file = tmp_path / "wrong.password"
    wrong_file.write_text(wrong)
    failed = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "-vv", "replicate", str(write_config(f"${{file:{wrong_file}}}")),
         "--until-caught-up"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert failed.returncode != 0 and "error:" in failed.stderr + failed.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(write_config("${env:ML_NOT_SET_ANYWHERE}"))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 2 and "ML_NOT_SET_ANYWHERE" in missing.stderr, missing.stderr
    events = raw_values(target.client_config("admin", mechanism="PLAIN"), "mirrorlake.events")
    assert events, "no state events to look into"
    everything = "\n".join([output, *pages, failed.stdout, failed.stderr, missing.stdout, missing.stderr])
    assert canary not in everything and wrong not in everything
    assert not any(canary.encode() in value for value in events)


def raw_values(conf: dict[str, str], topic: str) -> list[bytes]:
    """Every record of ``topic`` as raw bytes (key and value joined), all partitions."""
    consumer = Consumer({**conf, "group.id": f"raw-{uuid.uuid4().hex}", "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        parts = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > low:
                parts.append(TopicPartition(topic, p, low))
        consumer.assign(parts)
        out, done = [], set()
        while len(done) < len(parts):
            for msg in consumer.consume(1000, 5):
                if msg.error():
                    done.add(msg.partition())
                else:
                    out.append((msg.key() or b"") + b"|" + (msg.value() or b""))
        return out
    finally:
        consumer.close()


def raw_state_topic(conf: dict[str, str]) -> str:
    """A new state topic holding 5 records ``raw-0`` .. ``raw-4`` (bronze keeps raw bytes)."""
    state_topic = f"state-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic(state_topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer(conf)
    for i in range(5):
        producer.produce(state_topic, key=b"k", value=f"raw-{i}".encode())
    assert producer.flush(60) == 0
    return state_topic


LOG4J2_TO_FILE = """rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c: %m%n
"""
BRONZE_ONLY = """import sys
from ingest.paths import LakehousePaths
from ingest.spark import spark_session
from lakehouse.build import run_bronze
from replicator.config import load_config
config = load_config(sys.argv[1])
run_bronze(spark_session(config.spark), config, LakehousePaths.of(config.lakehouse))
"""


@pytest.mark.spark
def test_sparks_own_log_at_info_of_a_secured_bronze_ingest_holds_no_password(secured, tmp_path):
    """The bronze ingest (the one Spark stage that talks to Kafka) in a Spark process of its own whose
    log4j writes everything at INFO to a file (Spark's driver and executors, and the Kafka client,
    which logs its settings), alice's password given as ``${file:...}``: it is in none of that log,
    the process's output, nor the lakehouse's files."""
    target = secured["T"]
    canary = USERS["alice"]
    password_file = tmp_path / "alice.password"
    password_file.write_text(canary + "\n")
    alice = target.client_config("alice", mechanism="PLAIN")
    state_topic = raw_state_topic(alice)
    spark_log, log4j = tmp_path / "spark.log", tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2_TO_FILE.format(path=spark_log))
    client = {k: v for k, v in alice.items() if k != "bootstrap.servers"}
    data = {
        "clusters": {
            "S": {"bootstrap_servers": secured["S"].bootstrap},
            "T": {"bootstrap_servers": target.bootstrap,
                  "client": {**client, "sasl.password": f"${{file:{password_file}}}"}},
        },
        "flows": [{"source": "S", "target": "T"}],
        "state_topic": state_topic,
        "lakehouse": {"path": str(tmp_path / "lakehouse")},
        "spark": {"master": "local[1]", "conf": {
            "spark.log.level": "INFO", "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}"}},
    }  # fmt: skip
    path = tmp_path / "bronze.yaml"
    path.write_text(yaml.safe_dump(data))
    assert canary not in path.read_text()
    ran = subprocess.run(
        [sys.executable, "-c", BRONZE_ONLY, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    log = spark_log.read_text(errors="replace")
    assert " INFO org.apache.kafka.clients.consumer.ConsumerConfig: ConsumerConfig values" in log, log[-3000:]
    assert "sasl.jaas.config = [hidden]" in log, "the Kafka client's settings are logged: the JAAS config hidden"
    assert canary not in log + ran.stdout + ran.stderr, "the password is in Spark's log or output"
    files = [f for f in (tmp_path / "lakehouse").rglob("*") if f.is_file()]
    assert files and not [str(f) for f in files if canary.encode() in f.read_bytes()]


def add_scram_user(broker: LocalBroker, user: str, password: str) -> None:
    admin = AdminClient(broker.client_config("admin", mechanism="PLAIN"))
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


def grant(broker: LocalBroker, user: str, perms: list[Permission]) -> None:
    """ACLs for exactly ``perms`` (those of ``broker``'s cluster)."""
    admin = AdminClient(broker.client_config("admin", mechanism="PLAIN"))
    bindings = [
        AclBinding(
            ResourceType[p.resource_type.replace("CLUSTER", "BROKER")], p.name, ResourcePatternType[p.pattern],
            f"User:{user}", "*",
            AclOperation[p.operation], ALLOW,
        )
        for p in perms
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


@dataclass
class LeastPrivileged:
    """A fresh SCRAM principal on both brokers, a source topic of 10 records and a flow's config file."""

    user: str
    password: str
    topic: str
    path: Path
    perms: list[Permission]


def least_privileged(
    secured, tmp_path: Path, withhold, commands=("replicate",), top: dict[str, object] | None = None, **flow: object
) -> LeastPrivileged:
    """Grant the new principal every permission ``required_permissions`` lists for the flow's
    ``commands`` but ``withhold``; ``top`` adds top-level keys to the config."""
    source, target = secured["S"], secured["T"]
    bob, password = f"bob-{uuid.uuid4().hex[:6]}", f"pw-{uuid.uuid4().hex}"
    for broker in (source, target):
        add_scram_user(broker, bob, password)
    topic = f"least-{uuid.uuid4().hex[:8]}"
    admin_s = AdminClient(source.client_config("admin", mechanism="PLAIN"))
    for future in admin_s.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer(source.client_config("admin", mechanism="PLAIN"))
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(60) == 0

    def client(broker: LocalBroker) -> dict[str, str]:
        conf = broker.client_config("alice")
        return {**{k: v for k, v in conf.items() if k != "bootstrap.servers"}, "sasl.username": bob,
                "sasl.password": password}  # fmt: skip

    data = {
        "clusters": {
            "S": {"bootstrap_servers": source.bootstrap, "client": client(source)},
            "T": {"bootstrap_servers": target.bootstrap, "client": client(target)},
        },
        # a literal group: with Describe on the cluster bob would see (and need) every group of S
        "flows": [{"source": "S", "target": "T", "topics": [topic], "groups": [f"group-{topic}"], **flow}],
        "replicator_id": "least-test",
        "state_topic": f"state-{topic}",
        "connect_timeout_seconds": 20,
        **(top or {}),
    }
    config = parse_config(data)
    perms = required_permissions(config, config.flows[0], source_topics=[topic], commands=commands)
    kept = [p for p in perms if not withhold(p, topic)]
    grant(source, bob, [p for p in kept if p.cluster == "S"])
    grant(target, bob, [p for p in kept if p.cluster == "T"])
    path = tmp_path / "least.yaml"
    path.write_text(yaml.safe_dump(data))
    return LeastPrivileged(bob, password, topic, path, perms)


def test_check_and_a_run_name_the_one_acl_a_least_privileged_principal_lacks(secured, tmp_path):
    """bob holds exactly the ACLs ``required_permissions`` lists, less Read on the source topic.

    ``mirrorlake check`` reports that one row MISSING and no other; ``replicate`` fails with an error
    naming principal, topic and operation, the dedicated exit code, and no traceback. Once it is
    granted, the flow copies everything with no authorization error logged: the list is sufficient.
    """
    source, target = secured["S"], secured["T"]
    least = least_privileged(
        secured, tmp_path, lambda p, topic: (p.cluster, p.name, p.operation) == ("S", topic, "READ")
    )
    bob, password, topic, path = least.user, least.password, least.topic, least.path
    withheld = next(p for p in least.perms if (p.cluster, p.name, p.operation) == ("S", topic, "READ"))

    checked = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "check", str(path), "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert checked.returncode == MissingPermissionError.exit_code, (checked.stdout, checked.stderr)
    rows = json.loads(checked.stdout)
    missing = [(r["cluster"], r["resource_type"], r["name"], r["operation"]) for r in rows if r["status"] == "MISSING"]
    assert missing == [("S", "TOPIC", topic, "READ")], rows
    assert f"User:{bob} Read on TOPIC '{topic}' of cluster S" in checked.stderr
    assert "Traceback" not in checked.stderr

    ran = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(path), "--until-caught-up"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == MissingPermissionError.exit_code, (ran.returncode, ran.stderr[-3000:])
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert "error: flow S->T: not authorized" in ran.stderr, ran.stderr[-3000:]
    assert f"User:{bob} Read on TOPIC '{topic}' of cluster S" in ran.stderr, ran.stderr[-3000:]
    assert password not in ran.stderr + checked.stdout + checked.stderr

    # the withheld ACL granted, the same principal holds exactly the listed ACLs: check passes, the flow copies
    grant(source, bob, [withheld])
    checked = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "check", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    ran = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(path), "--until-caught-up"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "authorization" not in ran.stderr.lower(), ran.stderr[-3000:]
    assert keys(target.client_config("admin", mechanism="PLAIN"), f"S.{topic}") == [f"k{i}".encode() for i in range(10)]


def test_an_exactly_once_flow_without_its_transactional_id_acl_fails_naming_it(secured, tmp_path):
    """``check`` cannot probe a transactional id (it would fence a running flow): UNKNOWN, exit 0; the
    run is refused by the broker and fails naming the transactional id ACLs to grant."""
    least = least_privileged(
        secured, tmp_path, lambda p, _topic: p.resource_type == "TRANSACTIONAL_ID", exactly_once=True
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "check", str(least.path), "--missing-only"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    assert "TRANSACTIONAL_ID" in checked.stdout and "UNKNOWN" in checked.stdout
    ran = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(least.path), "--until-caught-up"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == MissingPermissionError.exit_code, (ran.returncode, ran.stderr[-3000:])
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert f"User:{least.user} Write on TRANSACTIONAL_ID 'mirrorlake.S->T.least-test' of cluster T" in ran.stderr, (
        ran.stderr[-3000:]
    )


def test_an_exactly_once_flow_that_may_not_read_its_positions_fails_instead_of_copying_again(secured, tmp_path):
    """bob holds every ACL an exactly-once flow needs but Read on its positions topic. The first run
    copies the 10 records (its positions topic is new: nothing to read back). The second must start
    where the first committed, so it must read the positions: refused, it fails naming that ACL and
    copies nothing again. (It used to take the refusal for "no position" and copy everything again:
    duplicates under read_committed.)"""
    positions = f"positions-{uuid.uuid4().hex[:8]}"
    least = least_privileged(
        secured,
        tmp_path,
        lambda p, _topic: (p.cluster, p.name, p.operation) == ("T", positions, "READ"),
        top={"positions_topic": positions},
        exactly_once=True,
    )
    first = cli("replicate", str(least.path), "--until-caught-up")
    assert first.returncode == 0, first.stderr[-3000:]
    admin_t = secured["T"].client_config("admin", mechanism="PLAIN")
    assert keys(admin_t, f"S.{least.topic}") == [f"k{i}".encode() for i in range(10)]

    second = cli("replicate", str(least.path), "--until-caught-up")
    assert second.returncode == MissingPermissionError.exit_code, (second.returncode, second.stderr[-3000:])
    assert "Traceback" not in second.stderr, second.stderr[-3000:]
    assert f"User:{least.user} Read on TOPIC '{positions}' of cluster T" in second.stderr, second.stderr[-3000:]
    assert keys(admin_t, f"S.{least.topic}") == [f"k{i}".encode() for i in range(10)]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def cutover_cli(path: Path, group: str) -> subprocess.CompletedProcess[str]:
    """``failover apply --planned --fence`` of flow S->T for ``group``, moving its FailoverConsumers, JSON out."""
    return cli("failover", "apply", "-c", str(path), "--flow", "S->T", "--groups", group, "--planned", "--fence",
               "--settle", "2", "--move-consumers", "--timeout", "180", "--format", "json")  # fmt: skip


def missing_rows(checked: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str, str]]:
    rows = json.loads(checked.stdout)
    return [(r["cluster"], r["resource_type"], r["name"], r["operation"]) for r in rows if r["status"] == "MISSING"]


def commit_as_admin(broker: LocalBroker, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({**broker.client_config("admin", mechanism="PLAIN"), "group.id": group})
    try:
        wait_for(lambda: committed_at(consumer, topic, offset), f"group {group} to commit", timeout_s=60)
    finally:
        consumer.close()


def committed_at(consumer: Consumer, topic: str, offset: int) -> bool:
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in TRANSPORT_CODES:
            raise
        return False
    return True


def committed_offset(broker: LocalBroker, group: str, topic: str) -> int:
    consumer = Consumer({**broker.client_config("admin", mechanism="PLAIN"), "group.id": group})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


def test_failover_as_a_least_privileged_principal_needs_exactly_the_listed_acls(secured, tmp_path):
    """bob holds the ACLs ``required_permissions`` lists for replicate, failover and translate, less
    Read on the group on the target (what ``failover apply`` commits with). ``check --for failover``
    reports that one row; translate and ``failover plan`` run; ``apply`` fails with exit 22 naming it
    and moves nothing. Once granted, ``apply`` moves the group to its exact offset."""
    source, target = secured["S"], secured["T"]

    def withhold(p: Permission, topic: str) -> bool:
        return (p.cluster, p.resource_type, p.name, p.operation) == ("T", "GROUP", f"group-{topic}", "READ")

    least = least_privileged(
        secured, tmp_path, withhold, commands=("replicate", "failover", "translate"), sync_group_offsets=False
    )
    group, path = f"group-{least.topic}", str(least.path)
    commit_as_admin(source, group, least.topic, 6)
    ran = cli("replicate", path, "--until-caught-up")
    assert ran.returncode == 0, ran.stderr[-3000:]

    checked = cli("check", path, "--for", "failover", "--format", "json")
    assert checked.returncode == MissingPermissionError.exit_code, (checked.stdout, checked.stderr)
    assert missing_rows(checked) == [("T", "GROUP", group, "READ")], checked.stdout
    translated = cli("translate", "-c", path, "--flow", "S->T", "--group", group, "--format", "json")
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert [r["offset"] for r in json.loads(translated.stdout)["offsets"]] == [6]
    planned = cli("failover", "plan", "-c", path, "--flow", "S->T", "--format", "json")
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "authoriz" not in planned.stderr.lower(), planned.stderr[-3000:]

    refused = cli("failover", "apply", "-c", path, "--flow", "S->T")
    assert refused.returncode == MissingPermissionError.exit_code, (refused.returncode, refused.stderr[-3000:])
    assert "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert f"User:{least.user} Read on GROUP '{group}' of cluster T (failover apply)" in refused.stderr, refused.stderr[
        -3000:
    ]
    assert committed_offset(target, group, f"S.{least.topic}") < 0, "a refused apply moved the group"

    grant(target, least.user, [p for p in least.perms if withhold(p, least.topic)])
    assert cli("check", path, "--for", "failover").returncode == 0
    applied = cli("failover", "apply", "-c", path, "--flow", "S->T", "--format", "json")
    assert applied.returncode == 0, applied.stderr[-3000:]
    assert "authoriz" not in applied.stderr.lower(), applied.stderr[-3000:]
    assert committed_offset(target, group, f"S.{least.topic}") == 6
    assert least.password not in refused.stderr + applied.stdout + applied.stderr + checked.stdout


def test_observe_and_import_mm2_as_a_least_privileged_principal_need_exactly_the_listed_acls(secured, tmp_path):
    """bob holds the ACLs listed for replicate (with MM2-format offset syncs and checkpoints), observe
    and import-mm2, less Read on the MM2 checkpoints topic on the target (which only import-mm2
    reads). ``check --for import-mm2`` reports that one row, ``import-mm2`` fails naming it; once
    granted, it imports the flow's checkpoints, and ``observe`` runs every state task without error."""
    source = secured["S"]
    ckpt = "S.checkpoints.internal"

    def withhold(p: Permission, _topic: str) -> bool:
        return (p.cluster, p.name, p.operation) == ("T", ckpt, "READ")

    least = least_privileged(
        secured, tmp_path, withhold, commands=("replicate", "observe", "import-mm2"),
        emit_mm2_offset_syncs=True, emit_mm2_checkpoints=True, sync_group_offsets=False,
    )  # fmt: skip
    group, path = f"group-{least.topic}", str(least.path)
    commit_as_admin(source, group, least.topic, 4)
    ran = cli("replicate", path, "--until-caught-up")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "authoriz" not in ran.stderr.lower(), ran.stderr[-3000:]

    checked = cli("check", path, "--for", "import-mm2", "--format", "json")
    assert checked.returncode == MissingPermissionError.exit_code, (checked.stdout, checked.stderr)
    assert missing_rows(checked) == [("T", "TOPIC", ckpt, "READ")], checked.stdout
    refused = cli("import-mm2", "-c", path)
    assert refused.returncode == MissingPermissionError.exit_code, (refused.returncode, refused.stderr[-3000:])
    assert "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert f"User:{least.user} Read on TOPIC '{ckpt}' of cluster T (import-mm2)" in refused.stderr, refused.stderr[
        -3000:
    ]

    grant(secured["T"], least.user, [p for p in least.perms if withhold(p, least.topic)])
    assert cli("check", path, "--for", "import-mm2", "--for", "observe").returncode == 0
    imported = cli("import-mm2", "-c", path)
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert " 0 checkpoints" not in imported.stdout, imported.stdout
    observed = cli("observe", "-c", path)
    assert observed.returncode == 0, (observed.stdout, observed.stderr[-3000:])
    assert "S->T: observed" in observed.stdout and "task errors" not in observed.stdout, observed.stdout
    assert "authoriz" not in (imported.stderr + observed.stderr).lower(), (imported.stderr + observed.stderr)[-3000:]


def test_a_wrong_password_is_named_at_once_with_its_principal_and_cluster(secured, tmp_path, monkeypatch, capsys):
    """The issue's case (33, item 8): after 30 s, 'cannot read state snapshot ...: Broker transport
    failure'. Now the first request names the refusal, the principal and the cluster (exit 23), and
    never the password."""
    source, target = secured["S"], secured["T"]
    wrong = "not-alices-password"

    def client(broker: LocalBroker, mechanism: str, password: str) -> dict[str, str]:
        conf = broker.client_config("alice", mechanism=mechanism)
        return {**{k: v for k, v in conf.items() if k != "bootstrap.servers"}, "sasl.password": password}

    with pytest.raises(AuthenticationFailedError, match=r"cluster T at .* refused the credentials of principal "
                       r"'alice' \(PLAIN\)") as caught:  # fmt: skip
        wait_for_cluster("T", {**target.client_config("alice", mechanism="PLAIN"), "sasl.password": wrong})
    assert wrong not in str(caught.value)
    data = {
        "clusters": {
            "S": {"bootstrap_servers": source.bootstrap, "client": client(source, "SCRAM-SHA-512", USERS["alice"])},
            "T": {"bootstrap_servers": target.bootstrap, "client": client(target, "PLAIN", wrong)},
        },
        "flows": [{"source": "S", "target": "T", "topics": ["orders"]}],
    }
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(sys, "argv", ["mirrorlake", "failover", "plan", "-c", str(path), "--flow", "S->T"])
    with pytest.raises(SystemExit) as done:
        main()
    err = capsys.readouterr().err
    assert done.value.code == AuthenticationFailedError.exit_code, err
    assert err.startswith("error: cluster T at ") and "principal 'alice'" in err and wrong not in err, err


class KeepsWriting:
    """A producer in a thread that keeps producing ``<prefix>-<i>`` to ``topic`` whatever it is told:
    what the brokers acknowledged, and how many it refused (the fence's TOPIC_AUTHORIZATION_FAILED)."""

    def __init__(self, conf: dict[str, str], topic: str, prefix: str) -> None:
        self.acked: list[bytes] = []
        self.refused = 0
        self.other_errors: list[str] = []
        self._producer = Producer({**conf, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
        self._topic, self._prefix = topic, prefix
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked.append(msg.key())  # type: ignore[arg-type]
        elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            self.refused += 1
        else:
            self.other_errors.append(err.str())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self._topic, key=f"{self._prefix}-{i}".encode(), value=b"v",
                                       on_delivery=self._delivered)  # fmt: skip
                i += 1
            except BufferError:
                pass
            except KafkaException as exc:  # refused at once: the client knows the topic is denied now
                if exc.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise
                self.refused += 1
            self._producer.poll(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)


def test_a_fenced_cutover_leaves_nothing_on_the_source_that_the_target_lacks(secured, tmp_path):
    """Issue 37 item 4: ``failover apply --planned --fence`` while an application principal keeps
    producing to S and a ``FailoverConsumer`` keeps consuming there, the flow running as alice.

    A super user writing beside the fence (super users skip ACLs) makes the first run fail at the
    settle, naming the partitions written past the fence, with the fence kept. The rerun (the CLI)
    goes on after ``fenced``: settles, releases the consumer, catches up, stops the flow and moves
    the group. Judged by content: every record on S is on T in the same order, every acknowledged
    write is among them, the producer kept being refused, the consumer read each record exactly once
    and now reads T. ``failback apply --unfence`` lifts the fence: the producer writes again."""
    source, target = secured["S"], secured["T"]
    admin_s = source.client_config("admin", mechanism="PLAIN")
    alice_s, alice_t = source.client_config("alice"), target.client_config("alice", mechanism="PLAIN")
    topic = f"cutover-{uuid.uuid4().hex[:8]}"
    group = f"billing-{topic}"
    app_user, app_password = f"app-{uuid.uuid4().hex[:6]}", f"pw-{uuid.uuid4().hex}"
    add_scram_user(source, app_user, app_password)
    admin = AdminClient(admin_s)  # kept referenced: a collected client fails its pending futures
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(timeout=60)
    app_binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{app_user}", "*", AclOperation.WRITE, ALLOW
    )
    for future in admin.create_acls([app_binding]).values():
        future.result(timeout=30)
    app_conf = {**alice_s, "sasl.username": app_user, "sasl.password": app_password}

    def client(conf: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in conf.items() if k != "bootstrap.servers"}

    data = {
        "clusters": {
            "S": {"bootstrap_servers": source.bootstrap, "client": client(alice_s)},
            "T": {"bootstrap_servers": target.bootstrap, "client": client(alice_t)},
        },
        "flows": [
            {"source": "S", "target": "T", "topics": [topic], "groups": [group], "sync_topic_acls": False,
             "audit": False, "emit_checkpoints_interval_seconds": 1, "watermarks_interval_seconds": 1}
        ],
        "replicator_id": "cutover-test",
        "state_topic": f"state-{topic}",
    }  # fmt: skip
    config = parse_config(data, source="tests/test_secured_clusters.py")
    path = tmp_path / "cutover.yaml"
    path.write_text(yaml.safe_dump(data))
    writer = KeepsWriting(app_conf, topic, "app")
    moves: list[Move] = []
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    reader = App(FailoverConsumer(config, "S->T", conf, [topic], on_move=moves.append, check_every_s=0.5), 0.01)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: len(reader.read) >= 200 and len(writer.acked) >= 500, "the app writing and reading on S")

        wait_for(lambda: checkpointed(config, "S->T", group), f"a checkpoint of {group}")
        bypass = KeepsWriting(admin_s, topic, "super")
        with pytest.raises(FailoverError, match=rf"the fence on S does not hold: written past the fence: {topic}\["):
            fenced_cutover(config, "S->T", groups=group, settle_s=1, timeout_s=4)
        bypass.stop()
        assert bypass.acked and not bypass.refused  # a super user is beyond any ACL
        refused_before_rerun = writer.refused
        assert refused_before_rerun > 0, "the fence did not refuse the application's writes"
        rerun = cutover_cli(path, group)
        assert rerun.returncode == 0, (rerun.stdout, rerun.stderr[-3000:])
        replicator.wait(timeout=60)
    finally:
        if replicator.alive:
            replicator.stop()
            replicator.wait(timeout=60)
    out = json.loads(rerun.stdout)
    assert out["resumed_after"] == "fenced"
    assert [s["step"] for s in out["steps"]] == ["settled", "caught_up", "replication_stopped", "moved"]
    assert [(g["group"], g["outcome"]) for g in out["groups"]] == [(group, "moved")]
    assert writer.refused > refused_before_rerun, "the producer stopped trying"
    writer.stop()
    assert writer.other_errors == []
    on_s = {p: [r.key for r in read_partition(admin_s, topic, p)] for p in (0, 1)}
    on_t = {p: [r.key for r in read_partition(alice_t, f"S.{topic}", p)] for p in (0, 1)}
    assert on_t == on_s  # nothing on S that T lacks, nothing twice, in order
    everything = {k for keys in on_s.values() for k in keys}
    assert set(writer.acked) <= everything and any(k.startswith(b"super-") for k in everything)
    wait_for(lambda: reader.keys() >= everything or reader.error is not None, "the app read every record")
    reader.stop()
    assert reader.error is None, reader.error
    assert [(m.reason, m.from_cluster, m.to_cluster) for m in moves] == [("failover", "S", "T")]
    assert (moves[0].records_lost, moves[0].records_reread, moves[0].records_unreplicated) == (0, 0, 0)
    counts = Counter(k for _c, k in reader.read)
    assert set(counts) == everything and max(counts.values()) == 1
    assert reader.consumer.cluster == "T"

    lifted = cli("failback", "apply", "-c", str(path), "--flow", "S->T", "--unfence")
    assert lifted.returncode == 0 and "unfenced: 1 of 1 fence bindings deleted on S" in lifted.stdout, lifted
    again = KeepsWriting(app_conf, topic, "after")
    wait_for(lambda: len(again.acked) >= 10 or again.refused > 0, "the application's writes after the unfence")
    again.stop()
    assert again.refused == 0
    steps = [e.step for e in read_state_log(alice_t, f"state-{topic}").events if isinstance(e, Cutover)]
    assert steps == ["fenced", "settled", "caught_up", "replication_stopped", "moved", "unfenced"]
