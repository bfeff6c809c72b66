"""Failback after a failover of ``A->B``: mirror back only what B gained, then move groups back to A.

**Reverse mirroring.** The reverse flow ``B->A`` is an ordinary configured flow. What it must never
copy back are the records that came from A:

- default policy: they are in B's remote topics ``A.<topic>``, which the reverse flow's topic
  selection already skips (``TopicSelector``: a topic whose source is the flow's target closes a
  cycle); B's local topics hold only what producers wrote on B, so the flow starts at their log start.
- identity policy (same names on both sides): B's ``<topic>`` holds A's copies (each with the
  provenance header naming A, which the reverse flow never copies back), and then what B gained.
  ``seed_reverse_flow`` makes the reverse flow *start* each such partition right after the last copy
  the forward offset mapping knows (its largest ``downstream_end + 1``), by committing that position
  for the reverse flow's consumer group on B; a partition that already has a position is left alone
  (a rerun, or a reverse flow that already ran). Copies past that point (written by a killed
  replicator after its last offset sync, or re-produced by ``failback --recover``) carry the
  provenance header and are skipped record by record.

**Groups back to A.** ``failback_groups`` translates each selected group's committed offsets on B:
an offset inside what came from A (at or below the forward mapping's last copy + 1) through the
forward mapping (``MappingIndex.reverse``: the A offset of that copy); an offset past it through the
reverse flow's mapping (read from A's state topic: where B's record landed on A). Offsets are written
on A through the replicator's own rules (``GroupOffsetSync`` for the reverse flow: only while the
group has no members on A, never rewinding, a ``group_sync`` event per decision in A's state topic),
never for a group that still has members on B; then a ``failback`` event (action ``groups``) goes to
B's state topic beside the flow's ``failover`` events. A group named in an earlier such event is left
alone: a rerun moves nothing and writes no event.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from replicator.client.group_offsets import GroupOffset, committed_offsets
from replicator.client.policy import policy_from_config
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.config.patterns import UnsupportedPatternError, compile_pattern
from replicator.errors import ConfigError, FailoverError
from replicator.events import Checkpoint, Failback, FailbackOffset
from replicator.failover.api import group_outcome, user_name
from replicator.failover.release import release_consumers
from replicator.failover.state import FlowState, read_flow_state
from replicator.failover.target import group_activity
from replicator.kafka.admin import admin_client
from replicator.kafka.clients import new_consumer
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.positions_guard import real_positions
from replicator.kafka.settings import consumer_group_id
from replicator.kafka.state_log import StateLog
from replicator.metadata.filters import RegexTopicFilter
from replicator.metadata.topics import TopicManager, TopicSelector
from replicator.tasks.base import StateView, TaskContext, task_producer
from replicator.tasks.group_sync import GroupOffsetSync

__all__ = ["ReverseStart", "GroupBack", "FailbackGroupsResult", "reverse_flow", "seed_reverse_flow", "failback_groups"]

_TIMEOUT_S = 30


def reverse_flow(config: MirrorlakeConfig, forward: FlowConfig) -> FlowConfig:
    """The configured flow ``B->A`` of ``A->B`` (``ConfigError`` naming what to add when there is none)."""
    name = f"{forward.target}->{forward.source}"
    try:
        return config.flow(name)
    except ConfigError:
        raise ConfigError(
            f"no reverse flow {name} is configured: add a flow with source {forward.target} and target "
            f"{forward.source} (the topics to mirror back) before failing back {forward.name}"
        ) from None


def _copied_end(state: FlowState, source_topic: str, partition: int) -> int:
    """The first offset on the target after the last copy the forward mapping knows (0: none)."""
    segments = state.index.segments(state.flow.name, source_topic, partition)
    return max((s.downstream_end for s in segments), default=-1) + 1


@dataclass(frozen=True)
class ReverseStart:
    topic: str  # on the forward flow's target (the reverse flow's source)
    partition: int
    offset: int | None  # where the reverse flow starts (None: not selected by the reverse flow)
    outcome: str  # seeded | already_positioned | not_selected (e.g. a remote topic A.<topic>)


def seed_reverse_flow(config: MirrorlakeConfig, flow_name: str) -> list[ReverseStart]:
    """Commit the reverse flow's start positions on B; see the module doc. Refuses while the
    reverse flow runs (its consumer group has members on B) and for an exactly-once reverse flow."""
    state = read_flow_state(config, flow_name)
    forward = state.flow
    back = reverse_flow(config, forward)
    if back.exactly_once:
        raise FailoverError(f"reverse flow {back.name} is exactly_once: seeding its positions topic is not supported")
    policy = policy_from_config(config.replication_policy)
    selector = TopicSelector(
        policy,
        RegexTopicFilter.for_flow(back),
        source=back.source,
        target=back.target,
        own_topics=(config.state_topic, config.positions_topic),
    )
    conf = config.cluster(back.source).client_config()
    admin = admin_client(conf)
    group = consumer_group_id(back)
    if group_activity(admin, [group])[group].active:
        raise FailoverError(f"reverse flow {back.name} already runs (group {group} has members on {back.source})")
    topics = {state.index.target_topic(forward.name, t) or t for _f, t, _p in state.index.partitions(forward.name)}
    have = {(o.topic, o.partition) for o in committed_offsets(conf, group, sorted(topics))}
    starts: list[ReverseStart] = []
    for _f, source_topic, partition in state.index.partitions(forward.name):
        topic = state.index.target_topic(forward.name, source_topic) or source_topic
        if not selector.should_replicate(topic):
            starts.append(ReverseStart(topic, partition, None, "not_selected"))
            continue
        seeded = (topic, partition) not in have
        starts.append(
            ReverseStart(
                topic,
                partition,
                _copied_end(state, source_topic, partition),
                "seeded" if seeded else "already_positioned",
            )
        )
    todo = [
        TopicPartition(s.topic, s.partition, s.offset) for s in starts if s.outcome == "seeded" and s.offset is not None
    ]
    if todo:
        consumer = new_consumer({**conf, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=real_positions(todo, f"{back.name}'s start positions"), asynchronous=False)
        except KafkaException as exc:
            raise FailoverError(f"cannot commit {back.name}'s start positions on {back.source}: {exc}") from exc
        finally:
            consumer.close()
    return starts


@dataclass(frozen=True)
class GroupBack:
    group: str
    outcome: str  # moved | unchanged | skipped_active_on_<B> | skipped_already_failed_back | skipped_* | partly_moved
    decisions: tuple[tuple[str, int, str, int | None, int | None, str | None], ...] = ()  # topic on A, p, ...
    detail: str | None = None


@dataclass(frozen=True)
class FailbackGroupsResult:
    groups: tuple[GroupBack, ...]
    event: Failback | None  # None: nothing moved


def _select(admin_b: object, pattern: str, cluster: str) -> list[str]:
    try:
        rx = compile_pattern(pattern)
    except UnsupportedPatternError as exc:
        raise FailoverError(f"--groups is not a valid regular expression: {exc}") from None
    listed = admin_b.list_consumer_groups(request_timeout=_TIMEOUT_S).result(timeout=_TIMEOUT_S)  # type: ignore[attr-defined]
    chosen = sorted(g.group_id for g in listed.valid if rx.fullmatch(g.group_id))
    if not chosen:
        raise FailoverError(f"--groups {pattern!r} matches no consumer group on {cluster}")
    return chosen


def _recovered_options(forward: FlowState, src: str, o: GroupOffset, translated: bool) -> list[tuple[int, str]]:
    """Where on A a group at ``o`` (past the forward copies on B) must resume because of the records
    ``--recover`` re-produced to B: at the first one it has not read there (their order on A differs:
    on A they precede everything the reverse flow copied, so this may re-read B's records, never lose
    one); after all of them when it read them all and nothing else translates."""
    ranges = [
        r
        for f in forward.failbacks
        if f.action == "recover"
        for r in f.ranges
        if (r.source_topic, r.partition) == (src, o.partition) and r.target_end_offset is not None
    ]
    unread = [r.start_offset for r in ranges if (r.target_end_offset or 0) > o.offset]
    if unread:
        return [(min(unread), "before_unread_recovered")]
    if ranges and not translated:
        return [(max(r.end_offset for r in ranges), "after_recovered")]
    return []


def _translate(
    forward: FlowState, back: FlowState, targets: dict[str, str], group: str, o: GroupOffset
) -> Checkpoint | None:
    """The checkpoint (of the reverse flow) that moves ``o``, committed on B, to A (None: no mapping)."""
    src = targets.get(o.topic)  # the A topic whose copies B's o.topic holds (None: a topic local to B)
    if src is not None and o.offset <= _copied_end(forward, src, o.partition):
        t = forward.index.reverse(forward.flow.name, src, o.partition, o.offset)
        if t is None:
            return None
        a_topic, a_offset, method = src, t.upstream, f"forward_{t.method}"
    else:
        t = back.index.translate(back.flow.name, o.topic, o.partition, o.offset)
        copied_to = back.index.target_topic(back.flow.name, o.topic)
        options = [(t.downstream, f"reverse_flow_{t.method}")] if t is not None and copied_to is not None else []
        if src is not None and copied_to in (None, src):
            options += _recovered_options(forward, src, o, bool(options))
        if not options:
            return None
        a_topic = src if src is not None else copied_to or ""
        a_offset, method = min(options)
    return Checkpoint(
        flow=back.flow.name,
        replicator_id="failback",
        source_cluster=back.flow.source,
        target_cluster=back.flow.target,
        group=group,
        source_topic=o.topic,
        target_topic=a_topic,
        partition=o.partition,
        upstream_offset=o.offset,
        downstream_offset=a_offset,
        method=method,
    )


def failback_groups(
    config: MirrorlakeConfig, flow_name: str, *, groups: str, move_consumers: bool = False, timeout_s: float = 300.0
) -> FailbackGroupsResult:
    """Move the groups matching ``groups`` (full match, on B) back to A; see the module doc.

    ``move_consumers``: first ask the groups' ``FailoverConsumer``s on B to commit and leave, waiting
    up to ``timeout_s`` (``replicator.failover.release``)."""
    forward = read_flow_state(config, flow_name)
    back_flow = reverse_flow(config, forward.flow)
    back = read_flow_state(config, back_flow.name)  # A's state topic: the reverse flow's mapping
    b_conf = config.cluster(forward.flow.target).client_config()
    a_conf = config.cluster(forward.flow.source).client_config()
    wait_for_cluster(forward.flow.source, a_conf, timeout_s=config.connect_timeout_seconds)
    admin_a = admin_client(a_conf)
    # the group_sync events go to A's state topic, which no flow may have made yet (B->A never ran)
    TopicManager(admin_a, admin_a).ensure_state_topic(config.state_topic)
    admin_b = admin_client(b_conf)
    chosen = _select(admin_b, groups, forward.flow.target)
    if move_consumers:
        release_consumers(
            config, forward.flow, chosen, cluster=forward.flow.target, reason="failback", user=user_name(),
            timeout_s=timeout_s,
        )  # fmt: skip
    active_b = group_activity(admin_b, chosen)
    done = {g for f in forward.failbacks if f.action == "groups" for g in f.groups}
    targets = {
        forward.index.target_topic(forward.flow.name, t) or t: t
        for _f, t, _p in forward.index.partitions(forward.flow.name)
    }
    replicator_id = f"failback@{socket.gethostname()}-{os.getpid()}"
    producer_a = task_producer(a_conf, replicator_id)
    ctx = TaskContext(
        config, back_flow, replicator_id, StateLog(producer_a, config.state_topic), dict, StateView(config, back_flow)
    )
    syncer = GroupOffsetSync(ctx, a_conf)
    out: list[GroupBack] = []
    written: list[FailbackOffset] = []
    try:
        for group in chosen:
            if group in done:
                out.append(GroupBack(group, "skipped_already_failed_back", detail="an earlier failback moved it"))
                continue
            if active_b[group].active:
                detail = f"{active_b[group].members} member(s) still consume on {forward.flow.target}: stop them first"
                out.append(GroupBack(group, f"skipped_active_on_{forward.flow.target}", detail=detail))
                continue
            mapped: list[Checkpoint] = []
            unmapped: list[GroupOffset] = []
            for o in committed_offsets(b_conf, group):
                checkpoint = _translate(forward, back, targets, group, o)
                if checkpoint is not None:
                    mapped.append(checkpoint)
                elif o.topic in targets or back.index.target_topic(back_flow.name, o.topic):
                    unmapped.append(o)
            decisions = syncer.sync(group, mapped, unmapped)
            outcome = group_outcome(decisions) if decisions else "skipped_no_mapping"
            out.append(
                GroupBack(
                    group,
                    outcome,
                    tuple(
                        (c.target_topic, c.partition, d, before, after, why) for c, d, before, after, why in decisions
                    ),
                )
            )
            written += [
                FailbackOffset(group, c.target_topic, c.partition, c.upstream_offset, after, c.method)
                for c, d, _before, after, _why in decisions
                if d in ("synced", "unchanged") and after is not None
            ]
    except KafkaException as exc:
        raise FailoverError(f"failback of groups failed: {kafka_error_reason(exc)}") from exc
    event = None
    moved = tuple(sorted({o.group for o in written}))
    if moved:
        event = Failback(
            flow=forward.flow.name,
            replicator_id=replicator_id,
            source_cluster=forward.flow.source,
            target_cluster=forward.flow.target,
            action="groups",
            groups=moved,
            offsets=tuple(written),
            host=socket.gethostname(),
            user=user_name(),
        )
        log_b = StateLog(task_producer(b_conf, replicator_id), config.state_topic)
        log_b.emit(event)
        if not log_b.flushed(_TIMEOUT_S):
            raise FailoverError(f"could not write the failback event to {config.state_topic} on {forward.flow.target}")
    if not ctx.state.flushed(_TIMEOUT_S):
        raise FailoverError(f"could not write group_sync events to {config.state_topic} on {forward.flow.source}")
    return FailbackGroupsResult(tuple(out), event)
