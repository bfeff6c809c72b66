"""Flows between two mutual-TLS clusters, as certificate principals with least-privilege ACLs (issue 35 item 2).

The two brokers are this module's own (``LocalBroker(tls_principals=...)``): an SSL listener with
``ssl.client.auth=required``, client certificates made with openssl and signed by the brokers' CA,
``ssl.principal.mapping.rules`` turning ``CN=mirror`` into ``User:mirror``, the StandardAuthorizer
with ``allow.everyone.if.no.acl.found=false``; ``admin`` the only super user besides the controller
listener and the broker itself. The flow runs as ``mirror``, which holds exactly the ACLs
``required_permissions`` lists for the commands it runs; the application writes and reads as ``app``.
Judged by what the clusters hold, read as ``admin``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AclBinding, AclOperation, AdminClient, NewTopic, ResourcePatternType, ResourceType

from mirrorlake.groundtruth import read_partition
from mirrorlake.localkafka import LocalBroker
from replicator.access.permissions import required_permissions
from replicator.client.failover_consumer import FailoverConsumer, Move
from replicator.client.state_reader import read_state_log
from replicator.config import parse_config
from replicator.config.strimzi import SECRETS_DIR_ENV, secret_env_name
from replicator.errors import AuthenticationFailedError
from replicator.events import Cutover
from replicator.flow.runtime import Replicator
from tests.broker_pair import broker_pair
from tests.consuming_app import App, checkpointed
from tests.test_secured_clusters import (
    ALLOW,
    KeepsWriting,
    cli,
    commit_as_admin,
    committed_offset,
    cutover_cli,
    grant,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
INTRO = Path(__file__).resolve().parents[2] / "shared" / "strimzi" / "intro-examples.yaml"
PRINCIPALS = ("admin", "mirror", "app", "my-user-source", "my-user-target")  # the last two: the Strimzi resource's


@pytest.fixture(scope="module")
def mtls(tmp_path_factory) -> Iterator[dict[str, LocalBroker]]:
    """Two mutual-TLS brokers, S and T; stopped on exit."""
    with broker_pair(tmp_path_factory.mktemp("mtls"), "mutual-TLS clusters", tls_principals=PRINCIPALS) as brokers:
        yield brokers


def _client(broker: LocalBroker, principal: str) -> dict[str, str]:
    return {k: v for k, v in broker.client_config(principal).items() if k != "bootstrap.servers"}


def _flow_config(mtls: dict[str, LocalBroker], tmp_path: Path, topic: str, **flow: object) -> tuple[Path, dict]:
    data = {
        "clusters": {alias: {"bootstrap_servers": b.bootstrap, "client": _client(b, "mirror")}
                     for alias, b in mtls.items()},
        "flows": [{"source": "S", "target": "T", "topics": [topic], "groups": [f"group-{topic}"], **flow}],
        "replicator_id": f"mtls-{topic}",
        "state_topic": f"state-{topic}",
        "connect_timeout_seconds": 20,
    }  # fmt: skip
    path = tmp_path / f"{topic}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, data


def _source_topic(broker: LocalBroker, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient(broker.client_config("admin"))  # kept referenced while its futures are awaited
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=60)
    producer = Producer(broker.client_config("admin"))
    for i in range(records):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=0)
    assert producer.flush(60) == 0


def _grant_least(mtls: dict[str, LocalBroker], data: dict, topic: str, commands: tuple[str, ...]) -> None:
    config = parse_config(data)
    perms = required_permissions(config, config.flows[0], source_topics=[topic], commands=commands)  # type: ignore[arg-type]
    for alias, broker in mtls.items():
        grant(broker, "mirror", [p for p in perms if p.cluster == alias])


def test_a_flow_over_mutual_tls_copies_and_fails_over_as_a_least_privileged_certificate_principal(mtls, tmp_path):
    """``mirror`` holds exactly the ACLs listed for replicate, failover and translate: ``check`` passes,
    the flow copies every record with no authorization error, and ``failover apply`` moves the group
    to the target offset of the record it would read next, found by content on T."""
    source, target = mtls["S"], mtls["T"]
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    group = f"group-{topic}"
    _source_topic(source, topic, 1, 10)
    path, data = _flow_config(mtls, tmp_path, topic, sync_group_offsets=False)
    _grant_least(mtls, data, topic, ("replicate", "failover", "translate"))

    checked = cli("check", str(path), "--for", "replicate", "--for", "failover", "--for", "translate")
    assert checked.returncode == 0, (checked.stdout, checked.stderr[-3000:])
    commit_as_admin(source, group, topic, 6)
    ran = cli("replicate", str(path), "--until-caught-up")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "authoriz" not in ran.stderr.lower(), ran.stderr[-3000:]

    on_t = read_partition(target.client_config("admin"), f"S.{topic}", 0)
    assert [r.key for r in on_t] == [f"k{i}".encode() for i in range(10)]
    next_record = next(r.offset for r in on_t if r.key == b"k6")
    translated = cli("translate", "-c", str(path), "--flow", "S->T", "--group", group, "--format", "json")
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert [r["offset"] for r in json.loads(translated.stdout)["offsets"]] == [next_record]
    applied = cli("failover", "apply", "-c", str(path), "--flow", "S->T", "--format", "json")
    assert applied.returncode == 0, applied.stderr[-3000:]
    assert "authoriz" not in applied.stderr.lower(), applied.stderr[-3000:]
    assert committed_offset(target, group, f"S.{topic}") == next_record


def test_a_fenced_cutover_over_mutual_tls_as_a_least_privileged_certificate_principal(mtls, tmp_path):
    """Issue 37 item 4 on mutual TLS: ``mirror`` holds exactly the ACLs listed for replicate and
    cutover; ``app`` keeps writing to S and reads it through a ``FailoverConsumer`` with its own
    certificate. ``failover apply --planned --fence --move-consumers`` runs every step; then every
    record on S is on T in order, every acknowledged write among them, and the app read each once."""
    source, target = mtls["S"], mtls["T"]
    topic = f"cutover-{uuid.uuid4().hex[:8]}"
    group = f"group-{topic}"
    _source_topic(source, topic, 2, 0)
    app_acls = [
        AclBinding(kind, name, ResourcePatternType.LITERAL, "User:app", "*", AclOperation.ALL, ALLOW)
        for kind, name in ((ResourceType.TOPIC, topic), (ResourceType.TOPIC, f"S.{topic}"), (ResourceType.GROUP, group))
    ]
    for broker in (source, target):
        admin = AdminClient(broker.client_config("admin"))
        for future in admin.create_acls(app_acls).values():
            future.result(timeout=30)
    path, data = _flow_config(
        mtls, tmp_path, topic, sync_topic_acls=False, audit=False, emit_checkpoints_interval_seconds=1,
        watermarks_interval_seconds=1,
    )  # fmt: skip
    _grant_least(mtls, data, topic, ("replicate", "cutover"))
    config = parse_config(data)
    writer = KeepsWriting(source.client_config("app"), topic, "app")
    moves: list[Move] = []
    app_conf = {**_client(source, "app"), "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False}  # fmt: skip
    reader = App(FailoverConsumer(config, "S->T", app_conf, [topic], on_move=moves.append, check_every_s=0.5), 0.01)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: len(reader.read) >= 200 and len(writer.acked) >= 500, "the app writing and reading on S")
        wait_for(lambda: checkpointed(config, "S->T", group), f"a checkpoint of {group}")
        checked = cli("check", str(path), "--for", "replicate", "--for", "cutover")
        assert checked.returncode == 0, (checked.stdout, checked.stderr[-3000:])
        cut = cutover_cli(path, group)
        assert cut.returncode == 0, (cut.stdout, cut.stderr[-3000:])
        replicator.wait(timeout=60)
    finally:
        if replicator.alive:
            replicator.stop()
            replicator.wait(timeout=60)
    out = json.loads(cut.stdout)
    assert [s["step"] for s in out["steps"]] == ["fenced", "settled", "caught_up", "replication_stopped", "moved"]
    assert "authoriz" not in cut.stderr.lower(), cut.stderr[-3000:]
    assert writer.refused > 0, "the fence refused none of the application's writes"
    writer.stop()
    assert writer.other_errors == []
    on_s = {p: [r.key for r in read_partition(source.client_config("admin"), topic, p)] for p in (0, 1)}
    on_t = {p: [r.key for r in read_partition(target.client_config("admin"), f"S.{topic}", p)] for p in (0, 1)}
    assert on_t == on_s  # nothing on S that T lacks, nothing twice, in order
    everything = {k for keys in on_s.values() for k in keys}
    assert set(writer.acked) <= everything
    wait_for(lambda: reader.keys() >= everything or reader.error is not None, "the app read every record")
    reader.stop()
    assert reader.error is None, reader.error
    assert [(m.reason, m.records_lost, m.records_reread) for m in moves] == [("failover", 0, 0)]
    counts = Counter(k for _c, k in reader.read)
    assert set(counts) == everything and max(counts.values()) == 1
    assert reader.consumer.cluster == "T"
    steps = [e.step for e in read_state_log(target.client_config("admin"), f"state-{topic}").events
             if isinstance(e, Cutover)]  # fmt: skip
    assert steps == ["fenced", "settled", "caught_up", "replication_stopped", "moved"]


@pytest.mark.parametrize("certificate", ["missing", "self-signed", "untrusted broker"])
def test_a_missing_or_wrong_certificate_is_one_clear_error(mtls, tmp_path, certificate):
    """No client certificate, a self-signed one with the right name, or a CA file that does not vouch
    for the broker: ``check`` and ``replicate`` each fail at once with the authentication exit code and
    one line naming the cluster and what to fix; nothing is copied."""
    source = mtls["S"]
    topic = f"badcert-{uuid.uuid4().hex[:8]}"
    _source_topic(source, topic, 1, 3)
    path, data = _flow_config(mtls, tmp_path, topic)
    client = data["clusters"]["S"]["client"]
    if certificate == "missing":
        del client["ssl.certificate.location"], client["ssl.key.location"]
        expected = "cluster S at .* refused the credentials of the client"
    else:
        rogue_key, rogue_pem = tmp_path / "rogue.key", tmp_path / "rogue.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=mirror",
             "-keyout", str(rogue_key), "-out", str(rogue_pem)], check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        if certificate == "self-signed":
            client.update({"ssl.certificate.location": str(rogue_pem), "ssl.key.location": str(rogue_key)})
            expected = "cluster S at .* refused the credentials of the client certificate"
        else:
            client["ssl.ca.location"] = str(rogue_pem)
            expected = "cluster S at .*: the TLS handshake failed, the client does not trust the broker's certificate"
    path.write_text(yaml.safe_dump(data))
    for command in (["check", str(path)], ["replicate", str(path), "--until-caught-up"]):
        ran = cli(*command, timeout=120)
        assert ran.returncode == AuthenticationFailedError.exit_code, (command, ran.returncode, ran.stderr[-3000:])
        assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
        errors = [line for line in ran.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, ran.stderr[-3000:]
        assert re.search(expected, errors[0]), errors
    target_topics = AdminClient(mtls["T"].client_config("admin")).list_topics(timeout=30).topics
    assert f"S.{topic}" not in target_topics


@pytest.mark.parametrize("secrets_as", ["files", "environment"])
def test_the_intro_tls_resource_replicates_over_mutual_tls_as_printed_but_for_its_addresses(
    mtls, tmp_path, monkeypatch, secrets_as
):
    """Issue 35 item 1: the introduction's TLS resource (example 4: both clusters authenticate with
    certificates, its slips kept), pointed at S and T, with the mirror of its minimal example (it
    prints the clusters only). Its secrets are files under ``MIRRORLAKE_SECRETS_DIR`` as Strimzi's
    Secrets would hold them (the cluster CA ``ca.crt``, the user's certificate and key), or each
    Secret key an environment variable ``MIRRORLAKE_SECRET_<SECRET>_<KEY>`` (a pod's secretKeyRef)."""
    source, target = mtls["S"], mtls["T"]
    examples = list(yaml.safe_load_all(INTRO.read_text()))
    resource, minimal = examples[3], examples[2]
    resource["spec"]["clusters"][0]["bootstrapServers"] = source.bootstrap
    resource["spec"]["clusters"][1]["bootstrapServers"] = target.bootstrap
    resource["spec"]["mirrors"] = minimal["spec"]["mirrors"]
    secrets = tmp_path / "secrets"
    for broker, side in ((source, "source"), (target, "target")):
        user = f"my-user-{side}"
        conf = broker.client_config(user)
        (secrets / user).mkdir(parents=True)
        shutil.copy(conf["ssl.certificate.location"], secrets / user / f"{side}.crt")
        shutil.copy(conf["ssl.key.location"], secrets / user / f"{side}.key")
        (secrets / f"my-cluster-{side}-cluster-ca-cert").mkdir()
        shutil.copy(conf["ssl.ca.location"], secrets / f"my-cluster-{side}-cluster-ca-cert" / "ca.crt")
        admin = AdminClient(broker.client_config("admin"))
        bindings = [
            AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", AclOperation.ALL, ALLOW)
            for kind, name in (
                (ResourceType.TOPIC, "*"), (ResourceType.GROUP, "*"), (ResourceType.BROKER, "kafka-cluster")
            )
        ]  # fmt: skip
        for future in admin.create_acls(bindings).values():
            future.result(timeout=30)
    topic = f"strimzi-{uuid.uuid4().hex[:8]}"
    _source_topic(source, topic, 1, 20)
    path = tmp_path / "kmm2-tls.yaml"
    path.write_text(yaml.safe_dump(resource))
    if secrets_as == "files":
        monkeypatch.setenv(SECRETS_DIR_ENV, str(secrets))
    else:  # no file is named: a leftover path would fail the run
        monkeypatch.delenv(SECRETS_DIR_ENV, raising=False)
        for held in secrets.rglob("*.*"):
            monkeypatch.setenv(secret_env_name(held.parent.name, held.name), held.read_text())

    ran = cli("replicate", str(path), "--until-caught-up")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "spec.clusters[1].tls.secretName: belongs inside each entry" in ran.stderr
    on_s = [r.key for r in read_partition(source.client_config("admin"), topic, 0)]
    on_t = [r.key for r in read_partition(target.client_config("admin"), f"my-cluster-source.{topic}", 0)]
    assert on_t == on_s == [f"k{i}".encode() for i in range(20)]
