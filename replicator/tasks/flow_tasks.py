"""Which state tasks a flow runs, from its config (``replicator.tasks.base`` runs them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replicator.client.policy import ReplicationPolicy
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.kafka.state_log import StateLog
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.mm2_metrics import Mm2Metrics
from replicator.tasks.audit import AuditTask
from replicator.tasks.base import StateTask, StateTasks, StateView, TaskContext, task_producer
from replicator.tasks.checkpoints import CheckpointTask
from replicator.tasks.config_snapshots import ConfigSnapshotTask
from replicator.tasks.heartbeats import HeartbeatEmitter, HeartbeatObserver
from replicator.tasks.mm2_offset_syncs import Mm2OffsetSyncTask
from replicator.tasks.read_positions import PositionSnapshot
from replicator.tasks.state_snapshots import StateSnapshotTask
from replicator.tasks.watermarks import WatermarkTask

__all__ = ["flow_state_tasks"]


def flow_state_tasks(
    config: MirrorlakeConfig,
    flow: FlowConfig,
    *,
    replicator_id: str,
    policy: ReplicationPolicy,
    remote_topics: Callable[[], dict[str, RemoteTopic]],
    assigned: Callable[[], list[tuple[str, int]]],
    continuous: bool,
    read_positions: Callable[[], PositionSnapshot | None] | None = None,
    metrics: Mm2Metrics | None = None,
    extra: Sequence[Callable[[TaskContext], StateTask]] = (),
) -> StateTasks:
    """The flow's tasks; heartbeats only when ``continuous`` (a batch run ends, its heartbeats would not).

    ``read_positions``: the copy loop's replicated positions (none when observing without a loop);
    ``metrics``: where the tasks keep their MM2-named metrics (the flow's ``FlowStats.mm2``);
    ``extra``: tasks of the layers above (the copy loop's recovery of second copies), made from the context.
    """
    source_conf = config.cluster(flow.source).client_config()
    target_conf = config.cluster(flow.target).client_config()
    producer = task_producer(target_conf, f"{replicator_id}-{flow.name}-state")
    view = StateView(config, flow)
    state = StateLog(producer, config.state_topic)
    ctx = TaskContext(config, flow, replicator_id, state, remote_topics, view, metrics or Mm2Metrics())
    tasks: list[StateTask] = []
    if flow.emit_checkpoints or flow.sync_group_offsets:
        tasks.append(CheckpointTask(ctx, source_conf, target_conf, policy))
    if flow.emit_heartbeats and continuous:
        tasks += [HeartbeatEmitter(ctx, source_conf, target_conf), HeartbeatObserver(ctx, target_conf, policy)]
    if flow.emit_mm2_offset_syncs:
        tasks.append(Mm2OffsetSyncTask(ctx, source_conf, policy))
    tasks += [
        WatermarkTask(ctx, source_conf, target_conf, read_positions),
        ConfigSnapshotTask(ctx, source_conf, target_conf),
    ]
    if flow.audit:
        tasks.append(AuditTask(ctx, source_conf, target_conf))
    tasks += [make(ctx) for make in extra]
    tasks.append(StateSnapshotTask(ctx, target_conf))  # last: it covers what the others emitted

    def is_leader() -> bool:
        """The process that owns partition 0 of the first selected topic (alone: always)."""
        selected = remote_topics()
        return not selected or (min(selected), 0) in assigned()

    return StateTasks(ctx, tasks, is_leader)
