"""What a failover needs from the target's state topic, in one read.

Every figure of a plan comes from here: the flow's offset mapping, each group's latest checkpoint,
each partition's latest watermarks, the replicators' lifecycle and last sign of life, and earlier
failovers and failback steps. Only the *target* cluster is read, so a plan works with the source gone.

``read_flow_state`` is the one place that reads the state log for failover (the same single read
``mirrorlake translate`` does, with more event types decoded); a reader that keeps state
incrementally can replace it without touching the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.events import Checkpoint, Event, Failback, Failover, Lifecycle, OffsetSync, Watermark
from replicator.events.model import now_ms
from replicator.kafka.connectivity import wait_for_cluster

__all__ = ["FlowState", "read_flow_state", "flow_state_from_events", "EVENT_TYPES_READ"]

EVENT_TYPES_READ = ("offset_sync", "checkpoint", "watermark", "lifecycle", "heartbeat", "failover", "failback")

PartitionKey = tuple[str, int]  # (topic, partition)


@dataclass
class FlowState:
    flow: FlowConfig
    read_at_ms: int
    index: MappingIndex = field(default_factory=MappingIndex)
    checkpoints: dict[tuple[str, str, int], Checkpoint] = field(default_factory=dict)  # (group, src topic, p)
    source_marks: dict[PartitionKey, Watermark] = field(default_factory=dict)  # by source topic
    target_marks: dict[PartitionKey, Watermark] = field(default_factory=dict)  # by target topic
    last_copy: dict[PartitionKey, OffsetSync] = field(default_factory=dict)  # largest upstream offset synced
    lifecycle: dict[str, Lifecycle] = field(default_factory=dict)  # replicator id -> its latest
    last_seen_ms: dict[str, int] = field(default_factory=dict)  # replicator id -> its latest event
    failovers: list[Failover] = field(default_factory=list)
    failbacks: list[Failback] = field(default_factory=list)

    def groups(self) -> list[str]:
        return sorted({g for g, _t, _p in self.checkpoints})


def _newer(old: Event | None, new: Event, time_of: str = "emitted_at_ms") -> bool:
    return old is None or getattr(old, time_of) <= getattr(new, time_of)


def flow_state_from_events(flow: FlowConfig, events: list[Event], read_at_ms: int) -> FlowState:
    """Fold the events of ``flow`` (any order) into a ``FlowState``; other flows' events are ignored."""
    state = FlowState(flow, read_at_ms)
    state.index.add(e for e in events if isinstance(e, OffsetSync) and e.flow == flow.name)
    for e in events:
        if e.flow != flow.name:
            continue
        if e.replicator_id:
            state.last_seen_ms[e.replicator_id] = max(state.last_seen_ms.get(e.replicator_id, 0), e.emitted_at_ms)
        if isinstance(e, Checkpoint):
            group_key = (e.group, e.source_topic, e.partition)
            if _newer(state.checkpoints.get(group_key), e):
                state.checkpoints[group_key] = e
        elif isinstance(e, Watermark):
            marks, key = (
                (state.source_marks, (e.source_topic, e.partition))
                if e.side == "source"
                else (state.target_marks, (e.topic, e.partition))
            )
            if _newer(marks.get(key), e, "observed_at_ms"):
                marks[key] = e
        elif isinstance(e, OffsetSync):
            key = (e.source_topic, e.partition)
            last = state.last_copy.get(key)
            if last is None or last.upstream_offset <= e.upstream_offset:
                state.last_copy[key] = e
        elif isinstance(e, Lifecycle):
            if _newer(state.lifecycle.get(e.replicator_id), e):
                state.lifecycle[e.replicator_id] = e
        elif isinstance(e, Failover):
            state.failovers.append(e)
        elif isinstance(e, Failback):
            state.failbacks.append(e)
    state.failovers.sort(key=lambda f: f.emitted_at_ms)
    state.failbacks.sort(key=lambda f: f.emitted_at_ms)
    return state


def read_flow_state(config: MirrorlakeConfig, flow_name: str) -> FlowState:
    """The flow's state as the target's state topic holds it now (one read of that topic).

    Raises ``ConfigError`` for an unknown flow, ``ClusterUnreachableError`` when the target does
    not answer.
    """
    flow = config.flow(flow_name)
    conf = config.cluster(flow.target).client_config()
    wait_for_cluster(flow.target, conf, timeout_s=config.connect_timeout_seconds)
    read = read_state_log(conf, config.state_topic, event_types=EVENT_TYPES_READ)
    return flow_state_from_events(flow, read.events, now_ms())
