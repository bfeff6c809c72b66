"""MM2's offset syncs, for an operator who may switch a flow back to MirrorMaker 2 (``emit_mm2_offset_syncs``).

MM2's checkpoint connector translates from ``mm2-offset-syncs.<target>.internal`` on the source
(its default ``offset-syncs.topic.location=source``): key ``topic, partition``, value
``upstreamOffset, offset``, a compacted single-partition topic. This task writes every offset sync
of its flow there as it reaches the state topic (a ``delta_change`` sync's previous record first:
both are real copies), so an MM2 started on the same clusters later finds the positions mirrorlake
copied. The backlog a process finds at start is written as compaction would leave it (the latest
sync of each partition), not replayed whole: it comes from the view's mapping, which holds what the
flow's state snapshot summarises as well as the log read after it (the syncs before the snapshot's
position are not in the log the view reads, only in the snapshot's segments).

Off the hot path: the syncs come from the state topic (``StateView``), not from the copy loop.
"""

from __future__ import annotations

from typing import Any

from replicator.client.policy import ReplicationPolicy
from replicator.events import Event, OffsetSync
from replicator.kafka.admin import admin_client
from replicator.kafka.clients import new_producer
from replicator.kafka.settings import RDKAFKA_LOG
from replicator.mm2.records import Mm2OffsetSync, encode_offset_sync
from replicator.mm2.writer import Mm2TopicWriter
from replicator.tasks.base import STATE_LANE, TaskContext

__all__ = ["Mm2OffsetSyncTask"]


class Mm2OffsetSyncTask:
    name = "mm2-offset-syncs"
    in_final_round = True
    lane = STATE_LANE

    def __init__(self, ctx: TaskContext, source_conf: dict[str, Any], policy: ReplicationPolicy) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.sync_interval_seconds
        self._producer = new_producer(
            {
                **source_conf,
                "enable.idempotence": True,
                "client.id": f"{ctx.replicator_id}-{ctx.flow.name}-mm2-offset-syncs",
                "logger": RDKAFKA_LOG,
            }
        )
        topic = policy.offset_syncs_topic(ctx.flow.target)
        self.writer = Mm2TopicWriter(self._producer, admin_client(source_conf), topic)
        self._pending: list[OffsetSync] = []
        self._backlog = True
        ctx.view.subscribe("offset_sync", self._take)

    def _take(self, event: Event) -> None:
        if isinstance(event, OffsetSync) and event.flow == self._ctx.flow.name:
            self._pending.append(event)

    def run(self) -> None:
        if not self.writer.ensure_topic():
            return  # logged; the syncs wait for the next run
        self._ctx.view.refresh()
        syncs, self._pending = self._pending, []
        if self._backlog:  # what compaction would keep of the history: each partition's latest sync
            records = self._latest_mapped()
            self._backlog = False
        else:
            records = [r for s in syncs for r in _records(s)]
        for record in records:
            self.writer.write(*encode_offset_sync(record))  # stamped now, as MM2 does
        self._producer.poll(0)

    def _latest_mapped(self) -> list[Mm2OffsetSync]:
        """Each partition's latest mapped point: the snapshot's segments and the log after them."""
        flow, index = self._ctx.flow.name, self._ctx.view.index
        records = []
        for _flow, topic, partition in index.partitions(flow):
            segments = index.segments(flow, topic, partition)
            if segments:
                last = segments[-1]
                records.append(Mm2OffsetSync(topic, partition, last.upstream_end, last.downstream_end))
        return records

    def close(self) -> None:
        self._producer.flush(30)


def _records(s: OffsetSync) -> list[Mm2OffsetSync]:
    """MM2's records of one sync: a ``delta_change`` sync's previous point first (both are real copies)."""
    points = [(s.upstream_offset, s.downstream_offset)]
    if s.previous_upstream_offset is not None and s.previous_downstream_offset is not None:
        points.insert(0, (s.previous_upstream_offset, s.previous_downstream_offset))
    return [Mm2OffsetSync(s.source_topic, s.partition, u, d) for u, d in points]
