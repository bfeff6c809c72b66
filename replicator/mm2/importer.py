"""``mirrorlake import-mm2``: MirrorMaker 2's internal topics republished as mirrorlake events.

An MM2 deployment gets the lakehouse without switching replicators: for each flow ``S->T`` the
importer reads MM2's offset syncs (on S, or on T with ``offset-syncs.topic.location=target``; both
are tried), checkpoints and heartbeats (on T), turns each record into an event
(``replicator.mm2.events``) and appends it to the state topic on T.

Contract:

* At least once. Progress is kept in the consumer group ``mirrorlake.import-mm2.<flow>`` on the
  cluster each MM2 topic lives on, and committed only after every event of the batch was
  acknowledged by T (``acks=all``). A crash re-imports the last batch; the events carry the same
  deterministic ids, and the lakehouse deduplicates on them.
* Bad input never stops an import: a record that does not decode is logged with its coordinates,
  counted in ``ImportStats.bad``, and skipped (its offset is committed, it is reported once).
* ``follow=False`` stops once every MM2 topic was read up to the last stable offset it had when
  the run started; ``follow=True`` keeps reading (new topics included) until ``stop`` is set.

Cluster aliases in the configuration must be MM2's aliases: they are part of MM2's topic names.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    IsolationLevel,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from replicator.client.group_offsets import commit_offsets
from replicator.client.policy import policy_from_config
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ConfigError, EventDecodeError, ReplicationError
from replicator.events import Checkpoint, Heartbeat, OffsetSync
from replicator.kafka.admin import admin_client, offsets_of
from replicator.kafka.clients import new_consumer, new_producer
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.settings import RDKAFKA_LOG, idempotent_producer_config, import_group_id
from replicator.kafka.state_log import StateLog
from replicator.metadata.topics import TopicManager
from replicator.mm2.events import REPLICATOR_ID, Mm2EventMapper, Mm2Kind, Mm2Record

__all__ = ["BadRecord", "ImportStats", "Mm2Importer", "import_mm2", "import_group_id"]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 30.0
_BATCH = 5000
_REFRESH_S = 5.0  # follow mode: how often new MM2 topics and partitions are looked for
_KEEP_BAD = 100  # bad records kept in the stats (all are counted and logged)


@dataclass(frozen=True)
class BadRecord:
    """A record of an MM2 topic that does not decode, and why."""

    cluster: str
    topic: str
    partition: int
    offset: int
    reason: str


@dataclass(frozen=True)
class ImportStats:
    """What one run imported for one flow (events appended to the state topic)."""

    flow: str
    offset_syncs: int = 0
    checkpoints: int = 0
    heartbeats: int = 0
    skipped: int = 0  # records of other flows, mirrorlake's own heartbeats
    bad: int = 0
    bad_records: tuple[BadRecord, ...] = ()  # the first few
    topics: tuple[str, ...] = ()  # "<alias>:<topic>" read

    @property
    def events(self) -> int:
        return self.offset_syncs + self.checkpoints + self.heartbeats


@dataclass
class _Counts:
    by_type: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    bad: list[BadRecord] = field(default_factory=list)
    bad_total: int = 0
    topics: set[str] = field(default_factory=set)


class _ClusterFeed:
    """The MM2 topics of one flow on one cluster: one consumer, explicit assignment, own positions."""

    def __init__(self, alias: str, conf: dict[str, Any], mapper: Mm2EventMapper, group: str) -> None:
        self.alias = alias
        self._mapper = mapper
        admin_conf: dict[str, Any] = {**conf, "logger": RDKAFKA_LOG}
        self._admin = admin_client(admin_conf)
        self._consumer = new_consumer(
            {
                **conf,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "client.id": f"{group}-{alias}",
                "logger": RDKAFKA_LOG,
            }
        )
        self.kinds: dict[str, Mm2Kind] = {}
        self.positions: dict[tuple[str, int], int] = {}
        self.ends: dict[tuple[str, int], int] = {}

    def refresh(self) -> None:
        """Assign new partitions of this flow's MM2 topics, each at its committed offset (or the start)."""
        try:
            md = self._admin.list_topics(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise ReplicationError(f"cluster {self.alias}: cannot list topics: {kafka_error_reason(exc)}") from exc
        new: list[TopicPartition] = []
        for topic, meta in md.topics.items():
            kind = self._mapper.kind(self.alias, topic)
            if kind is None or meta.error is not None:
                continue
            self.kinds[topic] = kind
            new += [TopicPartition(topic, p) for p in meta.partitions if (topic, p) not in self.positions]
        if not new:
            return
        committed = self._consumer.committed(new, timeout=_TIMEOUT_S)
        start = []
        for tp in committed:
            if tp.error is not None:
                raise ReplicationError(f"cluster {self.alias}: cannot read committed offset of {tp.topic}: {tp.error}")
            offset = tp.offset if tp.offset >= 0 else self._low(tp.topic, tp.partition)
            self.positions[(tp.topic, tp.partition)] = offset
            start.append(TopicPartition(tp.topic, tp.partition, offset))
        self._consumer.incremental_assign(start)
        _log.info("%s: reading %s on %s", self._mapper.flow, ", ".join(sorted({tp.topic for tp in new})), self.alias)

    def _low(self, topic: str, partition: int) -> int:
        low, _high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=_TIMEOUT_S)
        return max(int(low), 0)

    def mark_ends(self) -> None:
        """Remember each partition's last stable offset: ``caught_up`` compares against these."""
        if not self.positions:
            return
        try:
            self.ends = offsets_of(
                self._admin, self.positions, OffsetSpec.latest(), isolation=IsolationLevel.READ_COMMITTED,
                timeout_s=_TIMEOUT_S,
            )  # fmt: skip
        except KafkaException as exc:
            raise ReplicationError(f"cluster {self.alias}: cannot list end offsets: {kafka_error_reason(exc)}") from exc

    def caught_up(self) -> bool:
        return all(self.positions.get(tp, 0) >= end for tp, end in self.ends.items())

    def poll(self, timeout_s: float) -> list[Message]:
        """The next batch; positions move past transaction markers when nothing else is left."""
        if not self.positions:
            time.sleep(min(timeout_s, 0.2))
            return []
        messages = self._consumer.consume(_BATCH, timeout=timeout_s)
        if not messages:
            for tp in self._consumer.position([TopicPartition(t, p) for t, p in self.positions]):
                if tp.offset >= 0:
                    self.positions[(tp.topic, tp.partition)] = max(self.positions[(tp.topic, tp.partition)], tp.offset)
        return messages

    def commit(self) -> None:
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.positions.items()]
        if not offsets:
            return
        try:
            commit_offsets(self._consumer, offsets, timeout_s=_TIMEOUT_S)
        except KafkaException as exc:
            reason = kafka_error_reason(exc)
            raise ReplicationError(f"cluster {self.alias}: cannot commit import progress: {reason}") from exc

    def close(self) -> None:
        self._consumer.close()


class Mm2Importer:
    """Imports one flow's MM2 internal topics into the state topic on the flow's target (see module doc).

    ``group_id`` overrides ``import_group_id(flow)`` (tests, or a second independent import).
    """

    def __init__(
        self,
        config: MirrorlakeConfig,
        flow: FlowConfig,
        *,
        replicator_id: str = REPLICATOR_ID,
        group_id: str | None = None,
    ) -> None:
        self._config = config
        self._flow = flow
        self._mapper = Mm2EventMapper(
            policy_from_config(config.replication_policy), flow.source, flow.target, replicator_id=replicator_id
        )
        self._group = group_id or import_group_id(flow.name)

    def run(self, *, follow: bool = False, stop: threading.Event | None = None) -> ImportStats:
        """Import until caught up (``follow``: until ``stop`` is set); what this run appended.

        Raises ``ClusterUnreachableError`` when a cluster does not answer within the config's
        ``connect_timeout_seconds``, ``ReplicationError`` when events cannot be written or progress
        cannot be committed (nothing after the last acknowledged batch is marked done).
        """
        stop = stop or threading.Event()
        config, flow = self._config, self._flow
        confs = {alias: config.cluster(alias).client_config() for alias in (flow.source, flow.target)}
        for alias, conf in confs.items():
            wait_for_cluster(alias, conf, timeout_s=config.connect_timeout_seconds)
        admin_conf: dict[str, Any] = {**confs[flow.target], "logger": RDKAFKA_LOG}
        target_admin = admin_client(admin_conf)
        TopicManager(target_admin, target_admin).ensure_state_topic(config.state_topic)
        producer = new_producer(idempotent_producer_config(confs[flow.target], f"{self._group}-state"))
        state = StateLog(producer, config.state_topic)
        feeds = [_ClusterFeed(alias, conf, self._mapper, self._group) for alias, conf in confs.items()]
        counts = _Counts()
        try:
            for feed in feeds:
                feed.refresh()
                feed.mark_ends()
            if not any(feed.kinds for feed in feeds):
                _log.warning(
                    "%s: no MM2 topic of this flow exists yet (%s); are the cluster aliases MM2's?",
                    flow.name,
                    self._mapper.describe_topics(),
                )
            refreshed = time.monotonic()
            while not stop.is_set():
                for feed in feeds:
                    self._import_batch(feed, feed.poll(0.5), state, counts)
                if not follow and all(feed.caught_up() for feed in feeds):
                    break
                if follow and time.monotonic() - refreshed > _REFRESH_S:
                    for feed in feeds:
                        feed.refresh()
                    refreshed = time.monotonic()
        finally:
            for feed in feeds:
                feed.close()
            producer.flush(_TIMEOUT_S)
        for feed in feeds:
            counts.topics.update(f"{feed.alias}:{topic}" for topic in feed.kinds)
        return ImportStats(
            flow=flow.name,
            offset_syncs=counts.by_type.get(OffsetSync.event_type, 0),
            checkpoints=counts.by_type.get(Checkpoint.event_type, 0),
            heartbeats=counts.by_type.get(Heartbeat.event_type, 0),
            skipped=counts.skipped,
            bad=counts.bad_total,
            bad_records=tuple(counts.bad),
            topics=tuple(sorted(counts.topics)),
        )

    def _import_batch(self, feed: _ClusterFeed, messages: list[Message], state: StateLog, counts: _Counts) -> None:
        """Events of ``messages`` to the state topic; the feed's positions are committed once all are acked."""
        if not messages:
            return
        produced: dict[str, int] = {}
        for msg in messages:
            if msg.error() is not None:
                _log.warning("%s: reading %s: %s", self._mapper.flow, feed.alias, msg.error())
                continue
            topic: str = msg.topic()  # type: ignore[assignment]
            partition: int = msg.partition()  # type: ignore[assignment]
            offset: int = msg.offset()  # type: ignore[assignment]
            feed.positions[(topic, partition)] = offset + 1
            ts_type, ts = msg.timestamp()
            record = Mm2Record(
                feed.alias, topic, partition, offset, msg.key(), msg.value(), ts, ts_type == TIMESTAMP_LOG_APPEND_TIME
            )
            try:
                event = self._mapper.to_event(feed.kinds[topic], record)
            except EventDecodeError as exc:
                self._bad(BadRecord(feed.alias, topic, partition, offset, str(exc)), counts)
                continue
            if event is None:
                counts.skipped += 1
                continue
            while True:
                try:
                    state.emit(event)
                    break
                except BufferError:  # the producer's queue is full: let deliveries drain it
                    state.producer.poll(0.05)
            produced[event.event_type] = produced.get(event.event_type, 0) + 1
        remaining = state.producer.flush(_TIMEOUT_S)
        if remaining or state.failed is not None:
            reason = state.failed.str() if state.failed is not None else f"{remaining} not acknowledged"
            raise ReplicationError(
                f"{self._mapper.flow}: events not written to {self._config.state_topic} on {self._flow.target} "
                f"(import progress not committed): {reason}"
            )
        feed.commit()
        for event_type, n in produced.items():
            counts.by_type[event_type] = counts.by_type.get(event_type, 0) + n

    @staticmethod
    def _bad(bad: BadRecord, counts: _Counts) -> None:
        _log.warning(
            "skipping undecodable MM2 record %s:%s[%d]@%d: %s",
            bad.cluster,
            bad.topic,
            bad.partition,
            bad.offset,
            bad.reason,
        )
        counts.bad_total += 1
        if len(counts.bad) < _KEEP_BAD:
            counts.bad.append(bad)


def import_mm2(
    config: MirrorlakeConfig,
    *,
    flows: Sequence[str] | None = None,
    follow: bool = False,
    stop: threading.Event | None = None,
) -> list[ImportStats]:
    """Import the named flows (default: every enabled flow), one thread each; stats in flow order.

    Raises ``ConfigError`` for an unknown flow or when there is nothing to import, and the first
    error any flow raised (the others are stopped first).
    """
    selected = config.selected_flows(flows)
    if not selected:
        raise ConfigError("import-mm2: the configuration has no enabled flows (name one with --flow A->B)")
    stop = stop or threading.Event()
    results: dict[str, ImportStats] = {}
    errors: list[BaseException] = []

    def run(flow: FlowConfig) -> None:
        try:
            results[flow.name] = Mm2Importer(config, flow).run(follow=follow, stop=stop)
        except BaseException as exc:  # handed to the caller's thread, which re-raises it
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(f,), name=f"import-mm2-{f.name}", daemon=True) for f in selected]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if errors:
        raise errors[0]
    return [results[f.name] for f in selected]
