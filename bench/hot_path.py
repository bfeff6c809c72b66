"""Benchmark: CPU microseconds per record of the copy hot path, without brokers.

The flow's ``PythonCopier`` copies batches of real ``confluent_kafka.Message`` objects through a real
``Producer`` (pointed at a closed port: ``produce()`` enqueues in librdkafka, nothing is sent),
then gets the delivery reports librdkafka would give: one per copy that asked for one (run-length
tracking: run starts and ends and every ``offset_lag_max``-th copy), as ``Message`` objects with
downstream offsets, which feed the ``SyncLedger`` and its offset syncs (encoded, not sent). Time
is this thread's CPU time (``time.thread_time``), so a busy machine changes the figures little;
the floor is a bare loop of the same ``produce()`` calls. What it leaves out: ``consume()`` and
librdkafka's own threads (and the C side of a delivery report nobody asked for).

    .venv/bin/python -m bench.hot_path --records 200000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Message, Producer

from replicator.client.provenance import Provenance
from replicator.events import Event, encode
from replicator.flow.copying.copier import PythonCopier
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.stats import FlowStats

_BATCH = 5000


class _EncodeOnly:
    """A state log that encodes each sync (its real cost) and drops it."""

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        encode(event)


def _producer() -> Producer:
    return Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_151,
            "linger.ms": 100_000,  # below message.timeout.ms: nothing leaves before the end
            "log_level": 0,
        }
    )


def _messages(count: int, partitions: int, size: int) -> list[list[Message]]:
    value = b"x" * size
    msgs = [
        Message(
            topic="orders",
            partition=i % partitions,
            offset=i // partitions,
            key=b"k%011d" % i,
            value=value,
            headers=[("bench", b"1")],
            timestamp=(1, 1_700_000_000_000 + i),
        )
        for i in range(count)
    ]
    msgs.sort(key=lambda m: (m.offset() // 500, m.partition(), m.offset()))  # runs per partition, as fetched
    return [msgs[i : i + _BATCH] for i in range(0, count, _BATCH)]


def _reports(copier: PythonCopier) -> list[Message]:
    """The reports librdkafka would give for the copies that asked for one (downstream = upstream here)."""
    return [
        Message(topic=target, partition=partition, offset=u)
        for (target, partition), lane in copier._lanes.items()  # noqa: SLF001 - what is in flight, per lane
        for u in lane.upstream
    ]


def run_once(batches: list[list[Message]], partitions: int) -> tuple[float, float, float]:
    """(copy, deliveries + syncs, bare produce floor) in CPU seconds."""
    remote = {"orders": RemoteTopic("orders", "S.orders", partitions)}
    producer = _producer()
    ledger = SyncLedger(SyncOrigin("S->T", "bench", "S", "T"), 100, _EncodeOnly(), producer.poll)
    copier = PythonCopier("S->T", FlowStats(), Provenance("S", "T", enabled=False))
    copier.connect(producer, ledger, lambda topic, _p: remote[topic], lambda err: None)
    t0 = time.thread_time()
    for batch in batches:
        copier.copy_batch(batch)
    t1 = time.thread_time()
    reports = _reports(copier)  # not timed: building the reports
    t1b = time.thread_time()
    for report in reports:
        copier.on_delivery(None, report)
    ledger.flush()
    ledger.publish()
    t2 = time.thread_time()
    floor = _producer()
    produce = floor.produce
    t3 = time.thread_time()
    for batch in batches:
        for m in batch:
            produce("S.orders", m.value(), m.key(), m.partition(), None, None, m.timestamp()[1], m.headers())
    t4 = time.thread_time()
    return t1 - t0, t2 - t1b, t4 - t3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--size", type=int, default=1024, help="value bytes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    batches = _messages(args.records, args.partitions, args.size)
    runs = [run_once(batches, args.partitions) for _ in range(args.repeat)]
    copy, deliver, floor = (statistics.median(r[i] for r in runs) * 1e6 / args.records for i in range(3))
    print(f"records: {args.records:_} x {args.size} B, {args.partitions} partitions, median of {args.repeat}")
    print(f"copy (produce + bookkeeping): {copy:.2f} us/record")
    print(f"delivery reports + syncs:     {deliver:.2f} us/record")
    print(f"bare produce() floor:         {floor:.2f} us/record")
    print(f"hot_path_us_per_record={copy + deliver:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
