"""The ``Copier`` contract on the compiled produce path: the flow's records leave through a C producer.

``NativeCopier`` is a ``Copier`` as ``PythonCopier`` is (``copy_batch``, ``in_flight``,
``delivery_error``, ``oldest_in_flight``), and it is also the flow's *data producer*: ``poll``,
``flush``, ``len``, ``purge`` and ``list_topics`` behave as confluent's ``Producer`` methods of those
names, for the copies only. Offset syncs, lifecycle events and commits stay on the Python clients.

Every delivery report is served in C (``_copycore``); each ``poll``/``flush`` hands the delivered
segments to ``SyncLedger.delivered_span`` (contiguous runs of one partition, a break always a
segment of its own), so the offset mapping is the one per-record reports would give. Client
errors go to the flow's ``error_cb`` (outages) and log lines to ``replicator.librdkafka``, as the
Python clients' do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from replicator.client.provenance import Provenance
from replicator.errors import ReplicationError
from replicator.flow.copying.copycore import core_settings, load_copycore
from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.kafka.clients import refused_config
from replicator.kafka.settings import RDKAFKA_LOG
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.mm2_metrics import SourcePartitionMetrics
from replicator.metrics.stats import FlowStats

__all__ = ["NativeCopier"]

_log = logging.getLogger(__name__)

# syslog levels of librdkafka's log lines, as confluent-kafka maps them
_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR, 4: logging.WARNING}


class NativeCopier:
    """Copies consumed batches through the compiled producer; see the module's contract.

    ``settings``: the flow's copy-producer settings (``producer_config``); ``on_error``: the flow's
    ``error_cb`` for the target; ``track_every``: longest segment handed to the ledger at once.
    """

    def __init__(
        self,
        flow: str,
        stats: FlowStats,
        provenance: Provenance,
        settings: Mapping[str, Any],
        on_error: Callable[[KafkaError], None],
        track_every: int = 100,
    ) -> None:
        self._flow = flow
        self._stats = stats
        self._provenance = provenance
        self._on_error = on_error
        self._name = str(settings.get("client.id", flow))
        try:
            self._core = load_copycore().CopyCore(core_settings(settings), max(1, track_every))
        except ValueError as exc:  # librdkafka refused a setting (the Python producer made first took them)
            raise refused_config(settings, "compiled copy producer", str(exc)) from None
        self._metrics: dict[tuple[str, int], SourcePartitionMetrics] = {}
        self.delivery_error: KafkaError | None = None
        self.transaction_failed: KafkaError | None = None  # never set: no transactions on this path

    def connect(
        self,
        producer: object,
        ledger: SyncLedger,
        remote_for: Callable[[str, int], RemoteTopic],
        consumer_error: Callable[[KafkaError], None],
        consumed: Callable[[tuple[str, int], int], None] | None = None,
    ) -> None:
        """As ``PythonCopier.connect``; ``producer`` is not used (this copier has its own), and there is no
        exactly-once position hook (exactly-once flows copy on the Python path)."""
        if consumed is not None:
            raise ReplicationError(f"flow {self._flow}: exactly-once copies on the Python path, not the compiled one")
        self._delivered = ledger.delivered_span
        self._remote_for = remote_for
        self._consumer_error = consumer_error

    # -- the copier's contract ---------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return int(self._core.in_flight)

    @property
    def direct_reads(self) -> int:
        """Records whose fields the C side read from confluent's message struct (its layout verified on
        the first record) rather than through eight method calls each."""
        return int(self._core.fast_reads)

    def copy_batch(self, messages: list[Message]) -> None:
        """Produce every record of ``messages`` (skipping those that would close a cycle)."""
        try:
            copied, nbytes, skipped = self._core.copy(
                messages, self._remote_for, self._consumer_error, self._provenance.stamp, self._provenance.enabled
            )
        except OSError as exc:
            raise ReplicationError(f"flow {self._flow}: {exc}") from exc
        for target, partition, records, size, ts in self._core.take_metrics():
            self._partition_metrics(target, partition).copied(records, size, ts)
        stats = self._stats
        stats.records += copied
        stats.bytes += nbytes
        stats.batches += 1
        stats.skipped_cycle += skipped
        ts_type, ts = messages[-1].timestamp()
        if ts_type != 0:
            stats.last_record_age_s = max(0.0, time.time() - ts / 1000)

    def oldest_in_flight(self) -> dict[TP, int]:
        """Per source partition, the upstream offset of its oldest copy not yet acknowledged."""
        return dict(self._core.oldest_in_flight())

    def forget(self, partitions: set[TP]) -> None:
        """Partitions given up: hand over what they delivered, drop the reports of their copies still
        in flight (``PythonCopier.forget`` says why), and start their next copy anew."""
        self._serve()
        for topic, partition in partitions:
            self._core.forget(topic, partition)

    # -- the data producer -------------------------------------------------------------------
    def poll(self, timeout: float = 0) -> int:
        served = int(self._core.poll(timeout))
        self._serve()
        return served

    def flush(self, timeout: float = -1) -> int:
        left = int(self._core.flush(timeout if timeout >= 0 else 3600.0))
        self._serve()
        return left

    def __len__(self) -> int:
        return len(self._core)

    def purge(self) -> None:
        self._core.purge()
        self._serve()

    def list_topics(self, topic: str, timeout: float = 10) -> None:
        """Refresh the producer's metadata of ``topic`` (a partition was added)."""
        code = int(self._core.refresh(topic, timeout))
        if code:
            raise KafkaException(KafkaError(code, f"metadata of {topic}"))

    def close(self) -> None:
        """Drop what is still queued and destroy the producer (the runner drained before, if it could)."""
        self._core.close()

    # -- serving what the C side gathered ----------------------------------------------------
    def _serve(self) -> None:
        core = self._core
        for source_topic, partition, upstream, downstream, stamps, target in core.take():
            if self._delivered(source_topic, partition, upstream, downstream, stamps, target) and stamps[-1] > 0:
                latency_s = max(0.0, time.time() - stamps[-1] / 1000)  # sampled: syncs are rare
                self._stats.latency.observe(latency_s)
                self._partition_metrics(target, partition).replication_latency_ms.add(latency_s * 1000)
        failed = core.take_delivery_error()
        if failed is not None and self.delivery_error is None:
            self.delivery_error = KafkaError(failed[0], failed[1])
        for code, reason, fatal in core.take_errors():
            self._on_error(KafkaError(code, reason, fatal=fatal))
        for level, facility, line in core.take_logs():
            RDKAFKA_LOG.log(_LEVELS.get(level, logging.INFO if level < 7 else logging.DEBUG), "%s [%s] %s",
                            facility, self._name, line)  # fmt: skip

    def _partition_metrics(self, target: str, partition: int) -> SourcePartitionMetrics:
        metrics = self._metrics.get((target, partition))
        if metrics is None:
            metrics = self._metrics[(target, partition)] = self._stats.mm2.partition(target, partition)
        return metrics
