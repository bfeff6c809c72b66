"""Every user mistake: a specific message naming what is wrong, a non-zero exit, no traceback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.errors import ClusterUnreachableError, ConfigError, PortInUseError, ToolMissingError

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def assert_user_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def write(tmp_path: Path, text: str, name: str = "conf.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_CLUSTERS = "clusters:\n  A: {bootstrap_servers: '127.0.0.1:1'}\n  B: {bootstrap_servers: '127.0.0.1:3'}\n"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (GOOD_CLUSTERS + "flowz: []\n", ["flowz: unknown key"]),
        (GOOD_CLUSTERS + "flows:\n  - {source: A, target: B, offset_lag_max: many}\n", ["flows.0.offset_lag_max"]),
        (GOOD_CLUSTERS + "flows:\n  - {source: A, target: Q}\n", ["unknown cluster 'Q'", "known: A, B"]),
        (GOOD_CLUSTERS + "flows:\n  - {source: A, target: A}\n", ["source and target are both 'A'"]),
        (GOOD_CLUSTERS + "flows:\n  - {source: A, target: B, topics: ['orders[']}\n", ["invalid regular expression"]),
        ("clusters:\n  A: {}\n", ["clusters.A.bootstrap_servers: required key is missing"]),
        ("clusters: [1, 2\n", ["not valid YAML"]),
        ("- just a list\n", ["expected a mapping at the top level"]),
    ],
)
def test_bad_config_is_named_with_file_and_key(tmp_path: Path, text: str, needles: list[str]):
    path = write(tmp_path, text)
    assert_user_error(run_cli("replicate", str(path)), ConfigError.exit_code, str(path), *needles)


def test_missing_config_file(tmp_path: Path):
    assert_user_error(run_cli("replicate", str(tmp_path / "nope.yaml")), ConfigError.exit_code, "not found")


def test_unknown_flow_is_named(tmp_path: Path):
    path = write(tmp_path, GOOD_CLUSTERS + "flows:\n  - {source: A, target: B}\n")
    assert_user_error(run_cli("replicate", str(path), "--flow", "B->A"), 2, "unknown flow 'B->A'", "A->B")


def test_unreachable_bootstrap_gives_up_after_a_bounded_retry(tmp_path: Path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = write(
        tmp_path,
        f"clusters:\n  A: {{bootstrap_servers: '127.0.0.1:{port}'}}\n  B: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
        "flows:\n  - {source: A, target: B}\nconnect_timeout_seconds: 2\n",
    )
    assert_user_error(
        run_cli("replicate", str(path)), ClusterUnreachableError.exit_code, "cluster A", f"127.0.0.1:{port}", "2 s"
    )


def test_a_client_setting_librdkafka_refuses_is_named_and_its_value_scrubbed(tmp_path: Path):
    # librdkafka quotes a value it refuses, and a client value may be a password
    path = write(
        tmp_path,
        "clusters:\n  A: {bootstrap_servers: '127.0.0.1:1', client: {security.protocol: hunter2-secret}}\n"
        "  B: {bootstrap_servers: '127.0.0.1:3'}\nflows:\n  - {source: A, target: B}\n",
    )
    result = run_cli("replicate", str(path))
    assert_user_error(
        result, ConfigError.exit_code, "invalid Kafka client configuration", "127.0.0.1:1", "security.protocol"
    )
    assert "hunter2-secret" not in result.stderr + result.stdout


def test_a_producer_setting_that_contradicts_idempotence_is_named(kafka_clusters, tmp_path: Path):
    """The admin client takes ``max.in.flight.requests.per.connection: 6``; the flow's idempotent
    producer, made after both clusters answer, does not: a named error, not a traceback. A YAML
    number is librdkafka text, so ``6`` (unquoted) is the value librdkafka judges."""
    path = write(
        tmp_path,
        f"clusters:\n  A: {{bootstrap_servers: '{kafka_clusters.bootstrap('A')}'}}\n"
        f"  B: {{bootstrap_servers: '{kafka_clusters.bootstrap('B')}', "
        "client: {max.in.flight.requests.per.connection: 6}}\n"
        "flows:\n  - {source: A, target: B, topics: [no-such-topic-x]}\n",
    )
    assert_user_error(
        run_cli("replicate", str(path), "--until-caught-up"),
        ConfigError.exit_code,
        f"the cluster at {kafka_clusters.bootstrap('B')}: its producer refuses it",
        "`max.in.flight` must be set <= 5 when `enable.idempotence` is true",
        "mirrorlake's producers are idempotent",
    )


def test_a_flow_whose_producer_is_refused_closes_the_consumer_it_made(kafka_clusters, monkeypatch):
    """For the replicator as a library: a failed wiring leaves no librdkafka consumer running."""
    import replicator.flow.clients as flow_clients
    from replicator.config import parse_config
    from replicator.kafka.clients import new_consumer

    made = []

    def recording(conf):  # noqa: ANN001, ANN202 - the real constructor, remembered
        made.append(new_consumer(conf))
        return made[-1]

    monkeypatch.setattr(flow_clients, "new_consumer", recording)
    config = parse_config(
        {
            "clusters": {
                "A": {"bootstrap_servers": kafka_clusters.bootstrap("A")},
                "B": {
                    "bootstrap_servers": kafka_clusters.bootstrap("B"),
                    "client": {"max.in.flight.requests.per.connection": 6},
                },
            },
            "flows": [{"source": "A", "target": "B", "topics": ["no-such-topic-x"]}],
        },
        source="test",
    )
    with pytest.raises(ConfigError, match="max.in.flight"):
        flow_clients.kafka_clients(config, config.flows[0], replicator_id="closing-test")
    assert len(made) == 1
    with pytest.raises(RuntimeError, match="Consumer closed"):
        made[0].assignment()


def test_sql_on_a_path_that_is_not_a_lakehouse(tmp_path: Path):
    assert_user_error(
        run_cli("sql", "SELECT 1", "--lakehouse", str(tmp_path)), 12, "is not a mirrorlake lakehouse", str(tmp_path)
    )


def test_sql_error_names_the_missing_table(tmp_path: Path):
    (tmp_path / "tables").mkdir()
    assert_user_error(
        run_cli("sql", "SELECT * FROM offset_mapping", "--lakehouse", str(tmp_path)), 11, "offset_mapping"
    )
    assert_user_error(run_cli("sql", "SELEC 1", "--lakehouse", str(tmp_path)), 11, "syntax error")


def test_clusters_up_without_java(tmp_path: Path):
    empty = tmp_path / "bin"
    empty.mkdir()
    path = write(tmp_path, "clusters:\n  A: {bootstrap_servers: '127.0.0.1:29999'}\n")
    env = {"PATH": str(empty), "JAVA_HOME": ""}
    assert_user_error(run_cli("clusters", "up", "-c", str(path), env=env), ToolMissingError.exit_code, "java")


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on while the block runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_clusters_up_on_a_port_in_use(tmp_path: Path):
    with busy_port() as port:
        path = write(
            tmp_path,
            f"clusters:\n  X: {{bootstrap_servers: '127.0.0.1:{port}'}}\nlocal_kafka: {{work_dir: '{tmp_path}/c'}}\n",
        )
        result = run_cli("clusters", "up", "-c", str(path))
    assert_user_error(result, PortInUseError.exit_code, "cluster X", f"port {port}")


def test_dashboard_on_a_port_in_use(tmp_path: Path):
    with busy_port() as port:
        path = write(
            tmp_path, f"clusters:\n  A: {{bootstrap_servers: '127.0.0.1:1'}}\nlakehouse: {{path: '{tmp_path}/l'}}\n"
        )
        result = run_cli("dashboard", "-c", str(path), "--port", str(port))
    assert_user_error(result, PortInUseError.exit_code, "dashboard", f"port {port}", "--port")
    assert run_cli("dashboard", "-c", str(path), "--port", "70000").returncode == 2  # click: not a port


def test_help_lists_every_subcommand():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("clusters", "replicate", "lakehouse", "sql", "dashboard", "demo"):
        assert command in result.stdout


@pytest.mark.parametrize("command", ["replicate", "observe", "import-mm2"])
def test_config_by_option_or_position_and_never_two(tmp_path: Path, command: str):
    path = write(tmp_path, GOOD_CLUSTERS + "flowz: []\n")
    assert_user_error(run_cli(command, "--config", str(path)), ConfigError.exit_code, str(path), "flowz")
    assert_user_error(run_cli(command, str(path)), ConfigError.exit_code, str(path), "flowz")
    other = write(tmp_path, GOOD_CLUSTERS, name="other.yaml")
    assert_user_error(run_cli(command, str(path), "--config", str(other)), 2, "two configuration files given")
