"""Client settings: ${env:...}/${file:...} references, and their translation for Spark's Java Kafka client."""

from __future__ import annotations

import pytest

from ingest.bronze import kafka_options
from replicator.config import parse_config
from replicator.errors import ConfigError

PASSWORD = 'p"a\\ss word'  # a quote, a backslash and a space


def config(client: dict[str, str]):
    return parse_config(
        {"clusters": {"B": {"bootstrap_servers": "127.0.0.1:1", "client": client}}, "flows": []}, source="test"
    )


def test_references_resolve_from_env_and_file_when_a_client_is_made(tmp_path, monkeypatch):
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    monkeypatch.setenv("ML_USER", "alice")
    cfg = config({"sasl.username": "${env:ML_USER}", "sasl.password": f"${{file:{tmp_path / 'pw'}}}"})
    assert PASSWORD not in repr(cfg) and "alice" not in repr(cfg)
    conf = cfg.cluster("B").client_config()
    assert conf["sasl.username"] == "alice" and conf["sasl.password"] == PASSWORD


@pytest.mark.parametrize(
    ("value", "named"), [("${env:ML_SURELY_UNSET}", "ML_SURELY_UNSET"), ("${file:/nonexistent/pw}", "/nonexistent/pw")]
)
def test_a_missing_reference_is_a_config_error_naming_it(value, named):
    with pytest.raises(ConfigError, match="client setting sasl.password") as info:
        config({"sasl.password": value}).cluster("B").client_config()
    assert named in str(info.value)


def test_yaml_numbers_and_booleans_are_librdkafka_text():
    conf = config({"linger.ms": 5, "enable.ssl.certificate.verification": False, "a.ratio": 0.5}).cluster("B")
    assert conf.client_config() == {
        "linger.ms": "5",
        "enable.ssl.certificate.verification": "false",
        "a.ratio": "0.5",
        "bootstrap.servers": "127.0.0.1:1",
    }


def test_a_refused_value_is_scrubbed_from_the_error():
    from replicator.kafka.clients import new_producer

    with pytest.raises(ConfigError) as info:
        new_producer(
            {"bootstrap.servers": "127.0.0.1:1", "sasl.password": "s3cret-pw", "security.protocol": "s3cret-pw"}
        )
    assert "s3cret-pw" not in str(info.value) and "127.0.0.1:1" in str(info.value), info.value


def test_bronze_options_escape_the_jaas_password_and_translate_ssl_names():
    options = kafka_options(
        config(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": "alice",
                "sasl.password": PASSWORD,
                "ssl.ca.location": "/tls/ca.pem",
                "ssl.endpoint.identification.algorithm": "none",
            }
        ),
        "B",
    )
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\\"a\\\\ss word";'
    )
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == "/tls/ca.pem"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert "kafka.ssl.ca.location" not in options


def test_an_ssl_setting_spark_cannot_use_is_named():
    with pytest.raises(ConfigError, match=r"clusters\.B\.client\.ssl\.certificate\.location"):
        kafka_options(config({"ssl.certificate.location": "/tls/client.pem"}), "B")


@pytest.mark.parametrize(
    ("path", "why"),
    [("/bin/ls", "is not UTF-8 text"), ("/dev/zero", "is larger than 1048576 bytes")],
    ids=["a-program", "never-ends"],
)
def test_a_secret_file_that_is_no_secret_is_one_named_error(path: str, why: str):
    """A program read as a password gave a UnicodeDecodeError; /dev/zero was read without end (issue 33, item 7)."""
    from replicator.config.secrets import resolve_references

    with pytest.raises(ConfigError, match=f"sasl.password: {path} .*{why}"):
        resolve_references(f"${{file:{path}}}", setting="sasl.password")
