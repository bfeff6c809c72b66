"""mirrorlake.localkafka and replicator.kafka.connectivity: jars, one broker's lifecycle, the fleet.

Tests marked ``kafka`` run real brokers; the shared session clusters (A, B, C) are used where a test
only needs *a* cluster, extra brokers only where a test stops or breaks one.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlake.localkafka import (
    LocalBroker,
    local_brokers,
    require_java,
    resolve_kafka_jars,
    status,
    up,
)
from mirrorlake.localkafka.broker import first_errors
from mirrorlake.localkafka.jvm_options import PERFORMANCE_OPTS_ENV, performance_options
from replicator.config import LocalKafkaConfig, MirrorlakeConfig, parse_config
from replicator.config.cache import cache_root
from replicator.errors import (
    ClusterStartError,
    ClusterUnreachableError,
    ConfigError,
    DependencyResolutionError,
    PortInUseError,
    ToolMissingError,
)
from replicator.kafka.connectivity import wait_for_cluster

if TYPE_CHECKING:
    from conftest import KafkaClusters

VERSION = LocalKafkaConfig().version


def make_config(work_dir: Path, clusters: dict[str, str]) -> MirrorlakeConfig:
    return parse_config(
        {
            "clusters": {alias: {"bootstrap_servers": b} for alias, b in clusters.items()},
            "local_kafka": {"work_dir": str(work_dir)},
        }
    )


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)


def topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


@pytest.fixture
def no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH is an empty dir and JAVA_HOME is unset: neither java nor mvn can be found."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)


# -- configuration -> brokers (no processes) -----------------------------------------------------


def test_only_single_loopback_addresses_get_a_local_broker(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {
            "L1": "127.0.0.1:21000",
            "L2": "localhost:21010",
            "remote": "kafka.example.com:9092",
            "multi": "127.0.0.1:21020,127.0.0.1:21030",
        },
    )
    brokers = local_brokers(config, cache_root=tmp_path / "cache")
    assert [(b.alias, b.port, b.bootstrap) for b in brokers] == [
        ("L1", 21000, "127.0.0.1:21000"),
        ("L2", 21010, "127.0.0.1:21010"),
    ]
    assert brokers[0].cluster_dir == (tmp_path / "L1").absolute()
    assert brokers[0].lib_dir == (tmp_path / "cache" / f"kafka-{VERSION}" / "lib").absolute()


def test_overlapping_port_pairs_are_a_config_error(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"P": "127.0.0.1:21000", "Q": "127.0.0.1:21001"})
    with pytest.raises(ConfigError, match=r"P and Q both need port 21001"):
        local_brokers(config)


def test_stale_pid_file_is_removed_and_its_process_never_signalled(tmp_path: Path) -> None:
    broker = LocalBroker("S", 21000, tmp_path / "S", tmp_path / "lib")
    broker.cluster_dir.mkdir()
    broker.pid_file.write_text(f"{os.getpid()}\n")  # a live process, but not a kafka.Kafka of S
    assert not broker.is_running()
    assert broker.pid() is None
    broker.stop()  # must not SIGTERM the test process
    assert not broker.pid_file.exists()


# -- tools and jars ------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_tools")
def test_missing_java_is_reported_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match="openjdk-17-jre-headless"):
        require_java()
    config = make_config(tmp_path / "clusters", {"J": "127.0.0.1:21000"})
    with pytest.raises(ToolMissingError, match="java"):
        up(config, cache_root=tmp_path / "cache")
    assert not (tmp_path / "clusters").exists()


def test_kafka_jvm_performance_opts_are_read_as_kafka_scripts_read_them() -> None:
    assert performance_options({}) == ["-XX:+UseG1GC"]
    assert performance_options({PERFORMANCE_OPTS_ENV: "  "}) == ["-XX:+UseG1GC"]
    opts = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 '-Dname=a b'"
    assert performance_options({PERFORMANCE_OPTS_ENV: opts}) == [
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dname=a b",
    ]
    with pytest.raises(ConfigError, match=f"{PERFORMANCE_OPTS_ENV}=.*cannot be split"):
        performance_options({PERFORMANCE_OPTS_ENV: "-Dname='a b"})
    with pytest.raises(ConfigError, match=f"{PERFORMANCE_OPTS_ENV}=.*'UseSerialGC' is not a JVM option"):
        performance_options({PERFORMANCE_OPTS_ENV: "-Xss1m UseSerialGC"})


def test_broken_kafka_jvm_performance_opts_are_reported_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(PERFORMANCE_OPTS_ENV, "-XX:+UseSerialGC oops")
    config = make_config(tmp_path / "clusters", {"J": "127.0.0.1:21000"})
    with pytest.raises(ConfigError, match=PERFORMANCE_OPTS_ENV):
        up(config, cache_root=tmp_path / "cache")
    assert not (tmp_path / "clusters").exists()
    broker = LocalBroker("J", 21000, tmp_path / "direct", tmp_path / "lib")  # started directly, not through up()
    with pytest.raises(ConfigError, match=PERFORMANCE_OPTS_ENV):
        broker.start()
    assert not (tmp_path / "direct").exists()


@pytest.mark.usefixtures("no_tools")
def test_missing_mvn_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match=r"mvn.*apt-get install maven"):
        resolve_kafka_jars(VERSION, tmp_path / "cache")


def test_resolved_jars_are_reused_without_mvn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib_dir = resolve_kafka_jars(VERSION, cache_root())
    assert any(lib_dir.glob("kafka_2.13-*.jar"))
    assert any(lib_dir.glob("connect-mirror-*.jar"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn: a second call must not need it
    assert resolve_kafka_jars(VERSION, cache_root()) == lib_dir


def test_unknown_kafka_version_is_a_dependency_error(tmp_path: Path) -> None:
    with pytest.raises(DependencyResolutionError, match=r"0\.0\.0-nonexistent") as info:
        resolve_kafka_jars("0.0.0-nonexistent", tmp_path / "cache")
    assert "Last lines of its output" in str(info.value)
    assert not (tmp_path / "cache" / "kafka-0.0.0-nonexistent" / ".resolved").exists()


# -- connectivity --------------------------------------------------------------------------------


def test_wait_for_cluster_on_a_closed_port_names_the_alias_and_hides_secrets(
    free_port_pair: Callable[[], int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bootstrap = f"127.0.0.1:{free_port_pair()}"
    secret = "hunter2-not-for-logs"
    client_config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "mirrorlake",
        "sasl.password": secret,
    }
    with pytest.raises(ClusterUnreachableError, match=rf"cluster nowhere at {bootstrap} .* within 3 s") as info:
        wait_for_cluster("nowhere", client_config, timeout_s=3)
    assert secret not in str(info.value)
    assert secret not in caplog.text


# -- real brokers --------------------------------------------------------------------------------


@pytest.mark.kafka
def test_session_clusters_answer_metadata(kafka_clusters: KafkaClusters, unique_topic: Callable[..., str]) -> None:
    for alias in ("A", "B", "C"):
        wait_for_cluster(alias, {"bootstrap.servers": kafka_clusters.bootstrap(alias)}, timeout_s=10)
    topic = unique_topic("localkafka")
    create_topic(kafka_clusters.bootstrap("A"), topic)
    assert topic in topics(kafka_clusters.bootstrap("A"))
    assert topic not in topics(kafka_clusters.bootstrap("B"))  # independent clusters


@pytest.mark.kafka
def test_status_reports_session_clusters_running_and_ready(kafka_clusters: KafkaClusters) -> None:
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B"}])
    by_alias = {s.alias: s for s in status(config) if s.alias in kafka_clusters.started}
    assert set(by_alias) == set(kafka_clusters.started)
    for alias, st in by_alias.items():
        assert st.bootstrap == kafka_clusters.bootstrap(alias)
        assert st.running and st.ready and isinstance(st.pid, int)


@pytest.mark.kafka
def test_broker_start_is_idempotent_and_stop_restart_keep_the_cluster(
    tmp_path: Path, free_port_pair: Callable[[], int], unique_topic: Callable[..., str]
) -> None:
    lib_dir = resolve_kafka_jars(VERSION, cache_root())
    broker = LocalBroker("X", free_port_pair(), tmp_path / "X", lib_dir)
    try:
        broker.start()
        broker.wait_ready(60)
        pid = broker.pid()
        assert pid is not None and broker.is_running()
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert all(option.encode() in command_line for option in performance_options())  # $KAFKA_JVM_PERFORMANCE_OPTS
        broker.start()  # already running: a no-op
        assert broker.pid() == pid
        cluster_id = (broker.cluster_dir / "cluster.id").read_text()
        topic = unique_topic("restart")
        create_topic(broker.bootstrap, topic)

        broker.stop()
        assert not broker.is_running()
        assert not broker.pid_file.exists()
        assert not Path(f"/proc/{pid}").exists()
        broker.stop()  # already stopped: a no-op

        broker.start()
        broker.wait_ready(60)
        assert (broker.cluster_dir / "cluster.id").read_text() == cluster_id
        assert topic in topics(broker.bootstrap)
        assert "INFO" in broker.server_log.read_text()
    finally:
        broker.stop()
    assert not broker.is_running()


@pytest.mark.parametrize("taken", ["client", "controller"])
def test_up_refuses_a_port_in_use_and_starts_nothing(
    taken: str, tmp_path: Path, free_port_pair: Callable[[], int]
) -> None:
    port = free_port_pair()
    busy_port = port if taken == "client" else port + 1
    config = make_config(tmp_path, {"OK": f"127.0.0.1:{free_port_pair()}", "BUSY": f"127.0.0.1:{port}"})
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", busy_port))
        squatter.listen()
        with pytest.raises(PortInUseError, match=rf"cluster BUSY: port {busy_port} "):
            up(config)
        busy = next(b for b in local_brokers(config) if b.alias == "BUSY")
        with pytest.raises(PortInUseError, match=rf"cluster BUSY: port {busy_port} "):
            busy.start()
    assert [b.is_running() for b in local_brokers(config)] == [False, False]
    assert not list(tmp_path.glob("*/broker.pid"))


@pytest.mark.kafka
def test_up_stops_the_brokers_it_started_when_another_fails(
    tmp_path: Path, free_port_pair: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, {"GOOD": f"127.0.0.1:{free_port_pair()}", "BAD": f"127.0.0.1:{free_port_pair()}"})
    real_start = LocalBroker.start

    def start(self: LocalBroker) -> None:
        if self.alias == "BAD":
            raise ClusterStartError("cluster BAD: injected failure")
        real_start(self)

    monkeypatch.setattr(LocalBroker, "start", start)
    with pytest.raises(ClusterStartError, match="injected failure"):
        up(config)
    good = next(b for b in local_brokers(config) if b.alias == "GOOD")
    assert (good.cluster_dir / "cluster.id").exists()  # it really was started ...
    assert not good.is_running()  # ... and stopped again
    assert not good.pid_file.exists()


def test_first_errors_picks_the_cause_not_the_shutdown() -> None:
    log = [
        "[2026-11-27 04:19:40,001] INFO starting (kafka.server.KafkaRaftServer)",
        "[2026-11-27 04:19:45,100] ERROR Unable to start acceptor for PLAINTEXT (kafka.network.DataPlaneAcceptor)",
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:24530",
        "\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:740)",
        "[2026-11-27 04:19:45,200] INFO [BrokerServer id=1] shutting down (kafka.server.BrokerServer)",
        "[2026-11-27 04:19:46,000] WARN something else (kafka.server.X)",
    ]
    assert first_errors(log) == log[1:4]
    assert first_errors(log, limit=2) == log[1:3]
    assert first_errors(log[:1] + log[4:]) == []


@pytest.mark.kafka
def test_a_broker_that_exits_at_start_is_reported_with_its_first_error(
    tmp_path: Path, free_port_pair: Callable[[], int]
) -> None:
    """The port is taken after the broker's own check, before its JVM binds: Kafka gives up and exits.
    The error names the exit and quotes the cause from the log, above the shutdown lines."""
    port = free_port_pair()
    broker = next(b for b in local_brokers(make_config(tmp_path, {"LATE": f"127.0.0.1:{port}"})))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        broker.start()
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        try:
            with pytest.raises(ClusterStartError) as raised:
                broker.wait_ready(120)
        finally:
            broker.stop()
    message = str(raised.value)
    assert "cluster LATE: broker exited with code" in message
    cause = message.split("First errors in ", 1)[1].split("Last lines of ", 1)[0]
    assert " ERROR " in cause and f"{port}" in cause, message
    assert not broker.is_running()


def test_a_start_that_lost_its_port_is_retried_on_new_ports_and_any_other_failure_is_raised():
    from tests.bind_race import on_new_ports_after_a_bind_race

    attempts: list[int] = []

    def lost_once(attempt: int) -> str:
        attempts.append(attempt)
        if attempt == 1:
            raise ClusterStartError("cluster X: Socket server failed to bind to 127.0.0.1:1: Address already in use")
        return f"started on attempt {attempt}"

    with pytest.warns(UserWarning, match="X started again on new ports: .*Address already in use"):
        assert on_new_ports_after_a_bind_race(lost_once, "X") == "started on attempt 2"
    assert attempts == [1, 2]

    def broken(attempt: int) -> str:
        attempts.append(attempt)
        raise ClusterStartError("cluster X: broker exited with code 1: invalid log.dirs")

    attempts.clear()
    with pytest.raises(ClusterStartError, match="invalid log.dirs"):
        on_new_ports_after_a_bind_race(broken, "X")
    assert attempts == [1]

    def always_lost(attempt: int) -> str:
        attempts.append(attempt)
        raise ClusterStartError("Address already in use")

    attempts.clear()
    with pytest.warns(UserWarning), pytest.raises(ClusterStartError):
        on_new_ports_after_a_bind_race(always_lost, "X")
    assert attempts == [1, 2, 3]
