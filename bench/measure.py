"""Clocks and probes shared by the benchmark's runs: CPU clocks, spans, arrival and latency.

Every contender is timed by the same outside observer: ``ArrivalWatcher`` polls the target
topic's end offsets (one ListOffsets request every 50 ms) and marks when the first record landed
and when all of them had. The copy rate is ``records / (all landed - first landed)``: the steady
rate, without process start-up (a JVM and a Connect herder for MM2; group join and topic
creation for both). The wall time from launch is reported beside it.
"""

from __future__ import annotations

import logging
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

__all__ = [
    "ArrivalWatcher",
    "CpuClock",
    "Latency",
    "Span",
    "end_offset_total",
    "measure_latency",
    "process_cpu",
    "self_cpu",
]

_log = logging.getLogger(__name__)

CpuClock = Callable[[], float]
_POLL_S = 0.05
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    """User + system CPU seconds of this process, all threads (librdkafka's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> CpuClock:
    """A clock of another process's user + system CPU seconds (all its threads), from /proc."""

    def read() -> float:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: fields 14, 15

    return read


@dataclass
class Span:
    """Wall and CPU marks of one run: launch, first record landed, all landed, run returned."""

    cpu: CpuClock
    t0: float
    cpu0: float
    t_first: float | None = None
    cpu_first: float | None = None
    t_done: float | None = None
    cpu_done: float | None = None
    t_end: float | None = None
    cpu_end: float | None = None
    records: int = 0

    @classmethod
    def start(cls, cpu: CpuClock) -> Span:
        return cls(cpu, time.monotonic(), cpu())

    def mark_first(self) -> None:
        self.t_first, self.cpu_first = time.monotonic(), self.cpu()

    def finish(self, records: int) -> None:
        """All records landed; also ends the run unless ``end`` comes later."""
        self.t_done, self.cpu_done, self.records = time.monotonic(), self.cpu(), records

    def end(self) -> None:
        """The run returned (e.g. ``run_until_caught_up``: everything committed)."""
        self.t_end, self.cpu_end = time.monotonic(), self.cpu()

    @property
    def copy_seconds(self) -> float:
        assert self.t_first is not None and self.t_done is not None
        return max(self.t_done - self.t_first, 1e-6)

    @property
    def wall_seconds(self) -> float:
        end = self.t_end if self.t_end is not None else self.t_done
        assert end is not None
        return end - self.t0

    @property
    def copy_cpu(self) -> float:
        assert self.cpu_first is not None and self.cpu_done is not None
        return self.cpu_done - self.cpu_first

    @property
    def total_cpu(self) -> float:
        end = self.cpu_end if self.cpu_end is not None else self.cpu_done
        assert end is not None
        return end - self.cpu0


class ArrivalWatcher:
    """A thread marking ``span`` when the first and when ``expected`` records are on ``topic``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, expected: int, span: Span) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._topic = topic
        self._expected = expected
        self._span = span
        self._stop = threading.Event()
        self._done = threading.Event()
        self.landed = 0
        self._thread = threading.Thread(target=self._run, name=f"watch-{topic}", daemon=True)

    def start(self) -> ArrivalWatcher:
        self._thread.start()
        return self

    def wait(self, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> bool:
        """True once all records landed; False on timeout or when ``alive()`` turns False first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._done.wait(0.5):
                return True
            if not alive():
                return self._done.wait(2 * _POLL_S)
        return False

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.landed = _end_offsets(self._admin, self._tps)
            if self.landed and self._span.t_first is None:
                self._span.mark_first()
            if self.landed >= self._expected:
                self._span.finish(self.landed)
                self._done.set()
                return
            time.sleep(_POLL_S)


def _end_offsets(admin: AdminClient, tps: list[TopicPartition]) -> int:
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=5)
    try:
        return sum(f.result().offset for f in futures.values())
    except KafkaException:  # the topic does not exist (yet)
        return 0


def end_offset_total(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the end offsets of ``topic``'s partitions (0 if it does not exist)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return _end_offsets(admin, [TopicPartition(topic, p) for p in range(partitions)])


@dataclass
class Latency:
    """End-to-end latency of ``count`` records: target arrival time minus source CreateTime."""

    samples_ms: list[float] = field(default_factory=list)
    sent: int = 0

    def percentile(self, q: int) -> float | None:
        if len(self.samples_ms) < 2:
            return self.samples_ms[0] if self.samples_ms else None
        return statistics.quantiles(self.samples_ms, n=100, method="inclusive")[q - 1]


def measure_latency(
    source_bootstrap: str,
    target_bootstrap: str,
    source_topic: str,
    target_topic: str,
    *,
    partitions: int,
    value_size: int,
    count: int,
    rate: float,
    timeout_s: float = 120.0,
) -> Latency:
    """Produce ``count`` records at ``rate``/s to ``source_topic``; time their arrival on ``target_topic``.

    The replicator under test must already be running with ``source_topic`` selected. Warm-up
    records are sent (and not counted) until one arrives, so group joins and topic creation are
    out of the numbers. The source producer sends at once (``linger.ms=0``).
    """
    result = Latency()
    arrived_any = threading.Event()
    stop = threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": target_bootstrap,
            "group.id": f"bench-latency-{target_topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )

    def read() -> None:
        while not stop.is_set():
            for msg in consumer.consume(1000, timeout=0.05):
                now_ms = time.time() * 1000
                if msg.error() is not None:
                    _log.debug("latency consumer: %s", msg.error())
                    continue
                arrived_any.set()
                if (msg.key() or b"").startswith(b"m"):
                    result.samples_ms.append(now_ms - msg.timestamp()[1])
            if len(result.samples_ms) >= count:
                return

    _wait_topic(target_bootstrap, target_topic, timeout_s)
    consumer.assign([TopicPartition(target_topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    reader = threading.Thread(target=read, name="latency-reader", daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": source_bootstrap, "acks": "all", "linger.ms": 0})
    value = os.urandom(value_size)
    try:
        deadline = time.monotonic() + timeout_s
        while not arrived_any.wait(0.5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: no warm-up record reached {target_topic} within {timeout_s:g} s")
            producer.produce(source_topic, key=b"warm", value=value, timestamp=int(time.time() * 1000))
            producer.poll(0)
        time.sleep(1.0)  # let warm-up records drain
        started = time.monotonic()
        for i in range(count):
            pause = started + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            producer.produce(
                source_topic, key=b"m%d" % i, value=value, partition=i % partitions, timestamp=int(time.time() * 1000)
            )
            producer.poll(0)
        producer.flush(30)
        result.sent = count
        reader.join(timeout_s)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
    if len(result.samples_ms) < count:
        _log.warning("latency: only %d of %d records arrived on %s", len(result.samples_ms), count, target_topic)
    return result


def _wait_topic(bootstrap: str, topic: str, timeout_s: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        if topic in md.topics and md.topics[topic].error is None:
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} did not appear on {bootstrap} within {timeout_s:g} s")
