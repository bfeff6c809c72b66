"""One flow ``source->target``: copy records, publish offset syncs, keep positions safe.

Fidelity: key, value, headers, timestamp and partition number are copied unchanged (plus the
provenance header where enabled); the remote topic has at least the source's partition count.
Source partitions are shared among the processes of one flow by the consumer group
``mirrorlake.<source>-><target>`` with cooperative-sticky assignment; a revoked partition is
drained and its position committed before it is given up.

Delivery: ``AtLeastOnceCommits`` by default, ``TransactionalCommits`` with ``exactly_once``
(``replicator.flow.commits`` states both contracts).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.client.policy import ReplicationPolicy, policy_from_config
from replicator.client.provenance import Provenance
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.config.topology import provenance_enabled
from replicator.errors import ReplicationError
from replicator.events import Lifecycle
from replicator.flow.commits import AtLeastOnceCommits, Commits, TransactionalCommits
from replicator.flow.observability import LatencyHistogram
from replicator.flow.positions import PositionStore
from replicator.flow.read_positions import ReadPositions
from replicator.flow.sync_ledger import SyncLedger
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import kafka_error
from replicator.kafka.settings import RDKAFKA_LOG, consumer_config, consumer_group_id, producer_config
from replicator.kafka.state_log import StateLog
from replicator.metadata.acls import TopicAclSync
from replicator.metadata.filters import RegexTopicFilter
from replicator.metadata.topic_configs import DefaultConfigPropertyFilter, TopicConfigSync
from replicator.metadata.topics import RemoteTopic, TopicManager, TopicSelector
from replicator.tasks.base import StateTasks
from replicator.tasks.flow_tasks import flow_state_tasks

__all__ = ["FlowRunner", "FlowStats", "consumer_group_id"]

_log = logging.getLogger(__name__)

_CONSUME_BATCH = 5000
_CONSUME_WAIT_S = 0.02  # the longest a record waits for its batch to fill: end-to-end latency


@dataclass
class FlowStats:
    """Plain counters the flow thread updates and the metrics endpoint reads (no hot-path locks)."""

    records: int = 0
    bytes: int = 0
    syncs: int = 0
    skipped_cycle: int = 0
    revoked: int = 0  # partitions given up in rebalances (cooperative: only those that move)
    state: str = "starting"  # starting | running | stopped | failed
    error: str | None = None
    assigned: list[tuple[str, int]] = field(default_factory=list)
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    last_record_age_s: float | None = None
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    task_errors: dict[str, str] = field(default_factory=dict)  # state task -> its last error


class FlowRunner:
    """Runs one flow on the calling thread until ``stop`` is set (or, optionally, caught up)."""

    def __init__(
        self,
        config: MirrorlakeConfig,
        flow: FlowConfig,
        *,
        replicator_id: str,
        policy: ReplicationPolicy | None = None,
    ) -> None:
        self.config = config
        self.flow = flow
        self.replicator_id = replicator_id
        self.policy = policy or policy_from_config(config.replication_policy)
        self.stats = FlowStats()
        self._selector = TopicSelector(
            self.policy,
            RegexTopicFilter.for_flow(flow),
            source=flow.source,
            target=flow.target,
            own_topics=(config.state_topic, config.positions_topic),
            heartbeats_topic=config.heartbeats_topic if flow.emit_heartbeats else None,
        )
        self._provenance = Provenance(flow.source, flow.target, enabled=provenance_enabled(config, self.policy))
        self._remote: dict[str, RemoteTopic] = {}
        self._delivery_error: KafkaError | None = None
        self._in_flight = 0
        self._fifos: dict[tuple[str, int], deque[tuple[str, int, int, int, int]]] = {}
        self._tasks: StateTasks | None = None
        self.read_positions = ReadPositions()  # for the watermark task (exact RPO)

    @property
    def leads_state_tasks(self) -> bool:
        """Whether this process runs the flow's state tasks now (one process per flow does)."""
        return self._tasks is not None and self._tasks.leading

    # -- clients -----------------------------------------------------------------------------
    def _make_clients(self, source_conf: dict[str, Any], target_conf: dict[str, Any]) -> None:
        name = f"{self.replicator_id}-{self.flow.name}"
        instance = self.config.replicator_id or "main"
        self._consumer = Consumer(consumer_config(self.flow, source_conf, f"{name}-consumer"))
        self._producer = Producer(
            {**producer_config(self.flow, target_conf, f"{name}-producer", instance), "on_delivery": self._on_delivery}
        )
        source_admin, target_admin = AdminClient(source_conf), AdminClient(target_conf)
        self._topics = TopicManager(source_admin, target_admin)
        config_filter = DefaultConfigPropertyFilter(self.flow.config_properties_exclude)
        self._config_sync = TopicConfigSync(source_admin, target_admin, config_filter)
        self._acl_sync = TopicAclSync(source_admin, target_admin)
        self._state = StateLog(self._producer, self.config.state_topic)
        self.ledger = SyncLedger(self.flow, self.replicator_id, self._state)
        self.commits: Commits
        if self.flow.exactly_once:
            # lifecycle events must not wait for (or vanish with) a data transaction
            self._lifecycle_producer = Producer(
                {**target_conf, "enable.idempotence": True, "client.id": f"{name}-lifecycle", "logger": RDKAFKA_LOG}
            )
            self._topics.ensure_state_topic(self.config.positions_topic, compacted=True)
            store = PositionStore(self.config.positions_topic, self.flow.name, target_conf)
            self.commits = TransactionalCommits(
                self._consumer,
                self._producer,
                store,
                self.ledger,
                self._drain,
                self.flow.name,
                self.flow.transaction_interval_seconds,
            )
        else:
            self._lifecycle_producer = self._producer
            self.commits = AtLeastOnceCommits(self._consumer, self.ledger, self._drain, self.flow.name)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> FlowStats:
        """Replicate until ``stop`` is set; with ``until_caught_up``, also stop once lag is zero."""
        source_conf = self.config.cluster(self.flow.source).client_config()
        target_conf = self.config.cluster(self.flow.target).client_config()
        timeout = self.config.connect_timeout_seconds
        wait_for_cluster(self.flow.source, source_conf, timeout_s=timeout)
        wait_for_cluster(self.flow.target, target_conf, timeout_s=timeout)
        self._make_clients(source_conf, target_conf)
        self._topics.ensure_state_topic(self.config.state_topic)
        self._emit_lifecycle("started")
        tasks = flow_state_tasks(
            self.config,
            self.flow,
            replicator_id=self.replicator_id,
            policy=self.policy,
            remote_topics=lambda: self._remote,
            assigned=lambda: self.stats.assigned,
            continuous=not until_caught_up,
            read_positions=self.read_positions.request,
        )
        self.stats.task_errors = tasks.errors
        self._tasks = tasks
        try:
            self.commits.start()
            self.stats.state = "running"
            tasks.start()
            self._loop(stop, until_caught_up)
            self.commits.close()
            self.read_positions.publish(self._replicated_positions(), final=True)
            tasks.stop(final_round=True)  # checkpoints and audits of everything copied
            self._emit_lifecycle("stopped")
            self.stats.state = "stopped"
        except BaseException as exc:
            self.stats.state, self.stats.error = "failed", f"{type(exc).__name__}: {exc}"
            tasks.stop()
            self._emit_lifecycle("error", self.stats.error)
            raise
        finally:
            self._consumer.close()
        return self.stats

    def _loop(self, stop: threading.Event, until_caught_up: bool) -> None:
        next_refresh = next_metadata_sync = 0.0
        next_flush = time.monotonic() + self.flow.sync_interval_seconds
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_refresh:
                self._refresh_topics()
                self._measure_lag()
                next_refresh = now + self.flow.refresh_topics_interval_seconds
            if now >= next_metadata_sync:
                self._sync_topic_metadata()
                next_metadata_sync = now + self.flow.sync_topic_configs_interval_seconds
            messages = self._consumer.consume(_CONSUME_BATCH, timeout=_CONSUME_WAIT_S)
            if messages:
                self._copy_batch(messages)
            self._producer.poll(0)
            self._check_failures()
            if now >= next_flush and not self.flow.exactly_once:
                self.ledger.flush()
                next_flush = now + self.flow.sync_interval_seconds
            if not self.flow.exactly_once:
                self._publish_syncs()
            self.commits.after_batch()
            if self.read_positions.wanted:
                self.read_positions.publish(self._replicated_positions())
            if until_caught_up and not messages and self._caught_up():
                break

    def _copy_batch(self, messages: list[Message]) -> None:
        """The hot path: one produce per record, everything else hoisted out of the loop.

        Delivery reports of one target partition arrive in produce order (idempotent producer),
        so each partition's FIFO of (source topic, partition, offset, timestamp) tells the
        delivery callback which source record a report is for, without a closure per record.
        """
        produce = self._producer.produce
        remote_of = self._remote
        stamp = self._provenance.stamp
        stamp_all = self._provenance.enabled
        consumed = self.commits.consumed if self.flow.exactly_once else None
        fifos = self._fifos
        copied = nbytes = skipped = 0
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
            remote = remote_of.get(topic)
            if remote is None or partition >= remote.partitions:  # newer than our last topic refresh
                remote = self._follow_new_partition(topic)
                remote_of = self._remote
            headers = msg.headers()
            if headers is not None or stamp_all:
                copy, headers = stamp(headers)  # type: ignore[arg-type,assignment]
                if not copy:
                    skipped += 1  # it came from the target: copying it back would loop
                    continue
            ts_type, ts = msg.timestamp()
            value, key = msg.value(), msg.key()
            target = remote.target_topic
            try:
                produce(target, value, key, partition, timestamp=ts if ts_type else 0, headers=headers)
            except (BufferError, KafkaException):
                self._produce_slowly(target, value, key, partition, ts if ts_type else 0, headers)  # type: ignore[arg-type]
            fifo = fifos.get((target, partition))
            if fifo is None:
                fifo = fifos[(target, partition)] = deque()
            fifo.append((topic, partition, upstream, ts, ts_type))
            copied += 1
            nbytes += (len(value) if value else 0) + (len(key) if key else 0)
        self._in_flight += copied
        stats = self.stats
        stats.records += copied
        stats.bytes += nbytes
        stats.skipped_cycle += skipped
        ts_type, ts = messages[-1].timestamp()
        if ts_type != 0:
            stats.last_record_age_s = max(0.0, time.time() - ts / 1000)

    def _on_delivery(self, err: KafkaError | None, out: Message) -> None:
        """Delivery report of a copied record (state events have their own callbacks)."""
        fifo = self._fifos[(out.topic(), out.partition())]  # type: ignore[index]
        topic, partition, upstream, ts, ts_type = fifo.popleft()
        self._in_flight -= 1
        if err is not None:
            self._delivery_error = err
        elif self.ledger.delivered(topic, partition, upstream, out.offset(), ts) and ts_type:  # type: ignore[arg-type]
            self.stats.latency.observe(max(0.0, time.time() - ts / 1000))  # sampled: syncs are rare

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal():
            raise ReplicationError(f"flow {self.flow.name}: fatal consumer error: {err.str()}")
        _log.warning("flow %s: consumer error: %s", self.flow.name, err.str())

    def _follow_new_partition(self, topic: str) -> RemoteTopic:
        self._refresh_topics()
        remote = self._remote[topic]
        self._producer.list_topics(remote.target_topic, timeout=10)  # the producer sees new partitions
        return remote

    def _produce_slowly(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        ts: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        """Produce when the fast path could not: a full local queue, or a partition unknown to us yet."""
        refreshed = False
        while True:
            try:
                self._producer.produce(topic, value, key, partition, timestamp=ts, headers=headers)  # type: ignore[arg-type]
                return
            except BufferError:
                self._producer.poll(0.05)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                err = kafka_error(exc)
                if refreshed or not (isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION):
                    raise ReplicationError(f"flow {self.flow.name}: cannot write to {topic}: {exc}") from exc
                self._producer.list_topics(topic, timeout=10)  # a partition created since our last metadata
                refreshed = True

    # -- offset syncs ------------------------------------------------------------------------
    def _publish_syncs(self) -> None:
        if self.ledger.has_pending:
            self.ledger.publish({t: r.target_topic for t, r in self._remote.items()}, self._producer)
            self.stats.syncs = self.ledger.published

    def _drain(self) -> None:
        """Wait for every record and sync in flight, publishing the syncs they produce."""
        while True:
            self._producer.flush(30)
            self._check_failures()
            self.ledger.flush()
            if not self.ledger.has_pending and len(self._producer) == 0:
                return
            self._publish_syncs()

    def _check_failures(self) -> None:
        for err in (self._delivery_error, self._state.failed):
            if err is not None:
                raise ReplicationError(f"flow {self.flow.name}: write to {self.flow.target} failed: {err.str()}")

    # -- rebalances and topics ---------------------------------------------------------------
    def _refresh_topics(self) -> None:
        selected = self._selector.select(self._topics.source_partitions())
        changed = selected.keys() != self._remote.keys() or any(
            self._remote[t].partitions != r.partitions for t, r in selected.items()
        )
        if selected and changed:
            self._topics.ensure_remote_topics(list(selected.values()))
        if selected.keys() != self._remote.keys():
            _log.info("flow %s: replicating %s", self.flow.name, ", ".join(selected) or "no topics")
            if selected:
                self._consumer.subscribe(
                    list(selected), on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
                )
            else:
                self._consumer.unsubscribe()
        self._remote = selected

    def _sync_topic_metadata(self) -> None:
        names = {t: r.target_topic for t, r in self._remote.items()}
        if self.flow.sync_topic_configs:
            self._config_sync.sync(names)
        if self.flow.sync_topic_acls:
            self._acl_sync.sync(names)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: assigned %s", self.flow.name, _names(partitions))
        self.commits.on_assign(consumer, partitions)
        self.stats.assigned = sorted({*self.stats.assigned, *((tp.topic, tp.partition) for tp in partitions)})

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: revoked %s", self.flow.name, _names(partitions))
        self.commits.before_revoke(partitions)
        self._forget(partitions)
        self.stats.revoked += len(partitions)

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.warning("flow %s: lost %s", self.flow.name, _names(partitions))
        self._forget(partitions)

    def _forget(self, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.ledger.forget(gone)
        self.stats.assigned = [tp for tp in self.stats.assigned if tp not in gone]
        for tp in gone:
            self.stats.lag.pop(tp, None)

    def _measure_lag(self) -> None:
        """Per assigned partition: source high watermark minus our position (cached watermarks)."""
        lag = {}
        for tp in self._consumer.position(self._consumer.assignment()):
            if tp.offset >= 0:
                _low, high = self._consumer.get_watermark_offsets(tp, cached=True)
                lag[(tp.topic, tp.partition)] = max(0, high - tp.offset)
        self.stats.lag = lag

    def _replicated_positions(self) -> dict[tuple[str, int], int]:
        """Per assigned source partition with a position, the next offset not known to be on the
        target: the consumer's position (past markers and aborted records), held back to the oldest
        record still in flight and, exactly-once, to the last committed transaction."""
        oldest = {(f[0][0], f[0][1]): f[0][2] for f in self._fifos.values() if f}
        unsettled = self.commits.unsettled()
        out = {}
        for tp in self._consumer.position(self._consumer.assignment()):
            key = (tp.topic, tp.partition)
            held = unsettled.get(key, tp.offset)
            if tp.offset >= 0 and held is not None:
                out[key] = min(tp.offset, oldest.get(key, tp.offset), held)
        return out

    # -- stopping ----------------------------------------------------------------------------
    def _caught_up(self) -> bool:
        """All assigned partitions read to their end, everything written, all syncs durable."""
        if self._in_flight or self.ledger.has_pending:
            return False
        if self.commits.in_transaction:
            self.commits.after_batch(force=True)
            return False
        assignment = self._consumer.assignment()
        if not assignment and self._remote:
            return False  # not assigned yet (with several processes, each judges its own share)
        positions = self._consumer.position(assignment)
        known = self.commits.positions()
        unread = [tp for tp in positions if tp.offset == OFFSET_INVALID and (tp.topic, tp.partition) not in known]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self.commits.committed(unread)}
        ends = self._topics.source_end_offsets([(tp.topic, tp.partition) for tp in positions])
        for tp in positions:
            key = (tp.topic, tp.partition)
            pos = tp.offset if tp.offset != OFFSET_INVALID else known.get(key, committed.get(key, OFFSET_INVALID))
            if pos < ends[key] and not (pos < 0 and ends[key] == 0):
                return False
            if not self.ledger.settled(key):
                self.ledger.flush()  # the tail is copied but its sync is not durable yet
                return False
        return True

    def _emit_lifecycle(self, state: str, reason: str | None = None) -> None:
        if not hasattr(self, "_lifecycle_producer"):
            return  # the clients were never made (the cluster was unreachable)
        event = Lifecycle(flow=self.flow.name, replicator_id=self.replicator_id, state=state, reason=reason)
        StateLog(self._lifecycle_producer, self.config.state_topic).emit(event)
        self._lifecycle_producer.flush(10)


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
