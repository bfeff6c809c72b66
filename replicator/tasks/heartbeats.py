"""Heartbeats: MM2's heartbeat records, written every second, observed wherever they arrive.

A flow ``S->T`` writes MM2's ``Heartbeat`` records (key ``sourceClusterAlias, targetClusterAlias``,
value ``timestamp``; ``replicator.mm2.records``) as MM2's heartbeat connectors do: ``(S, T)`` to T's
heartbeats topic (the connector of ``S->T``) and ``(T, S)`` to S's (the one MM2 runs for the
reverse pair even when that flow is disabled; skipped when the config runs ``T->S`` with
heartbeats, which writes it itself). Every flow replicates heartbeats topics whatever its topic
filter says (as MM2 does), so S's heartbeats reach T as ``S.heartbeats``, and MM2's ``MirrorClient``
on T finds hops and upstream clusters in those names. A cluster where MM2 runs too gets the same
records from both.

Each flow also reads the heartbeats that arrived on its target *through it*, and emits a
``Heartbeat`` event to the state topic (the only place mirrorlake's Avro heartbeats live) with the
full hop path (the cluster the record was written on first, the target last) and the time it was
read: latency per path, and by subtraction per hop; ``replication_hops`` and ``upstream_clusters``
come from these events. The hop path comes from the topic name under a policy that tracks sources
(``A.heartbeats`` on B is A->B; ``B.A.heartbeats`` on C is A->B->C) and from the provenance header
under identity.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from replicator.client.policy import ReplicationPolicy
from replicator.client.provenance import Provenance
from replicator.events import Heartbeat
from replicator.events.model import now_ms
from replicator.kafka.admin import admin_client
from replicator.kafka.clients import new_consumer, new_producer
from replicator.kafka.settings import RDKAFKA_LOG, heartbeat_group_prefix
from replicator.mm2.records import Mm2Heartbeat, Mm2RecordError, decode_heartbeat, encode_heartbeat
from replicator.mm2.writer import Mm2TopicWriter
from replicator.tasks.base import HEARTBEATS_LANE, TaskContext

__all__ = ["HeartbeatEmitter", "HeartbeatObserver", "hop_path"]

_log = logging.getLogger(__name__)


def hop_path(
    policy: ReplicationPolicy,
    topic: str,
    headers: list[tuple[str, bytes | None]] | None,
    here: str,
) -> tuple[str, ...] | None:
    """The clusters a heartbeat read from ``topic`` on cluster ``here`` went through, origin first.

    None for a heartbeat written on ``here`` itself (not replicated).
    """
    hops = Provenance.hops(headers) or policy.source_chain(topic)
    return (*hops, here) if hops else None


class HeartbeatEmitter:
    """Writes MM2's heartbeat records each interval: ``(S, T)`` on the target, ``(T, S)`` on the source."""

    name = "heartbeat-emitter"
    in_final_round = False  # a heartbeat after the copy loop stopped would only look like lag
    lane = HEARTBEATS_LANE

    def __init__(self, ctx: TaskContext, source_conf: dict[str, Any], target_conf: dict[str, Any]) -> None:
        self._ctx = ctx
        flow = ctx.flow
        self.interval_s = flow.emit_heartbeats_interval_seconds
        topic = ctx.config.heartbeats_topic
        self._producer = new_producer(
            {**source_conf, "client.id": f"{ctx.replicator_id}-{flow.name}-heartbeats", "logger": RDKAFKA_LOG}
        )
        self._writers = [
            (Mm2TopicWriter(ctx.state.producer, admin_client(target_conf), topic), flow.source, flow.target)
        ]
        reverse = f"{flow.target}->{flow.source}"
        if not any(f.name == reverse and f.emit_heartbeats for f in ctx.config.enabled_flows()):
            self._writers.append(
                (Mm2TopicWriter(self._producer, admin_client(source_conf), topic), flow.target, flow.source)
            )

    def run(self) -> None:
        timestamp = now_ms()
        for writer, source, target in self._writers:
            writer.write(*encode_heartbeat(Mm2Heartbeat(source, target, timestamp)), timestamp_ms=timestamp)
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(10)


class HeartbeatObserver:
    """Reads the heartbeats that reached the target through this flow and emits them with their path."""

    name = "heartbeat-observer"
    in_final_round = False
    lane = HEARTBEATS_LANE  # its read time is the arrival time: a late read would be latency

    def __init__(self, ctx: TaskContext, target_conf: dict[str, Any], policy: ReplicationPolicy) -> None:
        self._ctx = ctx
        self._policy = policy
        self.interval_s = 0.1  # read promptly: the time read is the arrival time of the latency
        self._admin = admin_client(target_conf)
        self._consumer = new_consumer(
            {
                **target_conf,
                "group.id": f"{heartbeat_group_prefix(ctx.flow)}{uuid.uuid4()}",
                "auto.offset.reset": "latest",  # heartbeats from before this process started are history
                "enable.auto.commit": False,
                "client.id": f"{ctx.replicator_id}-{ctx.flow.name}-heartbeat-observer",
                "logger": RDKAFKA_LOG,
            }
        )
        self._topics: set[str] = set()
        self._next_refresh = 0.0

    def _ours(self, topic: str) -> bool:
        """A heartbeats topic on the target that this flow writes to."""
        if not self._policy.is_heartbeats_topic(topic, self._ctx.config.heartbeats_topic):
            return False
        if self._policy.can_track_source():
            return self._policy.topic_source(topic) == self._ctx.flow.source
        return True  # identity: one topic; the provenance header says which flow brought each record

    def _refresh_topics(self) -> None:
        """Follow new heartbeats topics on the flow's topic-refresh interval, not at every read."""
        if time.monotonic() < self._next_refresh:
            return
        self._next_refresh = time.monotonic() + self._ctx.flow.refresh_topics_interval_seconds
        topics = {t for t in self._admin.list_topics(timeout=10).topics if self._ours(t)}
        if topics != self._topics:
            self._topics = topics
            if topics:
                self._consumer.subscribe(sorted(topics))

    def run(self) -> None:
        self._refresh_topics()
        if not self._topics:
            return
        flow = self._ctx.flow
        for msg in self._consumer.consume(1000, timeout=0):  # librdkafka prefetches meanwhile
            if msg.error() is not None:
                continue
            topic: str = msg.topic()  # type: ignore[assignment]
            path = hop_path(self._policy, topic, msg.headers(), flow.target)  # type: ignore[arg-type]
            if path is None or len(path) < 2 or path[-2] != flow.source:
                continue  # written here, or it arrived through another flow
            try:
                beat = decode_heartbeat(msg.key(), msg.value())  # type: ignore[arg-type]
            except Mm2RecordError:
                continue  # an Avro heartbeat of an older mirrorlake, or someone else's record
            self._ctx.emit(
                Heartbeat(
                    flow=flow.name,
                    replicator_id=self._ctx.replicator_id,
                    origin_cluster=path[0],  # where the record was written (MM2's targetClusterAlias)
                    hop_path=path,
                    origin_timestamp_ms=beat.timestamp_ms,
                    received_at_ms=now_ms(),
                    topic=topic,
                ),
            )

    def close(self) -> None:
        self._consumer.close()
