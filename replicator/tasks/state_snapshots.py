"""Writing the flow's compacted state snapshot, so that no reader has to replay the whole log.

Every ``state_snapshot_interval_seconds`` the leading process writes what changed in its view of
the flow (mapping segments, latest checkpoints and audit windows) and the log position it covers
to ``<state topic>.snapshot`` on the target (``replicator.client.state_snapshot`` has the format
and the contract), then compacts its own mapping index to segment end points, so the process's
memory is bounded by segments, not by syncs read. A missing snapshot topic is created here. A flow
whose tasks never read the log (no group to checkpoint, no audit) writes none: decoding every sync
beside the copy loop only for a snapshot would cost copy rate.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from replicator.client.state_snapshot import SNAPSHOT_CONFIG, FlowSnapshot, snapshot_topic, write_snapshot
from replicator.errors import ReplicationError
from replicator.kafka.admin import admin_client
from replicator.kafka.errors import kafka_error, kafka_error_reason
from replicator.tasks.base import STATE_LANE, TaskContext, task_producer

__all__ = ["StateSnapshotTask"]

_log = logging.getLogger(__name__)


class StateSnapshotTask:
    name = "state_snapshot"
    in_final_round = True
    lane = STATE_LANE

    def __init__(self, ctx: TaskContext, target_conf: dict[str, Any]) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.state_snapshot_interval_seconds
        self._target_conf = target_conf
        self._producer = task_producer(target_conf, f"{ctx.replicator_id}-{ctx.flow.name}-snapshot")
        self._previous: FlowSnapshot | None = None
        self._topic_ready = False

    def run(self) -> None:
        if not self._ctx.view.started:
            return  # no task reads the log (no group to checkpoint, no audit): nothing to spare readers
        self._ensure_topic()
        self._ctx.view.refresh()
        snap = self._ctx.view.snapshot()
        if self._previous is not None and snap == self._previous:
            return
        written = write_snapshot(self._producer, self._ctx.config.state_topic, snap, self._previous)
        self._previous = snap
        self._ctx.view.index.compact()
        _log.info("flow %s: state snapshot written (%d records)", self._ctx.flow.name, written)

    def _ensure_topic(self) -> None:
        if self._topic_ready:
            return
        name = snapshot_topic(self._ctx.config.state_topic)
        admin = admin_client(self._target_conf)
        topic = NewTopic(name, num_partitions=1, replication_factor=-1, config=dict(SNAPSHOT_CONFIG))
        try:
            admin.create_topics([topic], operation_timeout=30)[name].result(timeout=30)
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is None or err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ReplicationError(f"cannot create state snapshot topic {name}: {kafka_error_reason(exc)}") from exc
        self._topic_ready = True

    def close(self) -> None:
        self._producer.flush(30)
