"""Two secured local brokers, S and T, of a test module's own (SASL_SSL or mutual TLS)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mirrorlake.localkafka import LocalBroker, resolve_kafka_jars
from mirrorlake.localkafka.ports import find_free_port_pair
from replicator.config import LocalKafkaConfig
from replicator.config.cache import cache_root
from tests.bind_race import on_new_ports_after_a_bind_race


@contextmanager
def broker_pair(work: Path, what: str, **security: Any) -> Iterator[dict[str, LocalBroker]]:
    """Brokers S and T started with ``security`` (``LocalBroker``'s ``sasl_users`` or
    ``tls_principals``), ready; stopped on exit. ``what`` names them in a bind race's retry."""
    lib_dir = resolve_kafka_jars(LocalKafkaConfig().version, cache_root())

    def start(attempt: int) -> dict[str, LocalBroker]:
        taken: set[int] = set()
        brokers = {}
        for alias in ("S", "T"):
            port = find_free_port_pair(taken)
            taken |= {port, port + 1}
            brokers[alias] = LocalBroker(alias, port, work / f"{alias}-{attempt}", lib_dir, **security)
        try:
            for broker in brokers.values():
                broker.start()
            for broker in brokers.values():
                broker.wait_ready(180)
        except BaseException:
            for broker in brokers.values():
                broker.stop()
            raise
        return brokers

    brokers = on_new_ports_after_a_bind_race(start, what)
    try:
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()
