"""The hot path of a flow: one produce per consumed record, one cheap step per delivery report.

Delivery reports of one target partition arrive in produce order (idempotent producer), so a
FIFO per target partition (a ``_Lane``) tells the delivery callback which source record a report
is for, without a closure per record. A lane keeps two deques of plain ints (upstream offsets and
timestamps) instead of a tuple per record, and the source topic once: the partition number is the
same on both sides. The copy loop looks a lane (and the remote topic) up only when the partition
changes from one record to the next, which in a consumed batch is rare (records come in runs
per partition).

Per delivery the ``SyncLedger`` is told (upstream, downstream); the tracker's common case
(next offset on both sides) returns at its first test, so only sync points cost more.

MM2's per-partition metrics (``mm2_metrics``) are fed once per run of one partition in a batch
(at the lane switch the loop does anyway) and at sync points, never per record.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from replicator.client.provenance import Provenance
from replicator.errors import ReplicationError
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.kafka.errors import kafka_error
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.mm2_metrics import SourcePartitionMetrics
from replicator.metrics.stats import FlowStats

__all__ = ["PythonCopier"]

_log = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]]

_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


class _Lane:
    """What is in flight to one target partition, oldest first: the timestamp of every copy, and per
    *tracked* copy (the one a delivery report comes back for) its upstream offset and how many copies
    its report acknowledges (``counts``: it and the untracked ones produced since the previous one).
    ``stale``: how many of the oldest tracked copies were produced before the partition was given up
    (``forget``): their reports are dropped."""

    __slots__ = ("source_topic", "upstream", "timestamps", "counts", "metrics", "stale")

    def __init__(self, source_topic: str, metrics: SourcePartitionMetrics) -> None:
        self.source_topic = source_topic
        self.upstream: deque[int] = deque()
        self.timestamps: deque[int] = deque()
        self.counts: deque[int] = deque()
        self.metrics = metrics
        self.stale = 0


class PythonCopier:
    """Copies consumed batches to the target and turns delivery reports into ledger entries.

    Made before the flow's clients, then ``connect``-ed to them. ``remote_for(topic, partition)``
    returns the remote topic of a source topic, refreshing the flow's topic selection when a record
    comes from a topic or partition it does not know yet. ``consumed(tp, next_offset)``:
    exactly-once's position hook (None for at-least-once).

    Run-length delivery tracking: a delivery report costs a Python call, so only some copies ask for
    one: the first and last copy of each run (consecutive source offsets of one partition within a
    batch) and every ``track_every``-th copy inside a run. The idempotent producer acknowledges a
    partition's records in produce order, so a report for a tracked copy acknowledges every copy
    produced to that partition since the previous tracked one; the ledger checks that they landed
    contiguously (``SyncLedger.delivered_span``) and otherwise leaves them out of the mapping.
    """

    def __init__(self, flow: str, stats: FlowStats, provenance: Provenance, track_every: int = 100) -> None:
        self._flow = flow
        self._stats = stats
        self._provenance = provenance
        self._track_every = max(1, track_every)
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self.in_flight = 0
        self.delivery_error: KafkaError | None = None
        # the target's open transaction failed (``produce`` says ``_STATE``): nothing more is produced
        # into it; the flow aborts it and copies again from the committed positions
        self.transaction_failed: KafkaError | None = None

    def connect(
        self,
        producer: Producer,
        ledger: SyncLedger,
        remote_for: Callable[[str, int], RemoteTopic],
        consumer_error: Callable[[KafkaError], None],
        consumed: Callable[[tuple[str, int], int], None] | None = None,
    ) -> None:
        self._producer = producer
        self._ledger = ledger
        self._delivered = ledger.delivered_span
        self._remote_for = remote_for
        self._consumer_error = consumer_error
        self._consumed = consumed

    def copy_batch(self, messages: list[Message]) -> None:
        """Produce every record of ``messages`` (skipping those that would close a cycle).

        Each record is produced when the next copied record is known (or the batch ends), so that
        whether it ends its run (and needs a delivery report) is known when it is produced.
        """
        produce = self._producer.produce
        report = self.on_delivery
        stamp = self._provenance.stamp
        stamp_all = self._provenance.enabled
        consumed = self._consumed
        lanes = self._lanes
        every = self._track_every
        last_topic: str | None = None
        last_partition = -1
        target = ""
        lane_u: deque[int] = deque()
        lane_ts: deque[int] = deque()
        lane_n: deque[int] = deque()
        copied = nbytes = skipped = 0
        run: SourcePartitionMetrics | None = None  # the partition of the current run, its counts so far
        run_copied = run_bytes = 0
        ts = -1
        # the copy held back until the next one is known: its produce arguments, lane and place in its run
        held: tuple | None = None
        held_u = -2
        since = 0  # untracked copies produced to the held copy's lane since its last tracked one
        for msg in messages:
            if (err := msg.error()) is not None:
                self._consumer_error(err)
                continue
            # a message without error always has topic, partition and offset (the stubs say Optional)
            topic: str = msg.topic()  # type: ignore[assignment]
            partition: int = msg.partition()  # type: ignore[assignment]
            upstream: int = msg.offset()  # type: ignore[assignment]
            if consumed is not None:
                consumed((topic, partition), upstream + 1)
            switched = partition != last_partition or topic != last_topic
            if switched:
                if run is not None and copied > run_copied:
                    run.copied(copied - run_copied, nbytes - run_bytes, ts)
                target = self._remote_for(topic, partition).target_topic
                lane = lanes.get((target, partition))
                if lane is None:
                    lane = lanes[(target, partition)] = _Lane(topic, self._stats.mm2.partition(target, partition))
                lane_u, lane_ts, lane_n = lane.upstream, lane.timestamps, lane.counts
                run, run_copied, run_bytes = lane.metrics, copied, nbytes
                last_topic, last_partition = topic, partition
            headers = msg.headers()
            if headers is not None or stamp_all:
                copy, headers = stamp(headers)  # type: ignore[arg-type,assignment]
                if not copy:
                    skipped += 1  # it came from the target: copying it back would loop
                    continue
            ts_type, ts = msg.timestamp()
            if not ts_type:
                ts = -1  # no timestamp: the target stamps its own; the sync says -1
            value = msg.value()
            key = msg.key()
            continues = not switched and upstream == held_u + 1
            if held is not None:  # produce the held copy: tracked unless its run goes on
                since = self._produce(produce, held, report if not continues or since + 1 >= every else None, since)
            held = (target, value, key, partition, ts, headers, upstream, lane_u, lane_ts, lane_n)
            held_u = upstream
            if not continues:
                since = -1  # a run starts: its first copy is tracked (see _produce)
            copied += 1
            nbytes += (len(value) if value else 0) + (len(key) if key else 0)
        if held is not None:
            self._produce(produce, held, report, since)
        if run is not None and copied > run_copied:
            run.copied(copied - run_copied, nbytes - run_bytes, ts)
        self.in_flight += copied
        stats = self._stats
        stats.records += copied
        stats.bytes += nbytes
        stats.batches += 1
        stats.skipped_cycle += skipped
        ts_type, ts = messages[-1].timestamp()
        if ts_type != 0:
            stats.last_record_age_s = max(0.0, time.time() - ts / 1000)

    def _produce(self, produce: Callable[..., None], held: tuple, report: Callable | None, since: int) -> int:
        """Produce a held copy, with a delivery report when ``report`` is given or it starts a run
        (``since`` -1); return the untracked copies since the lane's last tracked one."""
        target, value, key, partition, ts, headers, upstream, lane_u, lane_ts, lane_n = held
        if since < 0:
            report, since = self.on_delivery, 0
        try:  # positional: topic, value, key, partition, callback, on_delivery, timestamp, headers
            produce(target, value, key, partition, report, None, ts if ts > 0 else 0, headers)
        except (BufferError, KafkaException):
            if not self._produce_slowly(target, value, key, partition, ts if ts > 0 else 0, headers, report):
                # never produced, nor are the untracked copies before it acknowledged by a later report
                # (a batch's copies after a failed transaction all fail): out of flight, all of them
                self.in_flight -= since + 1
                return 0
        lane_ts.append(ts)
        if report is None:
            return since + 1
        lane_u.append(upstream)
        lane_n.append(since + 1)
        return 0

    def oldest_in_flight(self) -> dict[tuple[str, int], int]:
        """Per source partition, the upstream offset of its oldest copy not yet acknowledged."""
        return {
            (lane.source_topic, p): lane.upstream[0] - lane.counts[0] + 1
            for (_t, p), lane in self._lanes.items()
            if lane.upstream
        }

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """Partitions given up: the reports of their copies still in flight are of a session that ended
        and are dropped, not handed to the ledger (a partition lost to a session expiry is recovered by
        its next owner; a late report taken as this process's next session made a sync that hid a killed
        peer's copies, and split the mapping: the simulator, seeds 75 and 888). A revoke drains first:
        nothing is in flight then. The partition's next copy starts a run (and is tracked)."""
        for (_target, p), lane in self._lanes.items():
            if (lane.source_topic, p) in partitions:
                lane.stale = len(lane.upstream)

    def close(self) -> None:
        """Nothing to close: the flow's clients own the producer."""

    def on_delivery(self, err: KafkaError | None, out: Message) -> None:
        """Delivery report of a tracked copy: it acknowledges the untracked copies before it too."""
        target: str = out.topic()  # type: ignore[assignment]
        partition: int = out.partition()  # type: ignore[assignment]
        lane = self._lanes[(target, partition)]
        upstream = lane.upstream.popleft()
        n = lane.counts.popleft()
        pop = lane.timestamps.popleft
        stamps = [pop() for _ in range(n)]
        ts = stamps[-1]
        self.in_flight -= n
        stale = lane.stale > 0
        if stale:
            lane.stale -= 1
        if err is not None:
            if err.code() not in _PURGED:  # purged by an aborted transaction: copied again from its position
                self.delivery_error = err
        elif stale:
            return  # of a session that ended (``forget``)
        elif self._delivered(lane.source_topic, partition, upstream, out.offset(), stamps, target) and ts > 0:  # type: ignore[arg-type]  # noqa: E501
            latency_s = max(0.0, time.time() - ts / 1000)  # sampled: syncs are rare
            self._stats.latency.observe(latency_s)
            lane.metrics.replication_latency_ms.add(latency_s * 1000)

    def _produce_slowly(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        ts: int,
        headers: Headers | None,
        report: Callable | None,
    ) -> bool:
        """Produce when the fast path could not: a full local queue, or a partition unknown to us yet.
        False: not produced, the target's transaction has failed (``transaction_failed``)."""
        refreshed = False
        if self.transaction_failed is not None:
            return False  # every later produce says so too
        while True:
            try:
                self._producer.produce(topic, value, key, partition, report, timestamp=ts, headers=headers)  # type: ignore[arg-type]
                return True
            except BufferError:
                self._producer.poll(0.05)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                err = kafka_error(exc)
                if isinstance(err, KafkaError) and err.code() == KafkaError._STATE:
                    self.transaction_failed = err
                    return False
                if refreshed or not (isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION):
                    raise ReplicationError(f"flow {self._flow}: cannot write to {topic}: {exc}") from exc
                self._producer.list_topics(topic, timeout=10)  # a partition created since our last metadata
                refreshed = True
