"""One flow ``source->target``: copy records, publish offset syncs, commit what is covered.

Delivery contract (at-least-once): a source position is committed only after
1. the target acknowledged every record before it, and
2. an offset sync covering those records is durable in the state topic,
so after a crash every committed record has an exact entry in the offset mapping, and the
replay starts no later than the first record whose mapping could be missing.

Fidelity: key, value, headers, timestamp and partition number are copied unchanged; the remote
topic has at least the source's partition count. Source partitions are shared among processes of
one flow by the consumer group ``mirrorlake.<source>-><target>`` with cooperative-sticky
assignment; a revoked partition is flushed and committed before it is given up.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.connectivity import wait_for_cluster
from replicator.errors import ReplicationError
from replicator.events import Lifecycle, OffsetSync
from replicator.filters import RegexTopicFilter
from replicator.offset_sync import OffsetSyncTracker, SyncPoint
from replicator.policy import ReplicationPolicy, policy_from_config
from replicator.provenance import Provenance
from replicator.state_log import StateLog, event_key
from replicator.topics import RemoteTopic, TopicManager, TopicSelector
from replicator.topology import provenance_enabled

__all__ = ["FlowRunner", "FlowStats", "consumer_group_id"]

_log = logging.getLogger(__name__)
_RDKAFKA_LOG = logging.getLogger("replicator.librdkafka")  # librdkafka's own lines, not stderr

_CONSUME_BATCH = 5000
_TOPIC_REFRESH_S = 5.0


def consumer_group_id(flow: FlowConfig) -> str:
    return f"mirrorlake.{flow.name}"


@dataclass
class FlowStats:
    records: int = 0
    bytes: int = 0
    syncs: int = 0
    skipped_cycle: int = 0
    started_at: float = field(default_factory=time.monotonic)


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
            state_topic=config.state_topic,
        )
        self._tracker = OffsetSyncTracker(flow.offset_lag_max)
        self._provenance = Provenance(flow.source, flow.target, enabled=provenance_enabled(config, self.policy))
        self._remote: dict[str, RemoteTopic] = {}
        self._covered: dict[tuple[str, int], int] = {}  # (topic, partition) -> last upstream a durable sync covers
        self._copied: dict[tuple[str, int], int] = {}  # (topic, partition) -> last upstream the target acknowledged
        self._pending_syncs: list[SyncPoint] = []
        self._delivery_error: KafkaError | None = None
        self._in_flight = 0

    # -- clients -----------------------------------------------------------------------------
    def _client_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        return (
            self.config.cluster(self.flow.source).client_config(),
            self.config.cluster(self.flow.target).client_config(),
        )

    def _make_clients(self) -> None:
        source_conf, target_conf = self._client_configs()
        self._consumer = Consumer(
            {
                **source_conf,
                "group.id": consumer_group_id(self.flow),
                "enable.auto.commit": True,
                "enable.auto.offset.store": False,  # only what a durable sync covers is committed
                "auto.commit.interval.ms": 1000,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
                "topic.metadata.refresh.interval.ms": 5000,  # see partition increases within seconds
                "fetch.max.bytes": 52428800,
                "queued.max.messages.kbytes": 65536,
                "client.id": f"{self.replicator_id}-{self.flow.name}-consumer",
                "logger": _RDKAFKA_LOG,
            }
        )
        self._producer = Producer(
            {
                **target_conf,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "lz4",
                "linger.ms": 5,
                "batch.num.messages": 10000,
                "queue.buffering.max.messages": 500000,
                "client.id": f"{self.replicator_id}-{self.flow.name}-producer",
                "logger": _RDKAFKA_LOG,
            }
        )
        self._topics = TopicManager(AdminClient(source_conf), AdminClient(target_conf))
        self._state = StateLog(self._producer, self.config.state_topic)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> FlowStats:
        """Replicate until ``stop`` is set; with ``until_caught_up``, also stop once lag is zero."""
        source_conf, target_conf = self._client_configs()
        timeout = self.config.connect_timeout_seconds
        wait_for_cluster(self.flow.source, source_conf, timeout_s=timeout)
        wait_for_cluster(self.flow.target, target_conf, timeout_s=timeout)
        self._make_clients()
        self._topics.ensure_state_topic(self.config.state_topic)
        self._emit_lifecycle("started")
        try:
            self._loop(stop, until_caught_up)
        except BaseException as exc:
            self._emit_lifecycle("error", f"{type(exc).__name__}: {exc}")
            self._producer.flush(10)
            raise
        finally:
            self._consumer.close()
        return self.stats

    def _loop(self, stop: threading.Event, until_caught_up: bool) -> None:
        next_refresh = 0.0
        next_flush = time.monotonic() + self.flow.sync_interval_seconds
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_refresh:
                self._refresh_topics()
                next_refresh = now + _TOPIC_REFRESH_S
            messages = self._consumer.consume(_CONSUME_BATCH, timeout=0.1)
            for msg in messages:
                self._copy(msg)
            self._producer.poll(0)
            self._check_failures()
            if now >= next_flush:
                self._flush_syncs()
                next_flush = now + self.flow.sync_interval_seconds
            self._publish_syncs()
            self._store_offsets()
            if until_caught_up and not messages and self._caught_up():
                break
        self._shutdown()

    def _copy(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.fatal():
                raise ReplicationError(f"flow {self.flow.name}: fatal consumer error: {err.str()}")
            _log.warning("flow %s: consumer error: %s", self.flow.name, err.str())
            return
        topic, partition, upstream = msg.topic(), msg.partition(), msg.offset()
        remote = self._remote.get(topic)
        if remote is None or partition >= remote.partitions:  # newer than our last topic refresh
            self._refresh_topics()
            remote = self._remote[topic]
            self._producer.list_topics(remote.target_topic, timeout=10)  # the producer sees new partitions
        copy, headers = self._provenance.stamp(msg.headers())
        if not copy:
            self.stats.skipped_cycle += 1  # it came from the target: copying it back would loop
            return
        ts_type, ts = msg.timestamp()
        value, key = msg.value(), msg.key()
        self.stats.bytes += (len(value) if value else 0) + (len(key) if key else 0)

        def delivered(err: KafkaError | None, out: Message) -> None:
            self._in_flight -= 1
            if err is not None:
                self._delivery_error = err
                return
            self._copied[(topic, partition)] = upstream
            point = self._tracker.record(topic, partition, upstream, out.offset(), ts)
            if point is not None:
                self._pending_syncs.append(point)

        self._produce(
            remote.target_topic,
            value=value,
            key=key,
            headers=headers,
            partition=partition,
            timestamp=ts if ts_type != 0 else 0,
            on_delivery=delivered,
        )
        self._in_flight += 1
        self.stats.records += 1

    def _produce(self, topic: str, **kwargs: object) -> None:
        refreshed = False
        while True:
            try:
                self._producer.produce(topic, **kwargs)  # type: ignore[arg-type]
                return
            except BufferError:
                self._producer.poll(0.05)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if refreshed or not (isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION):
                    raise ReplicationError(f"flow {self.flow.name}: cannot write to {topic}: {exc}") from exc
                self._producer.list_topics(topic, timeout=10)  # a partition created since our last metadata
                refreshed = True

    # -- offset syncs and commits ------------------------------------------------------------
    def _flush_syncs(self) -> None:
        self._pending_syncs.extend(self._tracker.flush())

    def _publish_syncs(self) -> None:
        pending, self._pending_syncs = self._pending_syncs, []
        for point in pending:
            event = OffsetSync(
                flow=self.flow.name,
                replicator_id=self.replicator_id,
                source_cluster=self.flow.source,
                target_cluster=self.flow.target,
                source_topic=point.topic,
                target_topic=self._remote[point.topic].target_topic,
                partition=point.partition,
                upstream_offset=point.upstream_offset,
                downstream_offset=point.downstream_offset,
                upstream_timestamp_ms=point.upstream_timestamp_ms,
                reason=point.reason,
                previous_upstream_offset=point.previous_upstream_offset,
                previous_downstream_offset=point.previous_downstream_offset,
            )
            self._emit_sync(event, point)

    def _emit_sync(self, event: OffsetSync, point: SyncPoint) -> None:
        tp = (point.topic, point.partition)

        def durable() -> None:
            if point.upstream_offset > self._covered.get(tp, -1):
                self._covered[tp] = point.upstream_offset

        while True:
            try:
                self._state.emit(event, event_key(self.flow.name, *tp), on_durable=durable)
                break
            except BufferError:
                self._producer.poll(0.05)
        self.stats.syncs += 1

    def _store_offsets(self, partitions: list[TopicPartition] | None = None) -> None:
        assigned = {(tp.topic, tp.partition) for tp in (partitions or self._consumer.assignment())}
        offsets = [TopicPartition(t, p, u + 1) for (t, p), u in self._covered.items() if (t, p) in assigned]
        if offsets:
            try:
                self._consumer.store_offsets(offsets=offsets)
            except KafkaException as exc:  # a partition revoked meanwhile: its owner replays it
                _log.debug("flow %s: store_offsets: %s", self.flow.name, exc)

    def _drain(self) -> None:
        """Wait for every record and sync in flight, publishing the syncs they produce."""
        while True:
            self._producer.flush(30)
            self._check_failures()
            self._flush_syncs()
            if not self._pending_syncs and len(self._producer) == 0:
                return
            self._publish_syncs()

    def _check_failures(self) -> None:
        for err in (self._delivery_error, self._state.failed):
            if err is not None:
                raise ReplicationError(f"flow {self.flow.name}: write to {self.flow.target} failed: {err.str()}")

    # -- rebalances and topics ---------------------------------------------------------------
    def _refresh_topics(self) -> None:
        selected = self._selector.select(self._topics.source_partitions())
        wanted = list(selected.values())
        changed = selected.keys() != self._remote.keys() or any(
            self._remote[t].partitions != r.partitions for t, r in selected.items()
        )
        if wanted and changed:
            self._topics.ensure_remote_topics(wanted)
        if selected.keys() != self._remote.keys():
            _log.info("flow %s: replicating %s", self.flow.name, ", ".join(selected) or "no topics")
            if selected:
                self._consumer.subscribe(list(selected), on_revoke=self._on_revoke, on_lost=self._on_lost)
            else:
                self._consumer.unsubscribe()
        self._remote = selected

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drain()
        self._store_offsets(partitions)
        _commit(consumer, self.flow.name)
        self._forget(partitions)

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions)

    def _forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._tracker.forget(tp.topic, tp.partition)
            self._covered.pop((tp.topic, tp.partition), None)
            self._copied.pop((tp.topic, tp.partition), None)

    # -- stopping ----------------------------------------------------------------------------
    def _caught_up(self) -> bool:
        """All assigned partitions read to their end, everything written, all syncs durable."""
        if self._in_flight or self._pending_syncs:
            return False
        assignment = self._consumer.assignment()
        expected = sum(r.partitions for r in self._remote.values())
        if len(assignment) < expected:
            return False
        positions = self._consumer.position(assignment)
        unread = [tp for tp in positions if tp.offset == OFFSET_INVALID]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self._consumer.committed(unread, timeout=10)}
        for tp in positions:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            pos = tp.offset
            if pos == OFFSET_INVALID:  # nothing fetched yet: we resume from the committed offset
                pos = committed.get((tp.topic, tp.partition), OFFSET_INVALID)
                pos = low if pos < 0 else pos
            if pos < high:
                return False
            key = (tp.topic, tp.partition)
            if self._covered.get(key, -1) < self._copied.get(key, -1):
                self._flush_syncs()  # the tail is copied but its sync is not durable yet
                return False
        return True

    def _shutdown(self) -> None:
        self._drain()
        self._store_offsets()
        _commit(self._consumer, self.flow.name)
        self._emit_lifecycle("stopped")
        self._producer.flush(30)

    def _emit_lifecycle(self, state: str, reason: str | None = None) -> None:
        event = Lifecycle(flow=self.flow.name, replicator_id=self.replicator_id, state=state, reason=reason)
        self._state.emit(event, event_key(self.flow.name))


def _commit(consumer: Consumer, flow: str) -> None:
    """Synchronously commit the stored offsets; nothing stored is not an error."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError._NO_OFFSET):
            _log.warning("flow %s: commit failed: %s", flow, exc)
