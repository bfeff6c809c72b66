"""A fenced planned cutover of one flow (``failover apply --planned --fence``), and lifting its fence.

A planned failover without a fence races the producers: a record written to the source after the
last check is on the source only. The cutover closes that window, step by step, each step recorded
as a ``cutover`` event on the target's state topic once it is done, so a rerun goes on after the
last step recorded (a run that fails leaves the steps it finished, and the fence, in place):

1. ``fenced``: DENY Write ACLs on the flow's source topics (``replicator.failover.fence``);
2. ``settled``: no record arrives on them for ``settle_s`` and no transaction stays open (waited
   for up to the timeout; writes that go on are an error naming the partitions: a super user);
3. ``caught_up``: with the replicator still running, every fenced partition has 0 records not
   replicated at a watermark observed after the settle, and every group's checkpoint is its
   committed offset on the source (its consumers read to the end and committed);
4. ``replication_stopped``: the flow's replicators are asked to stop, and none runs;
5. ``moved``: ``apply_failover(planned=True)`` moves the exact groups (its own rules: inactive on
   the target, 0 lost and 0 re-read, a ``failover`` event).

The fence stays after the cutover: a producer still pointed at the source fails instead of writing
records nobody replicates. ``lift_cutover_fence`` (``failback apply --unfence``) deletes the fence's
bindings and records ``unfenced``: when the applications come back, or to abandon a cutover.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from replicator.client.policy import policy_from_config
from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.events import Cutover
from replicator.failover.api import (
    STALE_AFTER_S,
    FailoverResult,
    apply_failover,
    plan_failover,
    request_stop,
    running_replicators,
    stale_checkpoints,
    user_name,
)
from replicator.failover.fence import Settle, lift_fence, raise_fence, settled
from replicator.failover.plan import select_groups
from replicator.failover.release import release_consumers
from replicator.failover.state import FlowState, read_flow_state
from replicator.kafka.admin import admin_client, partition_counts
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.state_log import StateLog
from replicator.metadata.topics import flow_topic_selector
from replicator.tasks.base import task_producer

__all__ = ["STEPS", "CutoverResult", "fenced_cutover", "lift_cutover_fence", "current_run"]

_log = logging.getLogger(__name__)
STEPS = ("fenced", "settled", "caught_up", "replication_stopped", "moved")
UNFENCED = "unfenced"
_POLL_S = 1.0  # between two reads of the flow's state while waiting for a step


@dataclass(frozen=True)
class CutoverResult:
    flow: str
    resumed_after: str | None  # the last step an earlier run had recorded (None: a new cutover)
    steps: tuple[Cutover, ...]  # the steps this run recorded, in order
    failover: FailoverResult | None  # the move (None: it was done by an earlier run)


def current_run(state: FlowState) -> list[Cutover]:
    """The steps of the flow's cutover in progress or last finished: those after its last ``unfenced``."""
    run: list[Cutover] = []
    for event in state.cutovers:
        run = [] if event.step == UNFENCED else [*run, event]
    return run


class _Recorder:
    """Writes a run's ``cutover`` events to the target's state topic, each flushed before the next step."""

    def __init__(self, config: MirrorlakeConfig, state: FlowState) -> None:
        self._config = config
        self._state = state
        self._id = f"cutover@{socket.gethostname()}-{os.getpid()}"
        conf = config.cluster(state.flow.target).client_config()
        self._log = StateLog(task_producer(conf, self._id), config.state_topic)
        self.written: list[Cutover] = []

    def record(self, step: str, topics: tuple[str, ...], acls: tuple[str, ...], detail: str | None) -> Cutover:
        flow = self._state.flow
        event = Cutover(
            flow=flow.name,
            replicator_id=self._id,
            source_cluster=flow.source,
            target_cluster=flow.target,
            step=step,
            topics=topics,
            acls=acls,
            detail=detail,
            host=socket.gethostname(),
            user=user_name(),
        )
        self._log.emit(event)
        if not self._log.flushed():
            where = f"{self._config.state_topic} on {flow.target}"
            raise FailoverError(f"could not record the cutover step {step} in {where}")
        _log.info("cutover of %s: %s (%s)", flow.name, step, detail or "")
        self.written.append(event)
        return event


def _source_topics(config: MirrorlakeConfig, state: FlowState, counts: dict[str, int]) -> tuple[str, ...]:
    """The source topics the flow copies now, its heartbeats left out (written by replicators, not apps)."""
    policy = policy_from_config(config.replication_policy)
    selected = flow_topic_selector(config, state.flow, policy).select(counts)
    return tuple(t for t in selected if not policy.is_heartbeats_topic(t, config.heartbeats_topic))


def _settle(
    admin: AdminClient, source: str, partitions: list[tuple[str, int]], settle_s: float, deadline: float
) -> Settle:
    while True:
        seen = settled(admin, source, partitions, settle_s)
        if seen.held():
            return seen
        if time.monotonic() + settle_s > deadline:
            hint = (
                "a writer the ACLs do not reach (a super user, or a listener whose principal is one) still "
                "writes: stop it, then rerun"
                if seen.grew
                else "wait until its producer's transaction ends (transaction.timeout.ms), then rerun"
            )
            raise FailoverError(f"the fence on {source} does not hold: {seen.reason()}; {hint}")
        _log.info("cutover: not settled on %s yet: %s", source, seen.reason())


def _caught_up(
    config: MirrorlakeConfig, flow: str, groups: str | None, topics: tuple[str, ...], since_ms: int, deadline: float
) -> str:
    """Wait until the replicator copied everything of ``topics`` (seen after ``since_ms``) and the
    groups' checkpoints are current; the figures in words. Raises when the deadline passes first."""
    while True:
        plan = plan_failover(config, flow, groups=groups)
        fenced = [p for p in plan.partitions if p.source_topic in topics]
        pending = [
            f"{p.source_topic}[{p.partition}] " + (
                f"{p.records} records not replicated" if p.records else "not observed since the fence settled"
            )
            for p in fenced
            if not p.exact or p.records != 0 or (p.observed_at_ms or 0) < since_ms
        ]  # fmt: skip
        why = pending[:5] + stale_checkpoints(config, plan)
        if not why:
            return f"{len(fenced)} partitions, 0 records not replicated; {len(plan.groups)} groups' checkpoints current"
        if time.monotonic() >= deadline:
            running = "" if plan.running_replicators else " (no replicator of the flow runs: start it)"
            raise FailoverError(f"cutover of {flow}: not caught up{running}: " + "; ".join(why))
        time.sleep(_POLL_S)  # the next observation of the running replicator


def _stop_replication(config: MirrorlakeConfig, flow: str, stale_after_s: float, deadline: float) -> str:
    state = read_flow_state(config, flow)
    if running_replicators(config, state, stale_after_s):
        request_stop(config, state, by="failover apply --planned --fence")
    while running := running_replicators(config, state, stale_after_s):
        if time.monotonic() >= deadline:
            raise FailoverError(f"cutover of {flow}: asked the flow to stop, still running: " + "; ".join(running))
        time.sleep(_POLL_S)
        state = read_flow_state(config, flow)
    return "no replicator of the flow runs"


def fenced_cutover(
    config: MirrorlakeConfig,
    flow: str,
    *,
    groups: str | None = None,
    settle_s: float = 10.0,
    timeout_s: float = 300.0,
    stale_after_s: float = STALE_AFTER_S,
    move_consumers: bool = False,
) -> CutoverResult:
    """Run (or continue) the flow's fenced cutover; see the module doc for the steps.

    ``timeout_s`` bounds the whole run; ``settle_s`` is how long the fenced topics must stay still.
    ``move_consumers``: before ``caught_up``, ask the groups' ``FailoverConsumer``s on the source to
    commit and leave (``replicator.failover.release``), so the running replicator checkpoints their
    final positions; after the move they continue on the target by themselves."""
    deadline = time.monotonic() + timeout_s
    state = read_flow_state(config, flow)
    name, source = state.flow.name, state.flow.source
    run = current_run(state)
    done = {e.step for e in run}
    resumed_after = run[-1].step if run else None
    if "moved" in done:
        _log.info("cutover of %s: done by an earlier run (%s)", name, run[-1].detail)
        return CutoverResult(name, resumed_after, (), None)
    source_conf = config.cluster(source).client_config()
    wait_for_cluster(source, source_conf, timeout_s=config.connect_timeout_seconds)
    admin = admin_client(source_conf)
    counts = partition_counts(admin)
    recorder = _Recorder(config, state)
    if run:
        topics, acls = run[0].topics, run[0].acls
        raise_fence(admin, source, topics)  # again: a binding deleted by hand since would let writers in
    else:
        topics = _source_topics(config, state, counts)
        acls = tuple(raise_fence(admin, source, topics))
        recorder.record("fenced", topics, acls, f"DENY Write for every principal on {len(topics)} topics of {source}")
    settled_at_ms = next((e.emitted_at_ms for e in run if e.step == "settled"), None)
    if settled_at_ms is None:
        partitions = [(t, p) for t in topics for p in range(counts.get(t, 0))]
        seen = _settle(admin, source, partitions, settle_s, deadline)
        ends = ", ".join(f"{t}[{p}]={end}" for (t, p), end in sorted(seen.ends.items())[:20])
        step = recorder.record("settled", topics, acls, f"no write for {settle_s:g} s; ends {ends}")
        settled_at_ms = step.emitted_at_ms
    if "caught_up" not in done:
        if move_consumers:
            chosen = select_groups(state, groups)
            release_consumers(
                config, state.flow, chosen, cluster=source, reason="failover", user=user_name(),
                timeout_s=max(0.0, deadline - time.monotonic()),
            )  # fmt: skip
        recorder.record("caught_up", topics, acls, _caught_up(config, name, groups, topics, settled_at_ms, deadline))
    if "replication_stopped" not in done:
        recorder.record("replication_stopped", topics, acls, _stop_replication(config, name, stale_after_s, deadline))
    result = apply_failover(
        config, name, groups=groups, planned=True, timeout_s=max(0.0, deadline - time.monotonic()),
        stale_after_s=stale_after_s,
    )  # fmt: skip
    moved = f"failover event {result.event.event_id}" if result.event else "no group moved by this run"
    outcomes = ", ".join(f"{g.group} {g.outcome}" for g in result.groups)
    recorder.record("moved", topics, acls, f"{moved}: {outcomes}")
    return CutoverResult(name, resumed_after, tuple(recorder.written), result)


def lift_cutover_fence(config: MirrorlakeConfig, flow: str) -> Cutover | None:
    """Delete the bindings of the flow's fence on its source and record ``unfenced`` (None: no fence up)."""
    state = read_flow_state(config, flow)
    run = current_run(state)
    if not run:
        return None
    source = state.flow.source
    conf = config.cluster(source).client_config()
    wait_for_cluster(source, conf, timeout_s=config.connect_timeout_seconds)
    deleted = lift_fence(admin_client(conf), source, run[0].acls)
    detail = f"{deleted} of {len(run[0].acls)} fence bindings deleted on {source}, after step {run[-1].step}"
    return _Recorder(config, state).record(UNFENCED, run[0].topics, run[0].acls, detail)
