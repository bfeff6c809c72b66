"""Strimzi's KafkaMirrorMaker2 resource read as it is (issue 35 item 1), pure: no cluster is reached.

The five resources of a widely read introduction (``../shared/strimzi/intro-examples.yaml``, slips
included) each get what the issue asks: the complete ones load, every slip is an error or a warning
naming its path. Then the shapes Strimzi's own examples use (v1beta2 with a certificate ``pattern``,
SCRAM with a password secret, the v1 ``target``/``source`` form) and malformed fields.
The resources run against real clusters in ``tests/test_mtls_clusters.py`` and ``test_strimzi_run.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from replicator.config import load_config
from replicator.config.strimzi import SECRETS_DIR_ENV, secret_env_name
from replicator.errors import ConfigError

INTRO = Path(__file__).resolve().parents[2] / "shared" / "strimzi" / "intro-examples.yaml"


def _intro(n: int) -> dict:
    return list(yaml.safe_load_all(INTRO.read_text()))[n - 1]


def _load(tmp_path: Path, resource: dict, name: str = "kmm2.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(resource))
    return load_config(path)


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.parametrize("n", [1, 2])
def test_a_fragment_is_an_error_naming_what_it_leaves_out(tmp_path, n):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, _intro(n))
    text = str(err.value)
    assert "spec.clusters: missing" in text and "`# ...`" in text
    assert "spec.mirrors[0].sourceConnector: missing" in text
    assert "is not an alias" not in text  # no echo of the one missing thing


def test_the_minimal_resource_loads_as_strimzi_runs_it(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    config = _load(tmp_path, _intro(3))
    (flow,) = config.flows
    assert flow.name == "my-cluster-source->my-cluster-target"
    assert config.cluster("my-cluster-source").bootstrap_servers == "my-cluster-source-kafka-bootstrap:9092"
    # only a sourceConnector: Strimzi runs no checkpoint and no heartbeat connector
    assert (flow.emit_checkpoints, flow.emit_heartbeats, flow.sync_group_offsets) == (False, False, False)
    assert config.replicator_id == "my-mirror-maker2"
    assert "fields mirrorlake does not use: spec.version" in _warnings(caplog)


def test_the_tls_resource_loads_with_each_slip_named(tmp_path, caplog, monkeypatch):
    """Example 4: TLS authentication on both clusters, with a {Placeholder} version and the target's
    secretName beside trustedCertificates; no mirrors (the article shows the clusters only)."""
    caplog.set_level(logging.WARNING)
    monkeypatch.delenv(SECRETS_DIR_ENV, raising=False)
    config = _load(tmp_path, _intro(4))
    source = config.cluster("my-cluster-source").client_config()
    assert source["security.protocol"] == "SSL"
    assert (
        source["ssl.ca.location"] == "/opt/kafka/mm2-certs/my-cluster-source/my-cluster-source-cluster-ca-cert/ca.crt"
    )
    assert source["ssl.certificate.location"] == "/opt/kafka/mm2-certs/my-cluster-source/my-user-source/source.crt"
    assert source["ssl.key.location"] == "/opt/kafka/mm2-certs/my-cluster-source/my-user-source/source.key"
    target = config.cluster("my-cluster-target").client_config()
    assert target["ssl.ca.location"].endswith("/my-cluster-target/my-cluster-target-cluster-ca-cert/ca.crt")
    said = _warnings(caplog)
    assert "spec.version: expected a Kafka version, got a mapping" in said
    assert "spec.clusters[1].tls.secretName: belongs inside each entry" in said
    assert "spec.replicas: 3: run that many `mirrorlake replicate` processes" in said
    assert "spec.clusters[1].config" in said and "spec.mirrors: none" in said
    assert config.flows == ()


def test_connectors_outside_mirrors_are_an_error_naming_each(tmp_path):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, _intro(5))
    for connector in ("sourceConnector", "checkpointConnector", "heartbeatConnector"):
        assert f"spec.{connector}: belongs inside each entry of spec.mirrors" in str(err.value)


V1BETA2 = {
    "apiVersion": "kafka.strimzi.io/v1beta2",
    "kind": "KafkaMirrorMaker2",
    "metadata": {"name": "dr"},
    "spec": {
        "version": "4.1.0",
        "replicas": 2,
        "connectCluster": "b",
        "clusters": [
            {"alias": "a", "bootstrapServers": "a-kafka-bootstrap:9093",
             "tls": {"trustedCertificates": [{"secretName": "a-cluster-ca-cert", "pattern": "*.crt"}]},
             "authentication": {"type": "scram-sha-512", "username": "mm2",
                                "passwordSecret": {"secretName": "mm2-user", "password": "password"}}},
            {"alias": "b", "bootstrapServers": "b-kafka-bootstrap:9092",
             "config": {"config.storage.replication.factor": -1}},
        ],
        "mirrors": [{
            "sourceCluster": "a", "targetCluster": "b",
            "topicsPattern": "orders.*, payments", "topicsExcludePattern": ".*\\.internal",
            "groupsPattern": "billing|audit",
            "sourceConnector": {"tasksMax": 4, "config": {"replication.factor": -1, "sync.topic.acls.enabled": False}},
            "checkpointConnector": {"config": {"sync.group.offsets.enabled": True,
                                               "emit.checkpoints.interval.seconds": 5}},
            "heartbeatConnector": {"config": {"emit.heartbeats.interval.seconds": 2}},
        }],
    },
}  # fmt: skip


def test_a_v1beta2_resource_with_scram_and_a_certificate_pattern(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.WARNING)
    secrets = tmp_path / "secrets"
    (secrets / "a-cluster-ca-cert").mkdir(parents=True)
    for name in ("ca.crt", "ca-old.crt"):  # a CA being renewed: both trusted
        (secrets / "a-cluster-ca-cert" / name).write_text(f"-----BEGIN CERTIFICATE-----\n{name}\n")
    monkeypatch.setenv(SECRETS_DIR_ENV, str(secrets))
    config = _load(tmp_path, V1BETA2)
    (flow,) = config.flows
    assert (flow.name, flow.topics, flow.topics_exclude, flow.groups) == (
        "a->b",
        ("orders.*", "payments"),
        (".*\\.internal",),
        ("billing|audit",),
    )
    assert (flow.emit_checkpoints, flow.sync_group_offsets, flow.emit_heartbeats) == (True, True, True)
    assert (flow.emit_checkpoints_interval_seconds, flow.emit_heartbeats_interval_seconds) == (5, 2)
    a = config.cluster("a").client
    assert a["security.protocol"].get_secret_value() == "SASL_SSL"
    assert a["sasl.mechanisms"].get_secret_value() == "SCRAM-SHA-512"
    assert a["sasl.username"].get_secret_value() == "mm2"
    assert a["sasl.password"].get_secret_value() == f"${{file:{secrets}/mm2-user/password}}"  # read when used
    assert a["ssl.ca.pem"].get_secret_value().count("BEGIN CERTIFICATE") == 2
    said = _warnings(caplog)
    for path in ("spec.replicas", "spec.clusters[1].config", "spec.mirrors[0].sourceConnector.tasksMax",
                 "spec.mirrors[0].sourceConnector.config.replication.factor"):  # fmt: skip
        assert path in said, said
    assert "a->b." not in said  # MM2's key names never reach the user: the resource's paths do


def test_secrets_from_environment_variables_win_over_files_and_stay_references(tmp_path, monkeypatch):
    """A Secret's key as ``MIRRORLAKE_SECRET_<SECRET>_<KEY>`` (a pod's secretKeyRef, a CI secret): the
    password and a client key are ``${env:...}`` references (resolved when a client is made, never
    written into the config), a trusted certificate joins the bundle; keys without a variable stay files."""
    secrets = tmp_path / "secrets"
    (secrets / "a-cluster-ca-cert").mkdir(parents=True)
    for name in ("ca.crt", "ca-old.crt"):
        (secrets / "a-cluster-ca-cert" / name).write_text(f"-----BEGIN CERTIFICATE-----\n{name}\n")
    monkeypatch.setenv(SECRETS_DIR_ENV, str(secrets))
    assert secret_env_name("mm2-user", "password") == "MIRRORLAKE_SECRET_MM2_USER_PASSWORD"
    monkeypatch.setenv("MIRRORLAKE_SECRET_MM2_USER_PASSWORD", "s3cret")
    a = _load(tmp_path, V1BETA2).cluster("a")
    assert a.client["sasl.password"].get_secret_value() == "${env:MIRRORLAKE_SECRET_MM2_USER_PASSWORD}"
    assert a.client_config()["sasl.password"] == "s3cret"  # resolved when a client is made

    tls = yaml.safe_load(yaml.safe_dump(V1BETA2))
    tls["spec"]["clusters"][0]["tls"]["trustedCertificates"] = [
        {"secretName": "a-cluster-ca-cert", "pattern": "*.crt"},
        {"secretName": "extra-ca", "certificate": "ca.crt"},  # only as a variable
    ]
    tls["spec"]["clusters"][0]["authentication"] = {
        "type": "tls", "certificateAndKey": {"secretName": "mm2-user", "certificate": "user.crt", "key": "user.key"}
    }  # fmt: skip
    monkeypatch.setenv(secret_env_name("extra-ca", "ca.crt"), "-----BEGIN CERTIFICATE-----\nextra")
    monkeypatch.setenv("MIRRORLAKE_SECRET_MM2_USER_USER_KEY", "-----BEGIN PRIVATE KEY-----\nk")
    client = _load(tmp_path, tls).cluster("a").client
    assert client["ssl.key.pem"].get_secret_value() == "${env:MIRRORLAKE_SECRET_MM2_USER_USER_KEY}"
    assert client["ssl.certificate.location"].get_secret_value() == str(secrets / "mm2-user" / "user.crt")
    assert "ssl.key.location" not in client and "ssl.certificate.pem" not in client
    bundle = client["ssl.ca.pem"].get_secret_value()
    assert bundle.count("BEGIN CERTIFICATE") == 3 and "ca.crt\n-----BEGIN CERTIFICATE-----\nextra" in bundle


def test_the_v1_form_with_target_and_mirror_sources_means_the_same(tmp_path):
    spec = V1BETA2["spec"]
    a, b = spec["clusters"]
    mirror = {k: v for k, v in spec["mirrors"][0].items() if k not in ("sourceCluster", "targetCluster")}
    v1 = {**V1BETA2, "apiVersion": "kafka.strimzi.io/v1",
          "spec": {"target": {**b, "groupId": "dr-connect"}, "mirrors": [{**mirror, "source": a}]}}  # fmt: skip
    a_tls = {"trustedCertificates": [{"secretName": "a-cluster-ca-cert", "certificate": "ca.crt"}]}
    v1["spec"]["mirrors"][0]["source"] = {**a, "tls": a_tls}
    older = {**V1BETA2, "spec": {**spec, "clusters": [{**a, "tls": a_tls}, b]}}
    assert _load(tmp_path, v1, "v1.yaml").flows == _load(tmp_path, older, "older.yaml").flows


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["spec"]["mirrors"][0].update(topicPattern="x"),
         "spec.mirrors[0].topicPattern: unknown field (did you mean topicsPattern?)"),
        (lambda r: r["spec"]["mirrors"][0].update(topicsPattern="orders("),
         "spec.mirrors[0].topicsPattern: invalid regular expression"),
        (lambda r: r["spec"]["mirrors"][0].update(targetCluster="a"),
         "spec.mirrors[0].targetCluster: 'a' is not the Connect cluster 'b'"),
        (lambda r: r["spec"]["clusters"][0].update(authentication={"type": "oauth"}),
         "spec.clusters[0].authentication.type: 'oauth'"),
        (lambda r: r.update(apiVersion="kafka.strimzi.io/v2"), "apiVersion: kafka.strimzi.io/v2: expected one of"),
        (lambda r: r.update(specs={}), "specs: unknown field (did you mean spec?)"),
        (lambda r: r["spec"]["mirrors"][0]["sourceConnector"]["config"].update({"transforms": "x"}),
         "spec.mirrors[0].sourceConnector.config.transforms"),
        (lambda r: r["spec"]["mirrors"][0]["heartbeatConnector"].update(config={"sync.topic.acls.enabled": True}),
         "spec.mirrors[0].heartbeatConnector.config.sync.topic.acls.enabled: 'true' differs from "
         "spec.mirrors[0].sourceConnector.config.sync.topic.acls.enabled ('false')"),
    ],
)  # fmt: skip
def test_a_malformed_field_is_an_error_naming_its_path(tmp_path, monkeypatch, change, named):
    import copy

    (tmp_path / "a-cluster-ca-cert").mkdir()
    (tmp_path / "a-cluster-ca-cert" / "ca.crt").write_text("x")
    monkeypatch.setenv(SECRETS_DIR_ENV, str(tmp_path))
    resource = copy.deepcopy(V1BETA2)
    change(resource)
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, resource)
    assert named in str(err.value), str(err.value)


def test_a_connector_s_metric_names_formats_reaches_the_flow(tmp_path):
    resource = _intro(3)
    resource["spec"]["mirrors"][0]["sourceConnector"].setdefault("config", {})["metric.names.formats"] = "legacy,new"
    (flow,) = _load(tmp_path, resource).flows
    assert flow.metric_names_formats == ("legacy", "new")
    resource["spec"]["mirrors"][0]["sourceConnector"]["config"]["metric.names.formats"] = "newest"
    with pytest.raises(ConfigError, match="metric.names.formats"):
        _load(tmp_path, resource)
