"""MirrorMaker 2's connect-mirror-maker.properties: the Java .properties reader and the translation (no Kafka)."""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.config import DEFAULT_TOPICS_EXCLUDE, load_config, parse_config
from replicator.config.mm2_properties import mm2_to_config_dict, parse_properties
from replicator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SAMPLE = ROOT / "tests" / "data" / "connect-mirror-maker.properties"
TWO_CLUSTERS = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"


def translate(text: str) -> dict:
    return mm2_to_config_dict(parse_properties(text), source="mm2.properties")


def config(text: str):
    return parse_config(translate(text), source="mm2.properties")


def error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        config(text)
    return str(info.value)


# -- java.util.Properties ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b\nc:d\ne f\n", {"a": "b", "c": "d", "e": "f"}),
        ("  key  =  value with trailing blanks  ", {"key": "value with trailing blanks  "}),
        ("key = = v\nk2==v\nk3 :: v", {"key": "= v", "k2": "=v", "k3": ": v"}),
        ("key\nk2 =\n", {"key": "", "k2": ""}),
        ("# comment\n   ! also a comment\n\n\t\f\nk=v # not a comment", {"k": "v # not a comment"}),
        ("# a comment never continues \\\nk=v", {"k": "v"}),
        (r"a\=b\:c\ d = e", {"a=b:c d": "e"}),
        (r"k = \\ \t\n\r\f \b \u0041\u00e9 \uD83D\uDE00", {"k": "\\ \t\n\r\f b A\u00e9 \U0001f600"}),
        ("k = one, \\\n      two, \\\n   three", {"k": "one, two, three"}),
        ("k = a\\\n# not a comment here", {"k": "a# not a comment here"}),
        ("k = a\\\n\n b", {"k": "a", "b": ""}),
        ("k = even\\\\\nnext = line", {"k": "even\\", "next": "line"}),
        ("k = ends at eof\\", {"k": "ends at eof"}),
        ("\\", {"": ""}),  # a lone continuation at the end of the file is an empty key
        ("k\\\n", {"k": ""}),
        ("\\\n", {"": ""}),
        ("\\\r\n", {}),  # ...but not after \r\n (LineReader checks for the end before the \n)
        ("\\\n#c", {}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("k=1\\\r\n  2", {"k": "12"}),
        ("k = first\nk = last", {"k": "last"}),
        ("A->B.enabled=true", {"A->B.enabled": "true"}),
        ("", {}),
    ],
)
def test_properties_syntax(text: str, expected: dict[str, str]):
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(ConfigError, match=r"line 3: malformed \\uxxxx"):
        parse_properties("a=1\n\nb=\\u12G4\n")


_JAVA_READER = """
import java.io.*; import java.util.*;
public class Props {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        File[] files = new File(args[0]).listFiles(); Arrays.sort(files);
        StringBuilder out = new StringBuilder();
        for (File f : files) {
            out.append("== ").append(f.getName()).append('\\n');
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(f)) { p.load(in); }
            catch (IllegalArgumentException e) { out.append("ERR\\n"); continue; }
            for (String k : p.stringPropertyNames())
                out.append(hex(k)).append('|').append(hex(p.getProperty(k))).append('\\n');
        }
        System.out.print(out);
    }
}
"""


def _java_string(hex_units: str) -> str:
    units = "".join(chr(int(hex_units[i : i + 4], 16)) for i in range(0, len(hex_units), 4))
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK to compare with java.util.Properties")
def test_parser_agrees_with_java_util_properties(tmp_path: Path):
    alphabet = list("ab=: \t\f\\\\\\\n\r#!u0D8E") + ["\u00e9", "\\u0041", "\\uD83D\\uDE00", "\\\n", "\\\r\n"]
    rng = random.Random(382)
    cases = {f"{i:04d}": "".join(rng.choices(alphabet, k=rng.randint(0, 30))) for i in range(400)}
    texts = tmp_path / "cases"
    texts.mkdir()
    for name, text in cases.items():
        (texts / name).write_bytes(text.encode("iso-8859-1"))
    (tmp_path / "Props.java").write_text(_JAVA_READER)
    run = subprocess.run(
        ["java", str(tmp_path / "Props.java"), str(texts)], capture_output=True, text=True, timeout=120, check=True
    )
    java: dict[str, dict[str, str] | None] = {}
    for block in run.stdout.split("== ")[1:]:
        name, *lines = block.rstrip("\n").split("\n")
        java[name] = None if lines == ["ERR"] else dict(map(_java_string, line.split("|")) for line in lines if line)
    assert java.keys() == cases.keys()
    for name, text in cases.items():
        try:
            ours: dict[str, str] | None = parse_properties(text)
        except ConfigError:
            ours = None
        assert ours == java[name], (name, text)


# -- the Kafka sample file, through load_config --------------------------------------------------
def test_kafka_sample_file_loads_through_load_config(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, logger="replicator.config.mm2_properties"):
        cfg = load_config(KAFKA_SAMPLE)
    assert cfg.cluster("A").bootstrap_servers == "A_host1:9092,A_host2:9092,A_host3:9092"
    assert cfg.cluster("B").bootstrap_servers == "B_host1:9092,B_host2:9092,B_host3:9092"
    assert cfg.cluster("A").client == {} and cfg.cluster("B").client == {}
    assert [f.name for f in cfg.enabled_flows()] == ["A->B", "B->A"]
    assert all(f.topics == (".*",) and f.topics_exclude == DEFAULT_TOPICS_EXCLUDE for f in cfg.flows)
    assert (cfg.replication_policy.class_, cfg.replication_policy.separator) == ("default", ".")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "accepted, not used yet: replication.factor, checkpoints.topic.replication.factor" in warning
    for key in ("offset.storage.replication.factor", "sync.topic.acls.enabled"):
        assert key in warning
    assert "emit.heartbeats.interval.seconds" not in warning  # used: it maps onto the flows
    assert {f.emit_heartbeats_interval_seconds for f in cfg.flows} == {5}
    assert "A->B.enabled" not in warning and "clusters" not in warning


# -- clusters and client settings ----------------------------------------------------------------
SASL_SCRAM = (
    TWO_CLUSTERS
    + "A.security.protocol = SASL_SSL\n"
    + "A.sasl.mechanism = SCRAM-SHA-512\n"
    + "A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
    + '    username="mirror" password="s3cr\\\\"et";\n'
    + "A.ssl.truststore.type = PEM\n"
    + "A.ssl.truststore.location = /etc/kafka/ca.pem\n"
    + "A.ssl.endpoint.identification.algorithm =\n"
)


def test_sasl_scram_and_pem_trust_store_translate_to_librdkafka(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING):
        client = config(SASL_SCRAM).cluster("A").client_config()
    assert client == {
        "bootstrap.servers": "a:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mirror",
        "sasl.password": 's3cr"et',
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert "s3cr" not in caplog.text
    assert "s3cr" not in repr(config(SASL_SCRAM))


def test_top_level_security_is_every_clusters_default_and_roles_must_agree():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    text = TWO_CLUSTERS + f"security.protocol = SASL_PLAINTEXT\nsasl.mechanism = PLAIN\nsasl.jaas.config = {jaas}\n"
    cfg = config(text + "B.security.protocol = SASL_SSL\nB.producer.security.protocol = SASL_SSL\n")
    assert cfg.cluster("A").client_config()["security.protocol"] == "SASL_PLAINTEXT"
    assert cfg.cluster("B").client_config()["security.protocol"] == "SASL_SSL"
    assert cfg.cluster("B").client_config()["sasl.username"] == "u"
    message = error(text + "A.consumer.sasl.jaas.config = " + jaas.replace('"p"', '"other"') + "\n")
    assert "sasl.jaas.config, A.consumer.sasl.jaas.config differ" in message
    assert "one client configuration per cluster" in message and '"other"' not in message


def test_jks_trust_store_names_the_key_and_the_librdkafka_setting_to_add():
    text = TWO_CLUSTERS + "B.security.protocol=SSL\nB.ssl.truststore.location=/x/truststore.jks\n"
    text += "B.ssl.truststore.password=changeit\n"
    message = error(text)
    assert "mm2.properties: B.ssl.truststore.location: librdkafka cannot read a JKS trust store" in message
    assert "add B.ssl.ca.location" in message and "changeit" not in message
    # librdkafka's own name beside the Java one: MM2 ignores it, mirrorlake uses it
    client = config(text + "B.ssl.ca.location = /x/ca.pem\n").cluster("B").client
    assert {k: v.get_secret_value() for k, v in client.items()} == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/x/ca.pem",
    }


def test_key_stores_pkcs12_passes_through_jks_is_an_error():
    pkcs12 = "A.ssl.keystore.type=PKCS12\nA.ssl.keystore.location=/k.p12\nA.ssl.keystore.password=pw\n"
    client = config(TWO_CLUSTERS + pkcs12).cluster("A").client_config()
    assert client["ssl.keystore.location"] == "/k.p12" and client["ssl.keystore.password"] == "pw"
    message = error(TWO_CLUSTERS + "A.ssl.keystore.location=/k.jks\n")
    assert "A.ssl.keystore.location: librdkafka cannot read a JKS key store" in message
    assert "A.ssl.certificate.location and A.ssl.key.location" in message


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (
            "A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "add A.sasl.oauthbearer.method",
        ),
        ("A.sasl.client.callback.handler.class = x.Y", "not supported (librdkafka has no SASL callback handlers)"),
        ("A.sasl.jaas.config = PlainLoginModule", "mm2.properties: A.sasl.jaas.config: expected one JAAS login module"),
        ("A->B.offset.lag.max = lots", "mm2.properties: A->B.offset.lag.max: expected a whole number (got 'lots')"),
        ("A->B.topics = orders[", "mm2.properties: A->B.topics: invalid regular expression 'orders['"),
        ("config.providers = file", "config.providers: not supported (${provider:path:key} substitution;"),
        ("A->B.topic.filter.class = com.example.Filter", "A->B.topic.filter.class: not supported"),
        ("transforms = dropPii", "transforms: not supported (Connect transformations"),
    ],
)
def test_settings_mirrorlake_cannot_honour_are_errors(line: str, needle: str):
    message = error(TWO_CLUSTERS + "A->B.enabled = true\n" + line + "\n")
    assert needle in message


# -- flows -----------------------------------------------------------------------------------------
def test_per_flow_keys_override_the_top_level_ones():
    cfg = config(
        TWO_CLUSTERS
        + "topics = orders.*, payments\ntopics.exclude = .*\\\\.tmp\noffset.lag.max = 500\n"
        + "A->B.enabled = true\nA->B.topics = audit\nA->B.offset.lag.max = 0\n"
        + "B->A.enabled = true\nB->A.topics.blacklist = ignored-because-topics.exclude-is-set\n"
    )
    ab, ba = cfg.flow("A->B"), cfg.flow("B->A")
    assert (ab.topics, ab.topics_exclude, ab.offset_lag_max) == (("audit",), (r".*\.tmp",), 1)
    assert (ba.topics, ba.topics_exclude, ba.offset_lag_max) == (("orders.*", "payments"), (r".*\.tmp",), 500)
    only_blacklist = config(TWO_CLUSTERS + "A->B.enabled = true\nA->B.topics.blacklist = x.*, y\n")
    assert only_blacklist.flow("A->B").topics_exclude == ("x.*", "y")


def test_flows_are_disabled_unless_enabled_as_in_mm2():
    cfg = config(TWO_CLUSTERS + "A->B.topics = .*\nB->A.enabled = false\n")
    assert [(f.name, f.enabled) for f in cfg.flows] == [("A->B", False), ("B->A", False)]
    everything = config(TWO_CLUSTERS + "enabled = true\n")
    assert [f.name for f in everything.enabled_flows()] == ["A->B", "B->A"]
    no_pairs = config(TWO_CLUSTERS + "enabled = true\nemit.heartbeats.enabled = false\n")
    assert no_pairs.flows == ()
    assert "mm2.properties: A->B.enabled: expected true or false (got 'yes')" in error(
        TWO_CLUSTERS + "A->B.enabled = yes\n"
    )


def test_identity_policy_and_one_policy_for_all_enabled_flows():
    identity = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    cfg = config(TWO_CLUSTERS + identity + "A->B.enabled = true\n")
    assert cfg.replication_policy.class_ == "identity"
    docs_style = config(TWO_CLUSTERS + "A->B.enabled = true\nA->B.replication.policy.separator = _\n")
    assert docs_style.replication_policy.separator == "_"
    message = error(TWO_CLUSTERS + "A->B.enabled = true\nB->A.enabled = true\nA->B.replication.policy.separator = _\n")
    assert "one replication policy for all flows" in message and "A->B: default with separator '_'" in message
    custom = error(TWO_CLUSTERS + "replication.policy.class = com.example.MyPolicy\nA->B.enabled = true\n")
    assert "replication.policy.class: 'com.example.MyPolicy' is a Java class mirrorlake cannot load" in custom


# -- what is not an MM2 key ----------------------------------------------------------------------
def test_unknown_keys_are_named_with_the_file():
    message = error(TWO_CLUSTERS + "topcs = .*\nA->B.enabled = true\nA.bootstrap.server = x\nmy.own.key = 1\n")
    assert message.startswith("mm2.properties: invalid MirrorMaker 2 properties:")
    assert "Unrecognized properties: topcs (did you mean topics?), A.bootstrap.server" in message
    assert "(did you mean A.bootstrap.servers?)" in message and "my.own.key" in message
    assert "A->B.emit.heartbeats (did you mean A->B.emit.heartbeats.enabled?)" in error(
        TWO_CLUSTERS + "A->B.emit.heartbeats = false\n"
    )


def test_flows_and_keys_naming_unlisted_clusters_are_errors():
    message = error(TWO_CLUSTERS + "A->C.enabled = true\nC.bootstrap.servers = c:9092\n")
    assert "A->C.enabled: unknown cluster 'C' (clusters = A, B)" in message
    assert "C.bootstrap.servers ('C' is not in clusters = A, B)" in message
    assert "A.bootstrap.servers is required" in error("clusters = A\n")
    assert "clusters is required" in error("A.bootstrap.servers = a:9092\n")
    # Kafka's docs write "clusters = us-west, us-east   # defines cluster aliases": not a comment in Java
    assert "'#' starts a comment only at the beginning of a line" in error("clusters = a, b  # aliases\n")


def test_cli_names_the_key_and_exits_2_without_traceback(tmp_path: Path):
    bad = tmp_path / "bad.properties"
    bad.write_text(TWO_CLUSTERS + "A->B.enabled = true\ntopcs = .*\n")
    result = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert f"error: {bad}: invalid MirrorMaker 2 properties" in result.stderr
    assert "Unrecognized properties: topcs (did you mean topics?)" in result.stderr


def test_group_and_checkpoint_keys_map_onto_the_flow():
    cfg = config(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
        "A->B.groups = app-.*\nA->B.groups.exclude = app-test\nsync.group.offsets.enabled = true\n"
        "emit.checkpoints.interval.seconds = 7\nA->B.emit.heartbeats.enabled = false\n"
    )
    (flow,) = cfg.flows
    assert flow.groups == ("app-.*",) and flow.groups_exclude == ("app-test",)
    assert flow.sync_group_offsets and flow.emit_checkpoints_interval_seconds == 7 and not flow.emit_heartbeats
    assert flow.emit_mm2_checkpoints and not flow.emit_mm2_offset_syncs  # mirrorlake's defaults


def test_mm2_checkpoints_and_offset_syncs_follow_mm2s_switches():
    base = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    (off,) = config(base + "A->B.emit.checkpoints.enabled = false\n").flows
    assert not off.emit_checkpoints and not off.emit_mm2_checkpoints
    (syncs,) = config(base + "emit.offset-syncs.enabled = true\n").flows
    assert syncs.emit_mm2_offset_syncs and syncs.emit_checkpoints and syncs.emit_mm2_checkpoints


def test_metric_names_formats_of_kafka_4_3_choose_the_layouts_of_the_mm2_metrics():
    cfg = config(
        TWO_CLUSTERS + "metric.names.formats = new\nA->B.enabled = true\n"
        "B->A.enabled = true\nB->A.metric.names.formats = legacy, new\n"
    )
    assert cfg.flow("A->B").metric_names_formats == ("new",)
    assert cfg.flow("B->A").metric_names_formats == ("legacy", "new")
    assert config(TWO_CLUSTERS + "A->B.enabled = true\n").flow("A->B").metric_names_formats == ("legacy",)
    for wrong in ("old", "legacy, legacy", ""):
        message = error(TWO_CLUSTERS + f"A->B.enabled = true\nA->B.metric.names.formats = {wrong}\n")
        assert "A->B.metric.names.formats" in message and "legacy and new" in message, message
