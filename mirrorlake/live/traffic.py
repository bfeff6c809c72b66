"""The live demo's traffic: producers and consumer groups on the source that run until stopped.

What an operator's source cluster looks like, small: ``orders`` gets keyed records with headers at
a steady rate and a burst now and then (a batch job, a backlog the replicator must catch up on);
``payments`` gets transactions from a transactional producer, one in five aborted (the gaps that
make offset translation hard); two consumer groups read ``orders``, one keeping up and committing
every second, one that wakes up now and then and lags (a failover plan then has two answers).
Everything runs on threads of one process, stopped by one event (``mirrorlake demo traffic``
stops on SIGTERM).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from replicator.kafka.settings import RDKAFKA_LOG

__all__ = ["TrafficSettings", "LiveTraffic", "ORDERS", "PAYMENTS", "KEEPING_UP", "LAGGING"]

_log = logging.getLogger(__name__)

ORDERS, PAYMENTS = "orders", "payments"
KEEPING_UP, LAGGING = "demo-app", "demo-batch"
_LOGGED = {"logger": RDKAFKA_LOG}  # librdkafka's lines through logging, not on the terminal


@dataclass(frozen=True)
class TrafficSettings:
    rate: float = 60.0  # orders per second between bursts
    burst: int = 3_000  # orders at once, every ``burst_every_s``
    burst_every_s: float = 45.0
    transaction_every_s: float = 0.5  # one transaction of ``transaction_records`` payments
    transaction_records: int = 5
    lagging_every_s: float = 40.0  # how often the lagging group catches up


class LiveTraffic:
    """Producers and groups on ``bootstrap`` until ``stop`` is set; a thread dies loudly (logged) and
    ``failed`` says which, so the process can exit non-zero."""

    def __init__(self, bootstrap: str, settings: TrafficSettings, stop: threading.Event) -> None:
        self._bootstrap = bootstrap
        self._settings = settings
        self._stop = stop
        self.failed: list[str] = []

    def run(self) -> None:
        """Run every part until ``stop``; returns when all have ended."""
        parts = {
            "orders": self._orders,
            "payments": self._payments,
            KEEPING_UP: lambda: self._group(KEEPING_UP, every_s=1.0),
            LAGGING: lambda: self._group(LAGGING, every_s=self._settings.lagging_every_s),
        }
        threads = [threading.Thread(target=self._guarded, args=(n, f), name=n, daemon=True) for n, f in parts.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _guarded(self, name: str, part: Callable[[], None]) -> None:
        try:
            part()
        except KafkaException as exc:
            _log.error("traffic %s stopped: %s", name, exc)
            self.failed.append(name)
            self._stop.set()

    def _orders(self) -> None:
        s = self._settings
        producer = Producer({"bootstrap.servers": self._bootstrap, "linger.ms": 20, **_LOGGED})
        sent, next_burst = 0, time.monotonic() + s.burst_every_s
        while not self._stop.is_set():
            tick = time.monotonic()
            n = 1 if tick < next_burst else s.burst
            if n > 1:
                next_burst = tick + s.burst_every_s
            for _ in range(n):
                self._produce(producer, ORDERS, f"order-{sent}".encode(), f"order {sent}".encode())
                sent += 1
            producer.poll(0)
            self._stop.wait(max(0.0, 1.0 / s.rate - (time.monotonic() - tick)))
        producer.flush(10)

    @staticmethod
    def _produce(producer: Producer, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value, headers=[("source", b"live-demo")])
                return
            except BufferError:
                producer.poll(0.05)

    def _payments(self) -> None:
        s = self._settings
        txn = Producer(
            {"bootstrap.servers": self._bootstrap, "transactional.id": f"live-demo-{uuid.uuid4().hex[:8]}", **_LOGGED}
        )
        txn.init_transactions(30)
        n = 0
        while not self._stop.wait(s.transaction_every_s):
            txn.begin_transaction()
            for i in range(s.transaction_records):
                txn.produce(PAYMENTS, key=f"payment-{n}-{i}".encode(), value=b"42.00")
            txn.flush(30)
            if n % 5 == 4:
                txn.abort_transaction(30)
            else:
                txn.commit_transaction(30)
            n += 1

    def _group(self, group: str, *, every_s: float) -> None:
        """Read ``orders`` as ``group``: everything there is every ``every_s``, then commit."""
        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                **_LOGGED,
            }
        )
        consumer.subscribe([ORDERS])
        try:
            while not self._stop.is_set():
                until = time.monotonic() + min(every_s, 2.0)
                positions: dict[int, int] = {}
                while time.monotonic() < until and not self._stop.is_set():
                    for m in consumer.consume(500, timeout=0.2):
                        partition, offset = m.partition(), m.offset()
                        if m.error() is None and partition is not None and offset is not None:
                            positions[partition] = offset + 1
                if positions:
                    consumer.commit(offsets=[TopicPartition(ORDERS, p, o) for p, o in positions.items()])
                self._stop.wait(max(0.0, every_s - min(every_s, 2.0)))
        finally:
            consumer.close()
