"""Planning and applying a failover of one flow: ``plan_failover`` and ``apply_failover``.

Both read the target's state topic once per attempt (``replicator.failover.state``) and ask the
target cluster for group activity, positions by time and the records past each partition's last
mapped copy (``replicator.failover.unmapped``: matched by content when the source answers,
presumed otherwise; ``apply`` publishes the matched ones' syncs before it moves a group). The
source is only asked, when it answers, for those matches, whether the flow's consumer group still
has members and, for ``--planned``, the groups' committed offsets.

A replicator of the flow counts as *running* when (a) its latest ``lifecycle`` event on the flow
is ``started`` and it emitted any event of the flow in the last ``stale_after_s`` seconds (a live
flow emits heartbeats and watermarks every few seconds; a killed one falls silent), or (b) the
source answers and the flow's consumer group ``mirrorlake.<flow>`` has members there. ``apply``
refuses while one runs: a replicator coming back would copy records behind the moved groups; with
``stop_replication`` it asks them to stop (``replicator.flow.control.stop_requests``) and waits until none runs.

``apply`` writes offsets on the target only for groups with no members there, through the
replicator's own group-offset rules (``replicator.tasks.group_sync``: never while active, never
rewinding, a ``group_sync`` event per decision), then records a ``failover`` event. Groups named
in an earlier ``failover`` event of the flow are left alone: a rerun is a no-op (nothing written,
no event), and consumers that resumed since are never moved back.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaException

from replicator.client.group_offsets import GroupOffset, committed_offsets
from replicator.client.present_copies import PresentCopies
from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError, MirrorlakeError, TranslationError
from replicator.events import Checkpoint, Failover, FailoverOffset, Lifecycle, OffsetSync
from replicator.failover.plan import FailoverPlan, GroupPlan, build_plan, select_groups
from replicator.failover.release import release_consumers
from replicator.failover.state import FlowState, read_flow_state
from replicator.failover.stored_positions import StoredPosition
from replicator.failover.target import GroupActivity, group_activity, positions_at, read_present
from replicator.failover.unmapped import PartitionRef, account_for_unmapped_copies
from replicator.flow.control.stop_requests import STOP_REQUESTED
from replicator.kafka.admin import admin_client, partition_counts
from replicator.kafka.connectivity import answers_metadata
from replicator.kafka.settings import consumer_group_id
from replicator.kafka.state_log import StateLog
from replicator.metadata.topic_configs import compacted_topics
from replicator.tasks.base import StateView, TaskContext, task_producer
from replicator.tasks.group_sync import Decision, GroupOffsetSync

__all__ = [
    "plan_failover",
    "apply_failover",
    "translate_positions",
    "running_replicators",
    "AppliedGroup",
    "FailoverResult",
    "STORED_POSITIONS",
    "stale_checkpoints",
    "request_stop",
]

_log = logging.getLogger(__name__)
STALE_AFTER_S = 60.0
STORED_POSITIONS = "(stored positions)"  # the group named in the rows of ``translate_positions``


def running_replicators(config: MirrorlakeConfig, state: FlowState, stale_after_s: float = STALE_AFTER_S) -> list[str]:
    """Who still runs the flow, in words (empty: nobody as far as the target and source can tell)."""
    flow = state.flow
    found = [
        f"replicator {rid} (started, last event {(state.read_at_ms - state.last_seen_ms.get(rid, 0)) / 1000:.0f} s ago)"
        for rid, event in sorted(state.lifecycle.items())
        if event.state == "started" and state.read_at_ms - state.last_seen_ms.get(rid, 0) <= stale_after_s * 1000
    ]
    source_conf = config.cluster(flow.source).client_config()
    if answers_metadata(source_conf, timeout_s=3.0):
        group = consumer_group_id(flow)
        try:
            activity = group_activity(admin_client(source_conf), [group])[group]
        except MirrorlakeError as exc:
            _log.warning("cannot tell whether consumer group %s on %s has members: %s", group, flow.source, exc)
            activity = None
        if activity is not None and activity.active:
            found.append(f"{activity.members} member(s) of consumer group {group} on {flow.source}")
    return found


def _unmapped_search(state: FlowState, groups: list[str]) -> list[PartitionRef]:
    """The partitions whose copies past the last mapped one a plan of ``groups`` accounts for: every
    partition of the groups' topics (their figures and the topics' risks depend on them)."""
    flow = state.flow.name
    chosen = set(groups)
    picked = {
        (c.source_topic, c.target_topic, c.partition) for (g, _t, _p), c in state.checkpoints.items() if g in chosen
    }
    topics = {t for t, _tt, _p in picked}
    for _f, topic, partition in state.index.partitions(flow):
        target_topic = state.index.target_topic(flow, topic)
        if topic in topics and target_topic is not None:
            picked.add((topic, target_topic, partition))
    return sorted(picked)


def _plan(
    config: MirrorlakeConfig,
    state: FlowState,
    chosen: list[str],
    at_ms: int | None,
    stale_after_s: float,
    activity: Mapping[str, GroupActivity] | None = None,
) -> tuple[FailoverPlan, list[OffsetSync]]:
    """The plan of the ``chosen`` groups, and the syncs of the unmapped copies it matched by content (for
    ``apply`` to publish). ``activity``: the groups' activity when known already (else asked of the target)."""
    target_conf = config.cluster(state.flow.target).client_config()
    admin = admin_client(target_conf)
    activity = activity if activity is not None else group_activity(admin, chosen)
    unmapped, matched = account_for_unmapped_copies(config, state, _unmapped_search(state, chosen))

    def present_of(ends: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], PresentCopies]:
        compacted = compacted_topics(admin, {t for t, _p in ends})
        return read_present(target_conf, {tp: end for tp, end in ends.items() if tp[0] in compacted})

    plan = build_plan(
        state,
        chosen,
        activity,
        lambda partitions, ts: positions_at(target_conf, partitions, ts),
        at_ms=at_ms,
        running=tuple(running_replicators(config, state, stale_after_s)),
        present_of=present_of,
        target_partitions=partition_counts(admin),
        unmapped=unmapped,
    )
    return plan, matched


def plan_failover(
    config: MirrorlakeConfig,
    flow: str,
    *,
    groups: str | None = None,
    at_ms: int | None = None,
    stale_after_s: float = STALE_AFTER_S,
) -> FailoverPlan:
    """The plan of failing ``flow`` over now (dry run: nothing is written anywhere)."""
    state = read_flow_state(config, flow)
    return _plan(config, state, select_groups(state, groups), at_ms, stale_after_s)[0]


def translate_positions(
    config: MirrorlakeConfig,
    flow: str,
    positions: Sequence[StoredPosition],
    *,
    stale_after_s: float = STALE_AFTER_S,
) -> GroupPlan:
    """Where an application that stored ``positions`` itself (not a consumer group: a Spark
    checkpoint, a database) resumes on the flow's target, one row per position, with what each
    resume costs: the plan's rules for a group's checkpoint (exact translation, copies past the
    last mapped one matched or presumed, copies deleted or compacted on the target), read from the
    target alone, so the source may be down. The rows' group is ``STORED_POSITIONS``.

    Raises ``TranslationError`` for a topic the flow never copied (naming the ones it did)."""
    state = read_flow_state(config, flow)
    name = state.flow.name
    copied = {t for _f, t, _p in state.index.partitions(name)}
    unknown = sorted({p.topic for p in positions} - copied)
    if unknown:
        raise TranslationError(
            f"flow {name} has copied nothing of {', '.join(map(repr, unknown))} "
            f"(topics it copied: {', '.join(sorted(copied)[:20]) or 'none'})"
        )
    state.checkpoints = {
        (STORED_POSITIONS, p.topic, p.partition): Checkpoint(
            flow=name,
            replicator_id="translate",
            source_cluster=state.flow.source,
            target_cluster=state.flow.target,
            group=STORED_POSITIONS,
            source_topic=p.topic,
            target_topic=state.index.target_topic(name, p.topic) or p.topic,
            partition=p.partition,
            upstream_offset=p.offset,
            downstream_offset=-1,
            method="stored",
            emitted_at_ms=state.read_at_ms,
        )  # fmt: skip
        for p in positions
    }
    inactive = {STORED_POSITIONS: GroupActivity(0, "NONE")}  # not a group: nothing to ask the target
    plan, _matched = _plan(config, state, [STORED_POSITIONS], None, stale_after_s, inactive)
    return plan.groups[0]


@dataclass(frozen=True)
class AppliedGroup:
    group: str
    outcome: str  # moved | unchanged | skipped_active_on_target | skipped_already_failed_over | skipped_cost | ...
    decisions: tuple[tuple[str, int, str, int | None, int | None, str | None], ...] = ()  # topic, p, decision, ...
    detail: str | None = None


@dataclass(frozen=True)
class FailoverResult:
    plan: FailoverPlan
    groups: tuple[AppliedGroup, ...]
    event: Failover | None  # None: nothing was moved (a rerun, or every group skipped)


def request_stop(config: MirrorlakeConfig, state: FlowState, by: str = "failover apply --stop-replication") -> None:
    """A ``stop_requested`` lifecycle event of the flow in its state topic: every runner of it stops."""
    conf = config.cluster(state.flow.target).client_config()
    log = StateLog(task_producer(conf, "mirrorlake-failover-stop"), config.state_topic)
    reason = f"{by} by {user_name()}@{socket.gethostname()}"
    log.emit(Lifecycle(flow=state.flow.name, replicator_id=f"failover@{socket.gethostname()}-{os.getpid()}",
                       state=STOP_REQUESTED, reason=reason))  # fmt: skip
    if not log.flushed():
        raise FailoverError(f"could not ask flow {state.flow.name} to stop: {config.state_topic} not written")


def _planned_blockers(config: MirrorlakeConfig, plan: FailoverPlan) -> list[str]:
    """Why a planned failover cannot go now (empty: ready)."""
    why = [f"still running: {r}" for r in plan.running_replicators]
    topics = {p.source_topic for g in plan.groups for p in g.partitions}
    pending = [p for p in plan.partitions if p.source_topic in topics and (not p.exact or p.records != 0)]
    why += [f"{p.source_topic}[{p.partition}] has {p.records} records not replicated" for p in pending[:5]]
    return why + stale_checkpoints(config, plan)


def stale_checkpoints(config: MirrorlakeConfig, plan: FailoverPlan) -> list[str]:
    """The plan's groups whose latest checkpoint is not their committed offset on the source now, in words."""
    why: list[str] = []
    source_conf = config.cluster(plan.source_cluster).client_config()
    for g in plan.groups:
        try:
            now = {(o.topic, o.partition): o.offset for o in committed_offsets(source_conf, g.group)}
        except KafkaException as exc:
            why.append(f"cannot read group {g.group} on {plan.source_cluster}: {exc}")
            continue
        stale = [p for p in g.partitions if now.get((p.source_topic, p.partition)) != p.committed_offset]
        why += [f"group {g.group}: checkpoint of {p.source_topic}[{p.partition}] is not current" for p in stale[:3]]
    return why


def _checkpoints_to_write(plan: FailoverPlan, g: GroupPlan) -> tuple[list[Checkpoint], list[GroupOffset]]:
    mapped = [
        Checkpoint(
            flow=plan.flow,
            replicator_id="failover",
            source_cluster=plan.source_cluster,
            target_cluster=plan.target_cluster,
            group=g.group,
            source_topic=p.source_topic,
            target_topic=p.target_topic,
            partition=p.partition,
            upstream_offset=p.committed_offset,
            downstream_offset=p.target_offset,
            method=p.method,
        )
        for p in g.partitions
        if p.target_offset is not None
    ]
    unmapped = [
        GroupOffset(p.source_topic, p.partition, p.committed_offset) for p in g.partitions if p.target_offset is None
    ]
    return mapped, unmapped


def apply_failover(
    config: MirrorlakeConfig,
    flow: str,
    *,
    groups: str | None = None,
    at_ms: int | None = None,
    planned: bool = False,
    stop_replication: bool = False,
    move_consumers: bool = False,
    timeout_s: float = 300.0,
    stale_after_s: float = STALE_AFTER_S,
) -> FailoverResult:
    """Plan, then move the groups on the target; see the module doc for every rule.

    ``stop_replication``: instead of refusing while replicators of the flow run, ask them to stop
    (``replicator.flow.control.stop_requests``) and wait, up to ``timeout_s``, until none runs.

    ``planned``: poll (one state read per second) until nothing is pending, nobody runs the flow
    and every group's checkpoint equals its committed offset on the source, up to ``timeout_s``;
    then move only the groups whose plan loses 0 and re-reads 0.

    ``move_consumers``: first ask the groups' ``FailoverConsumer``s on the source to commit and leave,
    and wait for them (``replicator.failover.release``), so the move reads their final positions.
    """
    deadline = time.monotonic() + timeout_s
    if move_consumers:
        first = read_flow_state(config, flow)
        chosen = select_groups(first, groups)
        source = first.flow.source
        release_consumers(
            config, first.flow, chosen, cluster=source, reason="failover", user=user_name(), timeout_s=timeout_s
        )
    requested = False
    while True:
        state = read_flow_state(config, flow)
        plan, matched = _plan(config, state, select_groups(state, groups), at_ms, stale_after_s)
        if stop_replication and plan.running_replicators and not requested:
            request_stop(config, state)
            requested = True
        stopping = stop_replication and bool(plan.running_replicators)
        blockers = _planned_blockers(config, plan) if planned else []
        if (not stopping and not blockers) or time.monotonic() >= deadline:
            break
        time.sleep(1.0)  # an operation waiting on the cluster, not a test: the next state read
    if plan.running_replicators:
        hint = (
            f"asked it to stop ({STOP_REQUESTED}), still running after {timeout_s:g} s"
            if requested
            else "stop it (or pass --stop-replication) before failing over"
        )
        raise FailoverError(
            f"flow {flow} still runs ({'; '.join(plan.running_replicators)}): {hint} "
            f"(a replicator silent for {stale_after_s:g} s counts as stopped)"
        )
    if planned and blockers:
        raise FailoverError(f"planned failover of {flow} not ready after {timeout_s:g} s: " + "; ".join(blockers))
    done = {g for f in state.failovers for g in f.groups}
    mode: Literal["planned", "at_time", "unplanned"] = (
        "planned" if planned else "at_time" if at_ms is not None else "unplanned"
    )
    target_conf = config.cluster(plan.target_cluster).client_config()
    replicator_id = f"failover@{socket.gethostname()}-{os.getpid()}"
    producer = task_producer(target_conf, replicator_id)
    ctx = TaskContext(
        config, state.flow, replicator_id, StateLog(producer, config.state_topic), dict, StateView(config, state.flow)
    )
    syncer = GroupOffsetSync(ctx, target_conf)
    if matched and any(g.group not in done for g in plan.groups):
        # the copies matched by content get their syncs before any offset rests on them
        for sync in matched:
            ctx.emit(sync)
        if not ctx.state.flushed():
            raise FailoverError(f"could not write the recovered offset syncs to {config.state_topic}")
    applied: list[AppliedGroup] = []
    written: list[FailoverOffset] = []
    for g in plan.groups:
        if g.group in done:
            applied.append(AppliedGroup(g.group, "skipped_already_failed_over", detail="an earlier failover moved it"))
            continue
        if planned and (g.total("records_lost") or g.total("records_reread")):
            applied.append(AppliedGroup(g.group, "skipped_cost", detail="a planned failover moves only exact groups"))
            continue
        mapped, unmapped = _checkpoints_to_write(plan, g)
        decisions = syncer.sync(g.group, mapped, unmapped)
        outcome = group_outcome(decisions)
        applied.append(
            AppliedGroup(
                g.group,
                outcome,
                tuple((c.target_topic, c.partition, d, before, after, why) for c, d, before, after, why in decisions),
            )
        )
        rows = {(p.target_topic, p.partition): p for p in g.partitions}
        for c, decision, _before, after, _why in decisions:
            if decision in ("synced", "unchanged") and after is not None:
                p = rows[(c.target_topic, c.partition)]
                written.append(
                    FailoverOffset(
                        g.group,
                        p.source_topic,
                        p.target_topic,
                        p.partition,
                        p.committed_offset,
                        after,
                        p.records_lost or 0,
                        p.records_reread or 0,
                        p.records_unreplicated,
                    )
                )
    event = None
    moved = tuple(sorted({o.group for o in written}))
    if moved:
        event = Failover(
            flow=plan.flow,
            replicator_id=replicator_id,
            source_cluster=plan.source_cluster,
            target_cluster=plan.target_cluster,
            mode=mode,
            at_ms=at_ms,
            groups=moved,
            offsets=tuple(written),
            records_lost=sum(o.records_lost for o in written),
            records_reread=sum(o.records_reread for o in written),
            records_unreplicated=plan.records_unreplicated,
            bytes_unreplicated=plan.bytes_unreplicated,
            seconds_unreplicated=plan.seconds_unreplicated,
            consistent_cut_ms=plan.consistent_cut_ms,
            host=socket.gethostname(),
            user=user_name(),
        )
        ctx.emit(event)
    if not ctx.state.flushed():
        raise FailoverError(f"could not write the failover's events to {config.state_topic} on {plan.target_cluster}")
    return FailoverResult(plan, tuple(applied), event)


def group_outcome(decisions: list[Decision]) -> str:
    """One word for a group's partition decisions: moved, partly_moved, the single decision, or skipped."""
    kinds = {d[1] for d in decisions}
    if "synced" in kinds:
        return "moved" if kinds <= {"synced", "unchanged"} else "partly_moved"
    return kinds.pop() if len(kinds) == 1 else "skipped"


def user_name() -> str:
    """The login name of who runs this process ('unknown' when the system cannot tell)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
