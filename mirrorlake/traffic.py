"""Sample traffic for demos and tests: keyed records with headers, plus transactions.

Committed and aborted transactions leave gaps in the source offsets (control markers, aborted
records that read_committed consumers never see): exactly what makes offset translation hard.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.errors import ReplicationError
from replicator.kafka.settings import RDKAFKA_LOG

# librdkafka's own lines (``%4|...|GETPID|`` while a transaction coordinator loads) through logging,
# not printed on the demo's terminal
_LOGGED = {"logger": RDKAFKA_LOG}

__all__ = ["TrafficReport", "ensure_topic", "produce_sample_traffic"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrafficReport:
    plain_records: int
    committed_records: int
    aborted_records: int


def ensure_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    future = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        raise ReplicationError(f"cannot create topic {topic} at {bootstrap}: {exc}") from exc


def produce_sample_traffic(
    bootstrap: str,
    topic: str,
    *,
    records: int,
    partitions: int,
    transactions: int = 4,
    records_per_transaction: int = 25,
    value_size: int = 100,
) -> TrafficReport:
    """Produce ``records`` plain records, then ``transactions`` transactions, every other aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **_LOGGED})
    pad = "x" * max(0, value_size - 20)
    now_ms = int(time.time() * 1000)
    for i in range(records):
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"key-{i}".encode(),
                    value=f"value-{i}-{pad}".encode(),
                    headers=[("source", b"demo"), ("seq", str(i).encode())],
                    partition=i % partitions,
                    timestamp=now_ms + i,
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    txn = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"mirrorlake-demo-{uuid.uuid4().hex[:8]}", **_LOGGED}
    )
    txn.init_transactions(30)
    committed = aborted = 0
    for n in range(transactions):
        txn.begin_transaction()
        for i in range(records_per_transaction):
            txn.produce(topic, key=f"txn-{n}-{i}".encode(), value=f"txn-{n}-{i}".encode(), partition=i % partitions)
        txn.flush(30)  # an abort of records the broker never saw is refused under transaction.version 2
        if n % 2 == 0:
            txn.commit_transaction(30)
            committed += records_per_transaction
        else:
            txn.abort_transaction(30)
            aborted += records_per_transaction
    _log.info("produced %d records and %d transactions to %s", records, transactions, topic)
    return TrafficReport(records, committed, aborted)
