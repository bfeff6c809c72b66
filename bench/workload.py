"""The benchmark's records, and the raw copy limits of a pair of brokers.

Records: ``count`` records of ``value_size`` random bytes (incompressible, so lz4 costs CPU
without shrinking anything: a worst case for every contender alike), key ``k<index>`` (12 bytes),
one header, an explicit CreateTime. Values come from a pool that repeats every 1024 records, far
outside lz4's 64 KiB window, so memory stays small without making the data compressible.

Raw limits use the same Python client the replicator uses, with its per-record call pattern but
nothing else: consume-only counts messages from ``consume(10000)`` batches; produce-only calls
``produce()`` once per record with key, value, headers, partition and timestamp and flushes. It
sends the records in runs of ``RAW_RUN`` per partition, as a fetcher hands a copier its input
(before 2026-11-25 it sent them round-robin, one partition per record: a lower limit, which a
copier of fetched runs beat at 1 KiB).

Brokers' data goes to ``fast_dir()`` (tmpfs when it has room) and each run's topics are deleted
after it (``file.delete.delay.ms`` 1 s): the figures then measure the clients and brokers, not
the page cache's writeback of the gigabytes earlier runs wrote, which slowed later runs of one
benchmark by up to half on this machine.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.measure import CpuClock, Span, end_offset_total, no_clock
from replicator.config import FlowConfig
from replicator.kafka.settings import consumer_config, producer_config

__all__ = [
    "RecordSpec",
    "RAW_RUN",
    "create_topic",
    "drop_topics",
    "fast_dir",
    "prefill",
    "raw_consume",
    "raw_produce",
    "wait_deleted",
]

_log = logging.getLogger(__name__)

# The replicator's own client settings (replicator.kafka.settings), for an at-least-once flow S->T.
_FLOW = FlowConfig(source="S", target="T")
_PREFILL_PRODUCER: dict[str, str | int | bool] = {
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 1000000,
}
_HEADERS = [("bench", b"replicate_vs_mm2")]
_TOPIC_CONFIG = {"file.delete.delay.ms": "1000"}  # a deleted topic's files go at once (remote topics inherit it)
_FAST_DIR_MIN_FREE = 16 * 2**30
RAW_RUN = 500  # records per partition run of raw produce-only
_POOL = 1024
_KEY_BYTES = 12


@dataclass(frozen=True)
class RecordSpec:
    """``count`` records of ``value_size`` bytes spread over ``partitions`` partitions."""

    count: int
    value_size: int
    partitions: int

    @property
    def record_bytes(self) -> int:
        """Payload bytes of one record (key + value): what MB/s and GB count."""
        return self.value_size + _KEY_BYTES

    @property
    def total_bytes(self) -> int:
        return self.count * self.record_bytes

    @property
    def label(self) -> str:
        return "1 KiB" if self.value_size == 1024 else f"{self.value_size} B"

    def records(self) -> Iterator[tuple[bytes, bytes, int]]:
        """(key, value, timestamp ms) for every record; timestamps start now, 1 ms per 1000 records."""
        pool = [os.urandom(self.value_size) for _ in range(_POOL)]
        base_ms = int(time.time() * 1000)
        for i in range(self.count):
            yield b"k%011d" % i, pool[i % _POOL], base_ms + i // 1000


def fast_dir() -> str | None:
    """``/dev/shm`` when it is a tmpfs with room for the brokers' data, else None (the temp dir)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shutil.disk_usage(shm).free >= _FAST_DIR_MIN_FREE else None


def wait_deleted(data_dirs: list[Path], timeout_s: float = 120.0) -> float:
    """Wait until no broker holds the files of a deleted topic (Kafka renames a deleted partition's
    directory ``<topic>-<p>.<id>-delete`` and removes it later); the seconds waited.

    A run measured while a broker still deletes an earlier run's gigabyte pays for that deletion
    in the broker's CPU (seen here: a produce-only run's broker system time 1.1 s idle against
    4.0 s with the last run's files going at the same time)."""
    started = time.monotonic()
    while any(p.name.endswith("-delete") for d in data_dirs if d.is_dir() for p in d.iterdir()):
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"deleted topics' files still in {data_dirs} after {timeout_s:g} s")
        time.sleep(0.2)
    return time.monotonic() - started


def drop_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete a finished run's topics (their files go after ``file.delete.delay.ms``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            _log.warning("could not delete %s: %s", topic, exc)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=dict(_TOPIC_CONFIG))]
    )
    try:
        futures[topic].result(timeout=30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _produce(producer: Producer, topic: str, **kwargs: object) -> None:
    while True:
        try:
            producer.produce(topic, **kwargs)  # type: ignore[arg-type]
            return
        except BufferError:
            producer.poll(0.05)


def _flush(producer: Producer, what: str) -> None:
    remaining = producer.flush(300)
    if remaining:
        raise RuntimeError(f"{what}: {remaining} records still undelivered after 300 s")


def prefill(bootstrap: str, topic: str, spec: RecordSpec) -> None:
    """Create ``topic`` and write the spec's records, keyed (the default partitioner places them)."""
    create_topic(bootstrap, topic, spec.partitions)
    producer = Producer({"bootstrap.servers": bootstrap, **_PREFILL_PRODUCER})
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    started = time.monotonic()
    for key, value, ts in spec.records():
        _produce(producer, topic, key=key, value=value, headers=_HEADERS, timestamp=ts, on_delivery=delivered)
    _flush(producer, f"prefill {topic}")
    if failures:
        raise RuntimeError(f"prefill {topic}: {len(failures)} records failed, first: {failures[0].str()}")
    _log.info("prefilled %s: %d x %s in %.1f s", topic, spec.count, spec.label, time.monotonic() - started)


def raw_consume(
    bootstrap: str, topic: str, spec: RecordSpec, cpu: CpuClock, foreign: CpuClock, brokers: CpuClock = no_clock
) -> Span:
    """Read ``topic`` from the beginning to ``spec.count`` records with the replicator's consumer settings.

    Partitions are assigned, not subscribed: no group join in the timing.
    """
    conf = consumer_config(_FLOW, {"bootstrap.servers": bootstrap}, "bench-raw-consume")
    consumer = Consumer({**conf, "group.id": f"bench-raw-consume-{topic}", "enable.auto.commit": False})
    try:
        span = Span.begin(cpu, foreign, brokers)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(spec.partitions)])
        seen = 0
        while seen < spec.count:
            batch = consumer.consume(10000, timeout=1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
            seen += len(batch)
            if span.first is None and batch:
                span.mark_first(seen)  # the window starts after the first batch, which it does not count
        span.finish(seen)
        return span
    finally:
        consumer.close()


def raw_produce(
    bootstrap: str,
    topic: str,
    spec: RecordSpec,
    cpu: CpuClock,
    foreign: CpuClock,
    brokers: CpuClock = no_clock,
    *,
    per_record_callback: bool = False,
) -> Span:
    """Produce the spec's records to a new ``topic`` with the replicator's producer settings.

    With ``per_record_callback`` every record gets its own ``on_delivery`` closure, as the
    replicator's copy loop does: the difference between the two runs is that overhead.
    """
    create_topic(bootstrap, topic, spec.partitions)
    producer = Producer(producer_config(_FLOW, {"bootstrap.servers": bootstrap}, "bench-raw-produce", "bench"))
    partitions = spec.partitions
    # generated before the clock starts (values are shared, ~150 MB per 1e6), in runs per partition
    indexed = list(enumerate(spec.records()))
    indexed.sort(key=lambda r: (r[0] // (partitions * RAW_RUN), r[0] % partitions))  # stable: offsets in order
    records = [(i % partitions, key, value, ts) for i, (key, value, ts) in indexed]
    counter = _DeliveryCounter()
    _warm_up(producer, bootstrap, f"{topic}-warmup")
    span = Span.begin(cpu, foreign, brokers)
    span.mark_first()
    for i, (partition, key, value, ts) in enumerate(records):
        if per_record_callback:
            _produce(
                producer,
                topic,
                key=key,
                value=value,
                headers=_HEADERS,
                partition=partition,
                timestamp=ts,
                on_delivery=counter.callback(i),
            )
        else:
            _produce(producer, topic, key=key, value=value, headers=_HEADERS, partition=partition, timestamp=ts)
    _flush(producer, f"raw produce {topic}")
    span.finish(spec.count)
    if counter.failed:
        raise RuntimeError(f"raw produce {topic}: {counter.failed} records failed")
    written = end_offset_total(bootstrap, topic, spec.partitions)
    if written != spec.count:
        raise RuntimeError(f"raw produce {topic}: {written} of {spec.count} records on the broker")
    return span


def _warm_up(producer: Producer, bootstrap: str, topic: str) -> None:
    """Connect and get the idempotent producer id before the clock starts (one record to ``topic``)."""
    create_topic(bootstrap, topic, 1)
    producer.produce(topic, value=b"warm-up")
    _flush(producer, f"warm-up {topic}")


class _DeliveryCounter:
    """Counts deliveries; ``callback`` makes one closure per record, like the replicator's copy loop."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0

    def callback(self, _index: int) -> Callable[[KafkaError | None, object], None]:
        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                self.failed += 1
            else:
                self.delivered += 1

        return delivered
