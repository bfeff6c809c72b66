"""Shared fixtures: three real local Kafka clusters (A, B, C) for the whole session, uuid topic names.

The clusters are started with the same code as ``mirrorlake clusters up`` (``mirrorlake.localkafka``)
on free port pairs under the session's tmp dir, and stopped by PID at session end, also when tests or
the start-up fail. ``MIRRORLAKE_TEST_BOOTSTRAP_<ALIAS>`` (e.g. ``MIRRORLAKE_TEST_BOOTSTRAP_A=host:9092``)
uses an existing cluster for that alias instead; such clusters are only checked, never stopped.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mirrorlake.localkafka import down, up
from mirrorlake.localkafka.jvm_options import PERFORMANCE_OPTS_ENV
from mirrorlake.localkafka.ports import find_free_port_pair
from replicator.config import FlowConfig, MirrorlakeConfig, parse_config
from replicator.kafka.connectivity import wait_for_cluster
from tests.bind_race import on_new_ports_after_a_bind_race

# The session fixture ``built`` (a lakehouse built once from real clusters, shared by its readers).
pytest_plugins = ["tests.lakehouse_support", "tests.s3_support"]

ALIASES = ("A", "B", "C")


# How ``make test`` (``-n 3 --dist loadgroup``) splits the modules between its xdist workers:
# every module with a test or fixture that asks for the Spark session or the built lakehouse runs
# on one worker, so Spark starts and the lakehouse is built once per run; every other module is a
# unit of its own that any worker takes when it runs low. Each worker that needs them starts its
# own session clusters, so Kafka tests never share a flow with a test of another worker. The
# scheduler is ours because xdist 3.8's ``xdist_group`` marks no longer reach node ids under
# pytest 9.2 (it sets ``item._nodeid``), and the controller that schedules has no collected items:
# it reads each module's text. The Spark unit is the longest, so it is handed out first.
_SPARK_RESOURCES = re.compile(r"def \w+\([^)]*\b(spark|built)\b")  # a test or fixture that asks for them


_SPARK_UNIT = "spark-session"

# Modules that take minutes, longest first, handed out right after the Spark unit. xdist orders the
# rest by their number of tests, which put these (one or two tests each) last: the standalone-cluster
# test started about 24 minutes into a 36-minute run and ended it. Seconds as measured in the
# fresh-clone CI of 67279cd (only their order matters; a module not listed keeps xdist's place).
_LONG_MODULES = {
    "tests/test_spark_cluster.py": 686,
    "tests/test_live_demo.py": 420,
    "tests/test_secured_clusters.py": 410,
    "tests/test_broker_faults.py": 380,
    "tests/test_topic_lives.py": 263,
    "tests/test_delivery.py": 261,
    "tests/test_chaos.py": 254,
    "tests/test_mtls_clusters.py": 214,
    "tests/test_failover_consumer.py": 175,
}

# Every Kafka JVM the tests start (session clusters, fault and secured clusters, MirrorMaker 2) runs
# C1-compiled with the serial collector, as Kafka's scripts allow through this variable: brokers
# that carry a few thousand records spend most of their CPU compiling for a long run: the brokers'
# CPU over a full run fell from about 530 to 373 s (bench/results/test_suite_cpu-2026-11-26.txt).
# Benches and the demo keep G1 and C2.
_TEST_KAFKA_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault(PERFORMANCE_OPTS_ENV, _TEST_KAFKA_JVM)  # inherited by xdist workers and every JVM


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    uses_spark: dict[str, bool] = {}

    class BySparkSession(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module not in uses_spark:
                uses_spark[module] = bool(_SPARK_RESOURCES.search((config.rootpath / module).read_text()))
            return _SPARK_UNIT if uses_spark[module] else module

        def _assign_work_unit(self, node: Any) -> None:
            for unit in sorted((u for u in _LONG_MODULES if u in self.workqueue), key=_LONG_MODULES.__getitem__):
                self.workqueue.move_to_end(unit, last=False)  # the longest ends up first
            if _SPARK_UNIT in self.workqueue:
                self.workqueue.move_to_end(_SPARK_UNIT, last=False)
            super()._assign_work_unit(node)

    return BySparkSession(config, log)


@dataclass(frozen=True)
class KafkaClusters:
    """The session's clusters: ``bootstrap(alias)``, and ``config(...)`` to build a config on them."""

    bootstraps: Mapping[str, str]
    started: frozenset[str]  # aliases whose broker this session started (and will stop)
    work_dir: Path

    def bootstrap(self, alias: str) -> str:
        return self.bootstraps[alias]

    def config(self, *, flows: Sequence[FlowConfig | Mapping[str, Any]] = (), **top_level: Any) -> MirrorlakeConfig:
        """A validated ``MirrorlakeConfig`` with clusters A, B, C and ``flows``; ``top_level`` keys override.

        Each config gets its own heartbeats topic: the clusters are shared by every test, and a
        flow replicates its heartbeats topic whatever its topic filter says.
        """
        data: dict[str, Any] = {
            "clusters": {alias: {"bootstrap_servers": b} for alias, b in self.bootstraps.items()},
            "flows": list(flows),
            "local_kafka": {"work_dir": str(self.work_dir)},
            "heartbeats_topic": f"heartbeats-{uuid.uuid4().hex[:12]}",
            **top_level,
        }
        return parse_config(data, source="tests/conftest.py")


@pytest.fixture
def free_port_pair() -> Callable[[], int]:
    """Factory of free port pairs (p, p+1) on 127.0.0.1, distinct within one test."""
    handed_out: set[int] = set()

    def make() -> int:
        port = find_free_port_pair(handed_out)
        handed_out.update({port, port + 1})
        return port

    return make


def start_on_free_ports(aliases: list[str], work_dir: Path) -> tuple[dict[str, str], MirrorlakeConfig]:
    """Start a local cluster per alias on free port pairs; (bootstraps, the fleet's config)."""

    def start(attempt: int) -> tuple[dict[str, str], MirrorlakeConfig]:
        ports: set[int] = set()
        local: dict[str, str] = {}
        for alias in aliases:
            port = find_free_port_pair(ports)
            ports.update({port, port + 1})
            local[alias] = f"127.0.0.1:{port}"
        fleet_config = parse_config(
            {
                "clusters": {alias: {"bootstrap_servers": b} for alias, b in local.items()},
                "local_kafka": {"work_dir": str(work_dir / f"attempt-{attempt}")},
            },
            source="kafka_clusters fixture",
        )
        up(fleet_config)  # stops the brokers it started when one fails
        return local, fleet_config

    return on_new_ports_after_a_bind_race(start, "local clusters")


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClusters]:
    work_dir = tmp_path_factory.mktemp("kafka-clusters")
    existing = {
        a: os.environ[f"MIRRORLAKE_TEST_BOOTSTRAP_{a}"]
        for a in ALIASES
        if f"MIRRORLAKE_TEST_BOOTSTRAP_{a}" in os.environ
    }
    wanted = [alias for alias in ALIASES if alias not in existing]
    local, fleet_config = start_on_free_ports(wanted, work_dir) if wanted else ({}, None)
    try:
        for alias, bootstrap in existing.items():
            wait_for_cluster(alias, {"bootstrap.servers": bootstrap}, timeout_s=30)
        bootstraps = {alias: local.get(alias) or existing[alias] for alias in ALIASES}
        brokers_dir = Path(fleet_config.local_kafka.work_dir) if fleet_config is not None else work_dir
        yield KafkaClusters(bootstraps, frozenset(local), brokers_dir)
    finally:
        if fleet_config is not None:
            down(fleet_config)


@pytest.fixture(scope="session")
def unique_topic() -> Callable[..., str]:
    """Factory of topic names that no other test (or earlier run) uses: ``<prefix>-<uuid hex>``."""

    def make(prefix: str = "test") -> str:
        return f"{prefix}-{uuid.uuid4().hex}"

    return make


@pytest.fixture(scope="session")
def spark():
    """One real SparkSession (local[2], Delta, Kafka source, ``SMALL_DATA_SPARK_CONF``) for the whole run."""
    from ingest.spark import spark_session
    from replicator.config import SparkConfig
    from tests.lakehouse_support import SMALL_DATA_SPARK_CONF

    session = spark_session(SparkConfig(master="local[2]", conf=SMALL_DATA_SPARK_CONF), app_name="mirrorlake-tests")
    yield session
    session.stop()
