"""Clocks and probes shared by the benchmark's runs: CPU clocks, spans, arrival and latency.

Every contender is timed by the same outside observer: ``ArrivalWatcher`` polls the target
topic's end offsets (one ListOffsets request every 50 ms) and marks when the first record landed
and when all of them had. The copy rate is ``records / (all landed - first landed)``: the steady
rate, without process start-up (a JVM and a Connect herder for MM2; group join and topic
creation for both). The wall time from launch is reported beside it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

__all__ = [
    "ArrivalWatcher",
    "CpuClock",
    "Latency",
    "Span",
    "end_offset_total",
    "foreign_cpu",
    "measure_latency",
    "no_clock",
    "process_cpu",
    "processes_cpu",
    "self_cpu",
]

_log = logging.getLogger(__name__)

CpuClock = Callable[[], float]
_POLL_S = 0.05
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def load_average(digits: int = 1) -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: read times beside them)."""
    return " ".join(f"{x:.{digits}f}" for x in os.getloadavg())


def interleaved(
    runs: Mapping[str, Callable[[int], None]], reps: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each of ``runs`` ``reps`` times, taking turns (``run(i)`` for i in 0..reps-1), so all meet the
    same machine: (the median of each but its first, cold run; every run's seconds)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(reps):
        for name, run in runs.items():
            began = time.monotonic()
            run(i)
            times[name].append(time.monotonic() - began)
    return {name: statistics.median(t[1:]) for name, t in times.items()}, times


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


def processes_cpu(pids: Callable[[], list[int]]) -> CpuClock:
    """A clock of the CPU seconds of the processes ``pids()`` names (e.g. the brokers), summed."""

    def read() -> float:
        total = 0.0
        for pid in pids():
            with contextlib.suppress(OSError):  # exited meanwhile
                total += process_cpu(pid)()
        return total

    return read


def _machine_busy_cpu() -> float:
    """CPU seconds all cores spent busy since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = handle.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def foreign_cpu(pids: Callable[[], list[int]]) -> CpuClock:
    """CPU seconds used by everything except this process and ``pids()`` (the machine's other load).

    A benchmark on a shared machine is only as good as its quiet: a row with foreign CPU is noisy.
    """

    ours = processes_cpu(pids)  # a process that exited meanwhile counts as foreign from then on

    def read() -> float:
        return _machine_busy_cpu() - self_cpu() - ours()

    return read


def no_clock() -> float:
    """A clock that never moves: for what a run does not measure."""
    return 0.0


@dataclass(frozen=True)
class _Mark:
    t: float
    cpu: float
    count: int
    foreign: float = 0.0
    brokers: float = 0.0


@dataclass
class Span:
    """Wall and CPU marks of one run, each with the records landed by then.

    ``start`` (launch), ``zero`` (the last look that saw nothing landed yet), ``first`` (the first
    look that saw records), ``done`` (all landed), ``end`` (the run returned, e.g.
    ``run_until_caught_up``: everything committed). The copy window is ``first -> done`` counting
    only records landed inside it; if half or more had already landed at ``first`` (tiny runs
    that finish within one look), it is ``zero -> done`` with all records, a lower bound.
    """

    cpu: CpuClock
    start: _Mark
    foreign: CpuClock = no_clock
    brokers: CpuClock = no_clock
    zero: _Mark | None = None
    first: _Mark | None = None
    done: _Mark | None = None
    end: _Mark | None = None

    @classmethod
    def begin(cls, cpu: CpuClock, foreign: CpuClock = no_clock, brokers: CpuClock = no_clock) -> Span:
        """``foreign``: a clock of the CPU used by processes outside the benchmark (``foreign_cpu``);
        ``brokers``: of the brokers' JVMs, the other half of what a copy costs the machine."""
        return cls(cpu, _Mark(time.monotonic(), cpu(), 0, foreign(), brokers()), foreign, brokers)

    def _mark(self, count: int) -> _Mark:
        return _Mark(time.monotonic(), self.cpu(), count, self.foreign(), self.brokers())

    def mark_zero(self) -> None:
        self.zero = self._mark(0)

    def mark_first(self, count: int = 0) -> None:
        self.first = self._mark(count)

    def finish(self, records: int) -> None:
        """All ``records`` landed."""
        self.done = self._mark(records)

    def mark_end(self) -> None:
        """The run returned after everything landed."""
        assert self.done is not None
        self.end = self._mark(self.done.count)

    @property
    def records(self) -> int:
        return self.done.count if self.done else 0

    def _window(self) -> tuple[_Mark, _Mark, int]:
        done = self.done
        assert done is not None, "span not finished"
        first = self.first
        if first is not None and first.count <= done.count // 2 and done.t > first.t:
            return first, done, done.count - first.count
        return self.zero or self.start, done, done.count

    @property
    def copy_records(self) -> int:
        return self._window()[2]

    @property
    def copy_seconds(self) -> float:
        begin, done, _ = self._window()
        return max(done.t - begin.t, 1e-6)

    @property
    def copy_cpu(self) -> float:
        begin, done, _ = self._window()
        return done.cpu - begin.cpu

    @property
    def foreign_cpu(self) -> float:
        """CPU seconds other processes used during the copy window (0 without a foreign clock)."""
        begin, done, _ = self._window()
        return max(0.0, done.foreign - begin.foreign)

    @property
    def broker_cpu(self) -> float:
        """CPU seconds the brokers used during the copy window (0 without a brokers clock)."""
        begin, done, _ = self._window()
        return done.brokers - begin.brokers

    @property
    def wall_seconds(self) -> float:
        last = self.end or self.done
        assert last is not None
        return last.t - self.start.t

    @property
    def total_cpu(self) -> float:
        last = self.end or self.done
        assert last is not None
        return last.cpu - self.start.cpu


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
        del self._admin  # the thread holds this object: without this, the client lives until a gc

    def _run(self) -> None:
        while not self._stop.is_set():
            self.landed = _end_offsets(self._admin, self._tps)
            if not self.landed:
                self._span.mark_zero()
            elif self._span.first is None:
                self._span.mark_first(self.landed)
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

    def summary(self) -> str:
        """Percentiles, and the median of each tenth of the probe in arrival order (drifts show)."""
        if not self.samples_ms:
            return "no samples"
        tenth = max(1, len(self.samples_ms) // 10)
        medians = [statistics.median(self.samples_ms[i : i + tenth]) for i in range(0, len(self.samples_ms), tenth)]
        return (
            f"p50 {self.percentile(50):.1f} ms, p99 {self.percentile(99):.1f} ms, max {max(self.samples_ms):.1f} ms; "
            f"median per tenth: {' '.join(f'{m:.0f}' for m in medians)}"
        )

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
    records are sent (and not counted) to every partition until one of each has arrived, so group
    joins, topic creation and each partition's first copy are out of the numbers (before 2026-11-27,
    until any one arrived, all on the partition their one key hashed to: no difference measured,
    ``bench/results/latency_warm_up-2026-11-27.txt``). The source producer sends at once
    (``linger.ms=0``).
    """
    result = Latency()
    warmed_up = threading.Event()  # the warm-up is over
    warmed: set[int] = set()  # partitions a record arrived on
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
        while not stop.is_set() and len(result.samples_ms) < count:
            msg = consumer.poll(0.05)  # returns as soon as a record is there (consume(n) waits for n)
            now_ms = time.time() * 1000
            if msg is None:
                continue
            if msg.error() is not None:
                _log.debug("latency consumer: %s", msg.error())
                continue
            warmed.add(msg.partition())
            if len(warmed) == partitions:
                warmed_up.set()
            if (msg.key() or b"").startswith(b"m"):
                result.samples_ms.append(now_ms - msg.timestamp()[1])

    _wait_topic(target_bootstrap, target_topic, timeout_s)
    consumer.assign([TopicPartition(target_topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    reader = threading.Thread(target=read, name="latency-reader", daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": source_bootstrap, "acks": "all", "linger.ms": 0})
    value = os.urandom(value_size)
    try:
        deadline = time.monotonic() + timeout_s
        while not warmed_up.wait(0.5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: no warm-up record reached {target_topic} within {timeout_s:g} s")
            for p in range(partitions):
                producer.produce(source_topic, key=b"warm", value=value, partition=p, timestamp=int(time.time() * 1000))
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
    _log.info("latency %s: %s", target_topic, result.summary())
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
