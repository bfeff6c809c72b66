"""What a failover needs from the target's state topic, in one read.

Every figure of a plan comes from here: the flow's offset mapping, each group's latest checkpoint,
each partition's latest watermarks, the replicators' lifecycle and last sign of life, and earlier
failovers and failback steps. Only the *target* cluster is read, so a plan works with the source gone.

``read_flow_state`` is the one place that reads the state log for failover. Like ``mirrorlake
translate`` it starts from the flow's compacted snapshot (``replicator.client.state_snapshot``:
mapping segments, the latest checkpoint, watermark and lifecycle of each identity, every failover
and failback, each replicator's last event time) and replays only the log after the snapshot's
position, so a plan's cost does not grow with the age of the log. Without a (v2) snapshot it
replays the whole log; both give the same ``FlowState`` (tests/test_state_snapshot.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from replicator.client.mapping_index import Life, MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.client.state_snapshot import SEEN_TYPES, FlowSnapshot, latest_key, load_snapshot
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.events import (
    Checkpoint,
    Cutover,
    Event,
    Failback,
    Failover,
    Lifecycle,
    OffsetSync,
    RecordsLostBeforeCopy,
    TopicRecreated,
    Watermark,
)
from replicator.events.model import now_ms
from replicator.kafka.connectivity import wait_for_cluster

__all__ = ["FlowState", "read_flow_state", "flow_state_from_events", "EVENT_TYPES_READ"]

EVENT_TYPES_READ = SEEN_TYPES  # every type a plan reads counts as a replicator's sign of life

PartitionKey = tuple[str, int]  # (topic, partition)
_Op = TypeVar("_Op", Failover, Failback, Cutover)


@dataclass
class FlowState:
    flow: FlowConfig
    read_at_ms: int
    index: MappingIndex = field(default_factory=MappingIndex)
    checkpoints: dict[tuple[str, str, int], Checkpoint] = field(default_factory=dict)  # (group, src topic, p)
    source_marks: dict[PartitionKey, Watermark] = field(default_factory=dict)  # by source topic
    target_marks: dict[PartitionKey, Watermark] = field(default_factory=dict)  # by target topic
    lifecycle: dict[str, Lifecycle] = field(default_factory=dict)  # replicator id -> its latest
    last_seen_ms: dict[str, int] = field(default_factory=dict)  # replicator id -> its latest event
    failovers: list[Failover] = field(default_factory=list)
    failbacks: list[Failback] = field(default_factory=list)
    cutovers: list[Cutover] = field(default_factory=list)  # fenced cutover steps, oldest first
    # (source topic, partition) -> event id -> a loss (each process may say one under the loss's id)
    losses: dict[PartitionKey, dict[str, RecordsLostBeforeCopy]] = field(default_factory=dict)

    def lost_before_copy(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """The source offset ranges ``[from, to)`` said deleted before their copy, in the partition's
        current life (said since it started: an older life's offsets name other records)."""
        started = self.index.life(self.flow.name, topic, partition).started_ms
        return sorted(
            (e.from_offset, e.to_offset)
            for e in self.losses.get((topic, partition), {}).values()
            if started is None or e.emitted_at_ms >= started
        )

    def groups(self) -> list[str]:
        return sorted({g for g, _t, _p in self.checkpoints})

    def last_copy(self) -> dict[PartitionKey, int]:
        """The largest upstream offset copied per source partition, from the mapping's segments."""
        flow = self.flow.name
        out: dict[PartitionKey, int] = {}
        for _f, topic, partition in self.index.partitions(flow):
            segments = self.index.segments(flow, topic, partition)
            if segments:
                out[(topic, partition)] = max(s.upstream_end for s in segments)
        return out


def _newer(old: Event | None, new: Event, time_of: str = "emitted_at_ms") -> bool:
    return old is None or getattr(old, time_of) <= getattr(new, time_of)


def flow_state_from_events(
    flow: FlowConfig, events: list[Event], read_at_ms: int, snapshot: FlowSnapshot | None = None
) -> FlowState:
    """Fold the events of ``flow`` into a ``FlowState``; other flows' events are ignored.

    With ``snapshot``, ``events`` are the log after its position: the snapshot's segments seed the
    mapping and its latest events and last-seen times come first, as if replayed.
    """
    state = FlowState(flow, read_at_ms)
    if snapshot is not None:
        for (topic, partition), (target_topic, segments) in snapshot.segments.items():
            life = snapshot.lives.get((topic, partition), Life(None, None))
            state.index.seed(flow.name, topic, partition, target_topic, segments, *life)
        state.last_seen_ms.update(snapshot.seen)
        events = [*snapshot.latest.values(), *events]
    state.index.add(e for e in events if isinstance(e, OffsetSync | TopicRecreated) and e.flow == flow.name)
    for e in events:
        if e.flow != flow.name:
            continue
        if e.replicator_id and e.event_type in SEEN_TYPES:
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
        elif isinstance(e, Lifecycle):
            if _newer(state.lifecycle.get(e.replicator_id), e):
                state.lifecycle[e.replicator_id] = e
        elif isinstance(e, Failover):
            state.failovers.append(e)
        elif isinstance(e, Failback):
            state.failbacks.append(e)
        elif isinstance(e, Cutover):
            state.cutovers.append(e)
        elif isinstance(e, RecordsLostBeforeCopy):
            state.losses.setdefault((e.source_topic, e.partition), {})[e.event_id or str(e.emitted_at_ms)] = e
    # one each: the state topic is at-least-once, and a snapshot read while its next round is being
    # written holds events the log after its position holds too
    state.failovers = sorted(_distinct(state.failovers), key=lambda f: (f.emitted_at_ms, f.event_id))
    state.failbacks = sorted(_distinct(state.failbacks), key=lambda f: (f.emitted_at_ms, f.event_id))
    state.cutovers = sorted(_distinct(state.cutovers), key=lambda f: (f.emitted_at_ms, f.event_id))
    return state


def _distinct(events: list[_Op]) -> list[_Op]:
    return list({latest_key(e): e for e in events}.values())


def read_flow_state(config: MirrorlakeConfig, flow_name: str, *, use_snapshot: bool = True) -> FlowState:
    """The flow's state as the target's state topic holds it now: its snapshot, then the log after it.

    ``use_snapshot=False`` replays the whole log (what a plan read before snapshots; the bench's
    and tests' reference).

    Raises ``ConfigError`` for an unknown flow, ``ClusterUnreachableError`` when the target does
    not answer.
    """
    flow = config.flow(flow_name)
    conf = config.cluster(flow.target).client_config()
    wait_for_cluster(flow.target, conf, timeout_s=config.connect_timeout_seconds)
    snap = load_snapshot(conf, config.state_topic, flow.name) if use_snapshot else None
    start = snap.positions if snap is not None else None
    read = read_state_log(conf, config.state_topic, event_types=EVENT_TYPES_READ, start_offsets=start)
    return flow_state_from_events(flow, read.events, now_ms(), snap)
