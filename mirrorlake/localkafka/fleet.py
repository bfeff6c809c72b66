"""The local brokers of a configuration: which clusters get one, and bringing them all up or down.

A cluster is *local* when its ``bootstrap_servers`` is exactly one ``127.0.0.1:<port>`` or
``localhost:<port>`` address; it gets a ``LocalBroker`` in ``<local_kafka.work_dir>/<alias>``
listening on port (clients) and port+1 (controller). Any other cluster is remote and left alone.
Local brokers speak PLAINTEXT only, whatever ``clusters.<alias>.client`` says.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mirrorlake.localkafka.broker import LocalBroker
from mirrorlake.localkafka.jars import kafka_lib_dir, require_java, resolve_kafka_jars
from mirrorlake.localkafka.jvm_options import performance_options
from replicator.config import MirrorlakeConfig
from replicator.config.cache import cache_root as default_cache_root
from replicator.errors import ConfigError
from replicator.kafka.connectivity import answers_metadata

__all__ = ["BrokerStatus", "down", "local_brokers", "status", "up"]

_log = logging.getLogger(__name__)

_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
_STATUS_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class BrokerStatus:
    """What ``status`` saw: ``running`` is our broker process, ``ready`` is a metadata answer.

    ``ready`` without ``running`` means something else (not started by mirrorlake) answers there.
    """

    alias: str
    bootstrap: str
    pid: int | None
    running: bool
    ready: bool


def local_brokers(config: MirrorlakeConfig, *, cache_root: Path | None = None) -> list[LocalBroker]:
    """One ``LocalBroker`` per local cluster, in configuration order; starts nothing.

    Raises ``ConfigError`` if a local address has an unusable port or two local brokers' port
    pairs (port, port+1) overlap.
    """
    lib_dir = kafka_lib_dir(config.local_kafka.version, cache_root or default_cache_root())
    brokers: list[LocalBroker] = []
    for alias, cluster in config.clusters.items():
        port = _local_port(alias, cluster.bootstrap_servers)
        if port is None:
            _log.info("cluster %s at %s is remote; no local broker", alias, cluster.bootstrap_servers)
            continue
        brokers.append(
            LocalBroker(
                alias=alias,
                port=port,
                cluster_dir=config.local_kafka.work_dir / alias,
                lib_dir=lib_dir,
                heap=config.local_kafka.heap,
            )
        )
    _check_port_pairs_disjoint(brokers)
    return brokers


def up(config: MirrorlakeConfig, *, cache_root: Path | None = None, ready_timeout_s: float = 90.0) -> list[LocalBroker]:
    """Start every local broker that is not running, in parallel, and wait until all are ready.

    Resolves the Kafka jars first (once per version) and checks java and every port before any
    JVM starts. Brokers already running are kept. On any failure the brokers this call started
    are stopped again and the first error is raised (``ToolMissingError``,
    ``DependencyResolutionError``, ``PortInUseError``, ``ClusterStartError``).
    """
    cache_root = cache_root or default_cache_root()
    brokers = local_brokers(config, cache_root=cache_root)
    if not brokers:
        _log.info("no local clusters in the configuration; nothing to start")
        return []
    require_java()
    performance_options()  # a broken $KAFKA_JVM_PERFORMANCE_OPTS is named before any JVM starts
    resolve_kafka_jars(config.local_kafka.version, cache_root)
    already_running = {b.alias for b in brokers if b.is_running()}
    for broker in brokers:
        if broker.alias not in already_running:
            broker.check_ports()

    def bring_up(broker: LocalBroker) -> None:
        broker.start()
        broker.wait_ready(ready_timeout_s)

    try:
        _for_each(brokers, bring_up, "start")
    except BaseException:
        started = [b for b in brokers if b.alias not in already_running]
        _for_each(started, lambda b: b.stop(), "stop after a failed start", log_only=True)
        raise
    return brokers


def down(config: MirrorlakeConfig, *, timeout_s: float = 20.0) -> None:
    """Stop every local broker of ``config`` that runs (in parallel); remove stale pid files."""
    _for_each(local_brokers(config), lambda b: b.stop(timeout_s), "stop")


def status(config: MirrorlakeConfig) -> list[BrokerStatus]:
    """Process and readiness of every local broker; each readiness probe waits at most 2 s."""
    brokers = local_brokers(config)
    results: dict[str, BrokerStatus] = {}
    lock = threading.Lock()

    def inspect(broker: LocalBroker) -> None:
        pid = broker.pid()
        ready = answers_metadata({"bootstrap.servers": broker.bootstrap}, timeout_s=_STATUS_TIMEOUT_S)
        with lock:
            results[broker.alias] = BrokerStatus(broker.alias, broker.bootstrap, pid, pid is not None, ready)

    _for_each(brokers, inspect, "inspect")
    return [results[b.alias] for b in brokers]


def _for_each(
    brokers: list[LocalBroker],
    action: Callable[[LocalBroker], None],
    what: str,
    *,
    log_only: bool = False,
) -> None:
    """Run ``action`` on all brokers in parallel; then raise the first failure (in broker order).

    Later failures are logged, not lost. With ``log_only`` nothing is raised (cleanup paths).
    """
    if not brokers:
        return
    with ThreadPoolExecutor(max_workers=len(brokers), thread_name_prefix="localkafka") as pool:
        futures = [(b, pool.submit(action, b)) for b in brokers]
    failures: list[tuple[LocalBroker, BaseException]] = []
    for broker, future in futures:
        exc = future.exception()
        if exc is not None:
            failures.append((broker, exc))
    for broker, exc in failures[0 if log_only else 1 :]:
        _log.error("cluster %s: %s failed: %s", broker.alias, what, exc)
    if failures and not log_only:
        raise failures[0][1]


def _local_port(alias: str, bootstrap_servers: str) -> int | None:
    address = bootstrap_servers.strip()
    if "," in address or ":" not in address:
        return None
    host, _, port_text = address.rpartition(":")
    if host not in _LOCAL_HOSTS:
        return None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65534:
        raise ConfigError(
            f"clusters.{alias}.bootstrap_servers: {bootstrap_servers!r} is local but {port_text!r} is not "
            f"a usable port (1-65534; the controller takes port+1)"
        )
    return int(port_text)


def _check_port_pairs_disjoint(brokers: list[LocalBroker]) -> None:
    owner: dict[int, str] = {}
    for broker in brokers:
        for port in (broker.port, broker.controller_port):
            if port in owner:
                raise ConfigError(
                    f"clusters {owner[port]} and {broker.alias} both need port {port} on 127.0.0.1 "
                    f"(each local broker uses its port and port+1); move one of them"
                )
            owner[port] = broker.alias
