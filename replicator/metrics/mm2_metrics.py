"""MirrorMaker 2's connector metrics, kept per topic-partition so an MM2 Grafana board shows a flow.

MM2 registers ``kafka.connect.mirror:type=MirrorSourceConnector,source=S,target=T,topic=R,partition=P``
(R: the remote topic on T) with ``record-count``, ``record-rate``, ``byte-count``, ``byte-rate``,
``record-age-ms`` (+ ``-min``/``-max``/``-avg``) and ``replication-latency-ms`` (+ the same three),
and ``type=MirrorCheckpointConnector,source,target,group,topic,partition`` with
``checkpoint-latency-ms`` (+ the same three). Strimzi's JMX exporter rules
(``examples/metrics/kafka-mirror-maker-2-metrics.yaml``) turn them into
``kafka_connect_mirror_mirrorsourceconnector_<attribute>`` and
``kafka_connect_mirror_mirrorcheckpointconnector_<attribute>`` gauges with those labels (hyphens
become underscores). ``observability.FlowCollector`` exports what this module keeps under exactly
those names, so the board's queries need no edit. A flow's ``metric_names_formats`` adds (or
chooses instead) Kafka 4.3's layout of the same numbers (KIP-1280: ``kafka_connect_plugins_<attribute>``
with ``connector`` and ``task``; ``observability.mm2_families``).

Where MM2 measures per record, the copy loop measures per *run* of one partition in a consumed
batch (``PythonCopier.copy_batch`` already switches lanes only when the partition changes), so no
per-record work is added:

- ``record_count``/``byte_count``: exact, counted when produced (MM2: when acknowledged); bytes are
  key + value (MM2: value only);
- ``record_age_ms``: sampled once per run: copy time minus the timestamp of the run's newest record;
- ``replication_latency_ms``: sampled at offset syncs (at least every ``offset_lag_max`` records of
  a partition): acknowledgement time minus the record's timestamp;
- ``checkpoint_latency_ms``: from a checkpoint's decision to the state topic's acknowledgement.

The ``-min``/``-max``/``-avg`` values and the rates cover the last 60 s, as Kafka's metrics do
(two samples of 30 s). The flow thread writes, the scraper reads; no locks (a scrape may see a
sample half-added, never a torn number).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["CheckpointKey", "Mm2Metrics", "SourcePartitionMetrics", "WindowedValue"]

SAMPLE_S = 30.0  # Kafka's metrics.sample.window.ms
SAMPLES = 2  # Kafka's metrics.num.samples


class _Sample:
    __slots__ = ("start", "total", "n", "low", "high")

    def __init__(self, start: float) -> None:
        self.start = start
        self.total = 0.0
        self.n = 0
        self.low = float("inf")
        self.high = float("-inf")


class WindowedValue:
    """A value's last sample, and min/max/avg/sum over the last ``SAMPLES`` x ``SAMPLE_S`` seconds."""

    __slots__ = ("last", "_samples")

    def __init__(self) -> None:
        self.last: float | None = None
        self._samples: list[_Sample] = []

    def add(self, value: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        samples = self._samples
        if not samples or now - samples[-1].start >= SAMPLE_S:
            samples.append(_Sample(now))
            if len(samples) > SAMPLES:
                del samples[0]
        current = samples[-1]
        current.total += value
        current.n += 1
        current.low = min(current.low, value)
        current.high = max(current.high, value)
        self.last = value

    def _live(self, now: float) -> list[_Sample]:
        return [s for s in list(self._samples) if now - s.start < SAMPLES * SAMPLE_S]

    def window(self, now: float | None = None) -> tuple[float, float, float] | None:
        """(min, max, avg) over the window; None when it holds no sample."""
        live = self._live(time.monotonic() if now is None else now)
        n = sum(s.n for s in live)
        if not n:
            return None
        return min(s.low for s in live), max(s.high for s in live), sum(s.total for s in live) / n

    def rate(self, now: float | None = None) -> float:
        """Sum of the window's values per second (Kafka's ``Rate``: over the window's elapsed time)."""
        now = time.monotonic() if now is None else now
        live = self._live(now)
        if not live:
            return 0.0
        elapsed = max(now - live[0].start, SAMPLE_S)  # Kafka waits a full sample before dividing by less
        return sum(s.total for s in live) / elapsed


@dataclass
class SourcePartitionMetrics:
    """What MM2's ``MirrorSourceConnector`` keeps for one remote topic-partition."""

    record_count: int = 0
    byte_count: int = 0
    records: WindowedValue = field(default_factory=WindowedValue)  # for record-rate
    bytes: WindowedValue = field(default_factory=WindowedValue)  # for byte-rate
    record_age_ms: WindowedValue = field(default_factory=WindowedValue)
    replication_latency_ms: WindowedValue = field(default_factory=WindowedValue)

    def copied(self, records: int, nbytes: int, newest_ts_ms: int, now: float | None = None) -> None:
        """A run of ``records`` copied records; ``newest_ts_ms`` <= 0 when they have no timestamp."""
        now_mono = time.monotonic() if now is None else now
        self.record_count += records
        self.byte_count += nbytes
        self.records.add(records, now_mono)
        self.bytes.add(nbytes, now_mono)
        if newest_ts_ms > 0:
            self.record_age_ms.add(max(0.0, time.time() * 1000 - newest_ts_ms), now_mono)


CheckpointKey = tuple[str, str, int]  # group, remote topic, partition


@dataclass
class Mm2Metrics:
    """A flow's MM2-named metrics: per remote topic-partition, and per checkpointed group-partition."""

    source: dict[tuple[str, int], SourcePartitionMetrics] = field(default_factory=dict)
    checkpoint_latency_ms: dict[CheckpointKey, WindowedValue] = field(default_factory=dict)

    def partition(self, remote_topic: str, partition: int) -> SourcePartitionMetrics:
        found = self.source.get((remote_topic, partition))
        if found is None:
            found = self.source[(remote_topic, partition)] = SourcePartitionMetrics()
        return found

    def checkpoint_written(self, key: CheckpointKey, latency_ms: float) -> None:
        window = self.checkpoint_latency_ms.get(key)
        if window is None:
            window = self.checkpoint_latency_ms[key] = WindowedValue()
        window.add(latency_ms)
