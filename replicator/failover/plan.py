"""A failover plan: per group and partition where it resumes on the target and what that costs.

Definitions (DESIGN.md): a group that committed source offset ``c`` and resumes at target offset
``t`` *loses* the replicated records ``>= c`` with no copy at or after ``t``, *re-reads* the copies
at or after ``t`` of records ``< c``, and sees *duplicated* extra copies of records ``>= c``
(``replicator.client.failover_cost``, the rule the lakehouse uses too). Records never replicated
are the RPO, reported apart: per partition from the latest source watermark (exact with watermark
v2: the tail after the flow's read position, read and counted; an offset bound with v1), and per
group for the records ``>= c``.

* ``c`` is the group's latest checkpoint (the source is not asked: it may be gone).
* The resume offset is the exact translation of ``c`` through the mapping as it stands now, or
  with ``at_ms`` the first target record with timestamp ``>= at_ms`` (Kafka's ``--to-datetime``),
  costed against ``c`` beside the exact translation. Every time resolves to a real position: one
  before the partition's first record (before 1970 included) resumes at its first record, one
  after its last record at its end, one in the future is refused; the cost says what each means.
* The consistent cut is the latest time T such that every record with timestamp < T of every
  selected partition (the partitions of the selected groups' topics) was replicated at the last
  observation: the timestamp of each partition's first unreplicated record (its observation time
  when nothing is pending), minimum over partitions. It assumes timestamps grow with offsets in a
  partition (CreateTime from ordered producers). ``reread_at_cut``/``lost_at_cut``: the cost of
  resuming every group at T.
* Records can vanish from the target after they were copied (time retention of old timestamps,
  ``delete-records``): a replicated record whose every copy lies below the target partition's log
  start (its latest target watermark) is gone for a failover. Those ``>= c`` count in
  ``records_lost`` with ``lost_cause`` naming it (``records_deleted_on_target`` of them), and per
  partition in ``deleted_on_target`` with their offset ranges; a translation below the log start
  resumes at the log start (``method`` ``log_start``), where a consumer would be reset to anyway.
* On a compacted target topic the cleaner removes copies from inside the log, where neither the
  log start nor the mapping shows it: the plan reads which target offsets still hold a record
  (``replicator.client.present_copies``) and costs every resume point against them. Copies gone
  that way count in ``records_lost`` too (``records_compacted_on_target`` of them, named in
  ``lost_cause``), and per partition in ``compacted_on_target``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from replicator.client.failover_cost import (
    DELETED_ON_TARGET,
    DeletedCopies,
    FailoverCost,
    deleted_on_target,
    failover_cost,
    union_size,
)
from replicator.client.mapping import Segment, translate
from replicator.client.present_copies import COMPACTED_ON_TARGET, PresentCopies
from replicator.config.patterns import UnsupportedPatternError, compile_pattern
from replicator.errors import FailoverError
from replicator.events import Checkpoint, Watermark
from replicator.failover.state import FlowState
from replicator.failover.target import GroupActivity, TimePosition
from replicator.failover.times import format_time, lookup_time
from replicator.failover.unmapped import UnmappedCopies

__all__ = ["PartitionRisk", "GroupPartitionPlan", "GroupPlan", "FailoverPlan", "build_plan", "select_groups"]

_log = logging.getLogger(__name__)
PositionsAt = Callable[[list[tuple[str, int]], int], Mapping[tuple[str, int], TimePosition]]
# (target topic, partition) -> end of the copies to read; answers only the compacted partitions
PresentOf = Callable[[Mapping[tuple[str, int], int]], Mapping[tuple[str, int], PresentCopies]]


@dataclass(frozen=True)
class PartitionRisk:
    """A source partition at the last observation: what was not replicated."""

    source_topic: str
    target_topic: str | None
    partition: int
    records: int | None
    bytes: int | None
    seconds: float | None
    exact: bool  # measured by reading the tail (watermark v2), not an offset bound
    observed_at_ms: int | None
    read_position: int | None
    log_end_offset: int | None
    replicated_until_ms: int | None  # every record with a smaller timestamp was replicated
    target_log_start: int | None = None  # at the target's latest watermark (None: not observed)
    deleted_on_target: int | None = None  # replicated records whose every copy is below it (lost)
    deleted_source_range: tuple[int, int] | None = None  # their first and last source offsets
    deleted_target_range: tuple[int, int] | None = None  # the target offsets that held them
    compacted_on_target: int | None = None  # replicated records compaction removed (None: not compacted/read)
    unmapped_copies: int | None = None  # records on the target past the last mapped copy (``failover.unmapped``)
    copies_presumed: bool = False  # the source was down: those records are presumed copies, in order
    copied_since_observed: int = 0  # records the watermark counted unreplicated whose copies were found since


@dataclass(frozen=True)
class GroupPartitionPlan:
    group: str
    source_topic: str
    target_topic: str
    partition: int
    committed_offset: int
    checkpoint_offset: int
    checkpointed_at_ms: int
    target_offset: int | None  # where the group resumes (None: nothing of the partition replicated)
    method: (
        str  # exact | after_last_copy | before_first_copy | timestamp | log_start | no_mapping | no_target_partition
        # | presumed_copy | after_presumed_copies (failover.unmapped, the source down)
    )
    records_lost: int | None
    records_reread: int | None
    records_duplicated: int | None
    records_unreplicated: int | None
    exact_offset: int | None  # the exact translation (equal to target_offset unless --at)
    lost_at_exact: int | None
    reread_at_exact: int | None
    lost_at_cut: int | None = None
    reread_at_cut: int | None = None
    records_deleted_on_target: int | None = None  # of records_lost: copies gone below the target's log start
    lost_cause: str | None = None  # why records_lost is not 0 beyond the translation (the causes, joined)
    records_compacted_on_target: int | None = None  # of records_lost: copies removed by compaction
    unmapped_copies: int | None = None  # records on the target past the partition's last mapped copy
    copies_presumed: bool = False  # with the source down: the figures presume they copy the next offsets


@dataclass(frozen=True)
class GroupPlan:
    group: str
    members_on_target: int
    state_on_target: str
    partitions: tuple[GroupPartitionPlan, ...]

    @property
    def active_on_target(self) -> bool:
        return self.members_on_target > 0

    def total(self, name: str) -> int:
        return sum(getattr(p, name) or 0 for p in self.partitions)


@dataclass(frozen=True)
class FailoverPlan:
    flow: str
    source_cluster: str
    target_cluster: str
    planned_at_ms: int
    at_ms: int | None
    groups: tuple[GroupPlan, ...]
    partitions: tuple[PartitionRisk, ...]
    consistent_cut_ms: int | None
    running_replicators: tuple[str, ...]

    @property
    def records_unreplicated(self) -> int | None:
        values = [p.records for p in self.partitions]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    @property
    def bytes_unreplicated(self) -> int | None:
        values = [p.bytes for p in self.partitions]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    @property
    def records_deleted_on_target(self) -> int:
        return sum(p.deleted_on_target or 0 for p in self.partitions)

    @property
    def records_compacted_on_target(self) -> int:
        return sum(p.compacted_on_target or 0 for p in self.partitions)

    @property
    def seconds_unreplicated(self) -> float | None:
        values = [p.seconds for p in self.partitions if p.seconds is not None]
        return max(values) if values else None


def select_groups(state: FlowState, pattern: str | None) -> list[str]:
    """Groups with checkpoints on the flow matching ``pattern`` (full match); none is an error."""
    known = state.groups()
    if not known:
        raise FailoverError(f"flow {state.flow.name}: no group has a checkpoint in the target's state topic")
    if pattern is None:
        return known
    try:
        rx = compile_pattern(pattern)
    except UnsupportedPatternError as exc:
        raise FailoverError(f"--groups is not a valid regular expression: {exc}") from None
    chosen = [g for g in known if rx.fullmatch(g)]
    if not chosen:
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise FailoverError(f"--groups {pattern!r} matches no group of flow {state.flow.name} (groups: {shown})")
    return chosen


def partition_risk(
    mark: Watermark, last: int | None, target_topic: str | None, segments: Sequence[Segment] = ()
) -> PartitionRisk:
    """What was not replicated at ``mark``'s observation (exact with a v2 watermark).

    ``last``: the largest upstream offset copied (the mapping's). With a v1 watermark the records
    are an offset bound and their age unknown. Copies the ``segments`` hold of records the
    watermark counted as unreplicated (copied after the observation: a killed replicator's last
    writes, found by ``failover.unmapped``) are taken off; the age and bytes of what is left are
    then unknown (None).
    """
    observed = mark.observed_at_ms
    since = _copied_since(mark, segments)
    if mark.unreplicated_records is not None:
        records, nbytes, exact = mark.unreplicated_records, mark.unreplicated_bytes, True
        oldest = mark.oldest_unreplicated_timestamp_ms
        if since:
            records, nbytes, oldest = max(0, records - since), None, None
    else:
        nxt = mark.read_position if mark.read_position is not None else None
        if nxt is None:
            nxt = last + 1 if last is not None else mark.log_start_offset
        records = max(0, mark.log_end_offset - max(nxt, mark.log_start_offset))
        nbytes, exact, oldest = None, False, None
    if records == 0:
        seconds: float | None = 0.0
        until: int | None = observed
    else:
        seconds = max(0.0, (observed - oldest) / 1000) if oldest is not None else None
        # never later than the observation: a producer clock ahead of ours stamps the first unreplicated
        # record after it, and what arrives after the observation is not vouched for (as gold ``rpo``)
        until = min(oldest, observed) if oldest is not None else None
    return PartitionRisk(
        mark.source_topic,
        target_topic,
        mark.partition,
        records,
        nbytes,
        seconds,
        exact,
        observed,
        mark.read_position,
        mark.log_end_offset,
        until,
        copied_since_observed=since,
    )


def _copied_in(segments: Sequence[Segment], low: int, high: int) -> int:
    """Distinct source offsets in ``[low, high)`` that ``segments`` hold a copy of."""
    return union_size((max(s.upstream_start, low), min(s.upstream_end, high - 1)) for s in segments)


def _copied_since(mark: Watermark, segments: Sequence[Segment]) -> int:
    """Copies of records a v2 source watermark counted as not replicated (past its read position)."""
    if mark.unreplicated_records is None or mark.read_position is None:
        return 0
    return _copied_in(segments, mark.read_position, mark.log_end_offset)


def _group_unreplicated(
    mark: Watermark | None, last: int | None, committed: int, segments: Sequence[Segment] = ()
) -> int | None:
    """Records ``>= committed`` not replicated at the last observation (exact when measurable), less
    the copies found since of records it counted."""
    if mark is None:
        return None
    pos = mark.read_position
    if mark.unreplicated_records is not None and pos is not None and committed <= pos:
        return max(0, mark.unreplicated_records - _copied_since(mark, segments))
    nxt = pos if pos is not None else (last + 1 if last is not None else mark.log_start_offset)
    start = max(committed, nxt, mark.log_start_offset)
    return max(0, mark.log_end_offset - start - _copied_in(segments, start, mark.log_end_offset))


def _target_log_start(state: FlowState, target_topic: str | None, partition: int) -> int | None:
    mark = state.target_marks.get((target_topic, partition)) if target_topic else None
    return mark.log_start_offset if mark is not None else None


def _with_deleted(risk: PartitionRisk, state: FlowState) -> PartitionRisk:
    """``risk`` with the records deleted from the target after they were copied (latest target watermark)."""
    log_start = _target_log_start(state, risk.target_topic, risk.partition)
    if log_start is None:
        return risk
    segs = state.index.segments(state.flow.name, risk.source_topic, risk.partition)
    gone: DeletedCopies = deleted_on_target(segs, log_start)
    ranges = (
        ((gone.upstream_first, gone.upstream_last), (gone.downstream_first, log_start - 1))
        if gone.records and gone.upstream_first is not None and gone.upstream_last is not None
        and gone.downstream_first is not None
        else (None, None)
    )  # fmt: skip
    return replace(
        risk,
        target_log_start=log_start,
        deleted_on_target=gone.records,
        deleted_source_range=ranges[0],
        deleted_target_range=ranges[1],
    )


def _copy_ends(state: FlowState, checkpoints: list[Checkpoint]) -> dict[tuple[str, int], int]:
    """Per target partition of the groups: the offset after its last mapped copy (what a reading needs)."""
    ends: dict[tuple[str, int], int] = {}
    for c in checkpoints:
        segs = state.index.segments(state.flow.name, c.source_topic, c.partition)
        if segs:
            ends[(c.target_topic, c.partition)] = max(s.downstream_end for s in segs) + 1
    return ends


def _with_compacted(
    risk: PartitionRisk, state: FlowState, present: Mapping[tuple[str, int], PresentCopies]
) -> PartitionRisk:
    """``risk`` with the replicated records compaction removed from the target (partitions read only)."""
    held = present.get((risk.target_topic, risk.partition)) if risk.target_topic else None
    if held is None:
        return risk
    segs = state.index.segments(state.flow.name, risk.source_topic, risk.partition)
    return replace(risk, compacted_on_target=held.compacted(segs))


def _with_unmapped(risk: PartitionRisk, tail: UnmappedCopies | None) -> PartitionRisk:
    if tail is None:
        return risk
    return replace(risk, unmapped_copies=tail.records, copies_presumed=tail.presumed is not None)


def _cost(segs: list[Segment], committed: int, target: int, held: PresentCopies | None) -> FailoverCost:
    """The failover cost against the copies still present (compacted partition) or the mapping's."""
    return held.cost(segs, committed, target) if held is not None else failover_cost(segs, committed, target)


def _compacted_lost(
    segs: list[Segment], committed: int, target: int | None, held: PresentCopies | None, cost: FailoverCost | None
) -> int | None:
    """Of ``cost.lost``: the records lost only because compaction removed their copies."""
    if held is None or target is None or cost is None:
        return None
    return cost.lost - failover_cost(segs, committed, target).lost


def _lost_cause(deleted: int, compacted: int | None, cost: FailoverCost | None) -> str | None:
    if not cost or not cost.lost:
        return None
    causes = [c for n, c in ((deleted, DELETED_ON_TARGET), (compacted, COMPACTED_ON_TARGET)) if n]
    return "; ".join(causes) or None


def _check_time(at_ms: int, now_ms: int) -> None:
    """A time in the future names no record yet: refused before anything is looked up."""
    if at_ms > now_ms:
        raise FailoverError(
            f"--at {format_time(at_ms)} is in the future (the plan reads the target as of {format_time(now_ms)})"
        )


def _absent_row(c: Checkpoint) -> GroupPartitionPlan:
    return GroupPartitionPlan(
        group=c.group,
        source_topic=c.source_topic,
        target_topic=c.target_topic,
        partition=c.partition,
        committed_offset=c.upstream_offset,
        checkpoint_offset=c.downstream_offset,
        checkpointed_at_ms=c.emitted_at_ms,
        target_offset=None,
        method="no_target_partition",
        records_lost=None,
        records_reread=None,
        records_duplicated=None,
        records_unreplicated=None,
        exact_offset=None,
        lost_at_exact=None,
        reread_at_exact=None,
    )


def build_plan(
    state: FlowState,
    groups: list[str],
    activity: Mapping[str, GroupActivity],
    positions_at: PositionsAt,
    *,
    at_ms: int | None = None,
    running: tuple[str, ...] = (),
    present_of: PresentOf | None = None,
    target_partitions: Mapping[str, int] | None = None,
    unmapped: Mapping[tuple[str, int], UnmappedCopies] | None = None,
) -> FailoverPlan:
    """The plan for ``groups`` (already selected); ``positions_at`` looks positions up on the target,
    ``present_of`` reads which copies the compacted ones among the groups' target partitions hold.

    ``target_partitions`` (topic -> partition count on the target): a checkpoint naming a partition
    the target lacks (a deleted topic, a forged event) gets a row with method ``no_target_partition``
    and no figures, and is never looked up there (a lookup of it fails the whole plan after 30 s).

    ``unmapped``: what ``failover.unmapped`` found past each partition's last mapped copy (its syncs
    are in ``state``'s mapping already); rows and risks say how many records and whether presumed.
    A resume point that rests on presumed copies has method ``presumed_copy`` (inside them) or
    ``after_presumed_copies`` (after the last).
    """
    unmapped = unmapped or {}
    flow = state.flow
    chosen = set(groups)
    everything = sorted(
        (c for (g, _t, _p), c in state.checkpoints.items() if g in chosen),
        key=lambda c: (c.group, c.source_topic, c.partition),
    )
    absent = [
        c
        for c in everything
        if target_partitions is not None and target_partitions.get(c.target_topic, 0) <= c.partition
    ]
    for c in absent:
        _log.warning(
            "flow %s: group %r's checkpoint names %r[%d], which the target %s lacks: no position is looked up for it",
            flow.name, c.group, c.target_topic, c.partition, flow.target,
        )  # fmt: skip
    checkpoints = [c for c in everything if c not in absent]
    last_copy = state.last_copy()
    present = present_of(_copy_ends(state, checkpoints)) if present_of is not None else {}
    risks = tuple(
        _with_unmapped(
            _with_compacted(
                _with_deleted(
                    partition_risk(
                        mark,
                        last_copy.get(key),
                        state.index.target_topic(flow.name, key[0]),
                        state.index.segments(flow.name, *key),
                    ),
                    state,
                ),
                state,
                present,
            ),
            unmapped.get(key),
        )
        for key, mark in sorted(state.source_marks.items())
    )
    topics = {c.source_topic for c in checkpoints}
    selected = [r for r in risks if r.source_topic in topics] or list(risks)
    untils = [r.replicated_until_ms for r in selected]
    cut = min(u for u in untils if u is not None) if untils and None not in untils else None
    targets = sorted({(c.target_topic, c.partition) for c in checkpoints})
    if at_ms is not None:
        _check_time(at_ms, state.read_at_ms)
        at_positions = positions_at(targets, lookup_time(at_ms))
    cut_positions = positions_at(targets, lookup_time(cut)) if cut is not None else {}

    rows: dict[str, list[GroupPartitionPlan]] = {g: [] for g in groups}
    for c in checkpoints:
        segs = state.index.segments(flow.name, c.source_topic, c.partition)
        held = present.get((c.target_topic, c.partition))
        committed = c.upstream_offset
        exact = translate(segs, committed)
        exact_cost = _cost(segs, committed, exact.downstream, held) if exact is not None else None
        target, method, cost = (
            (exact.downstream, exact.method, exact_cost) if exact is not None else (None, "no_mapping", None)
        )
        log_start = _target_log_start(state, c.target_topic, c.partition)
        if target is not None and log_start is not None and target < log_start:
            target, method = log_start, "log_start"
            cost = _cost(segs, committed, target, held)
        tail = unmapped.get((c.source_topic, c.partition))
        if tail is not None and tail.presumed is not None and committed >= tail.presumed[0] and method != "log_start":
            method = "presumed_copy" if committed <= tail.presumed[1] else "after_presumed_copies"
        if at_ms is not None:
            target = at_positions[(c.target_topic, c.partition)].offset
            method, cost = "timestamp", _cost(segs, committed, target, held)
        deleted = deleted_on_target(segs, log_start or 0, committed)
        compacted = _compacted_lost(segs, committed, target, held, cost)
        at_cut = cut_positions.get((c.target_topic, c.partition))
        cut_cost = _cost(segs, committed, at_cut.offset, held) if at_cut is not None else None
        key = (c.source_topic, c.partition)
        rows[c.group].append(
            GroupPartitionPlan(
                group=c.group,
                source_topic=c.source_topic,
                target_topic=c.target_topic,
                partition=c.partition,
                committed_offset=committed,
                checkpoint_offset=c.downstream_offset,
                checkpointed_at_ms=c.emitted_at_ms,
                target_offset=target,
                method=method,
                records_lost=cost.lost if cost else None,
                records_reread=cost.reread if cost else None,
                records_duplicated=cost.duplicated if cost else None,
                records_unreplicated=_group_unreplicated(
                    state.source_marks.get(key), last_copy.get(key), committed, segs
                ),
                exact_offset=exact.downstream if exact else None,
                lost_at_exact=exact_cost.lost if exact_cost else None,
                reread_at_exact=exact_cost.reread if exact_cost else None,
                lost_at_cut=cut_cost.lost if cut_cost else None,
                reread_at_cut=cut_cost.reread if cut_cost else None,
                records_deleted_on_target=deleted.records if log_start is not None else None,
                lost_cause=_lost_cause(deleted.records, compacted, cost),
                records_compacted_on_target=compacted,
                unmapped_copies=tail.records if tail is not None else None,
                copies_presumed=tail is not None and tail.presumed is not None,
            )
        )
    for c in absent:
        rows[c.group].append(_absent_row(c))
    plans = tuple(
        GroupPlan(
            g,
            activity[g].members if g in activity else 0,
            activity[g].state if g in activity else "UNKNOWN",
            tuple(rows[g]),
        )
        for g in groups
    )
    return FailoverPlan(
        flow=flow.name,
        source_cluster=flow.source,
        target_cluster=flow.target,
        planned_at_ms=state.read_at_ms,
        at_ms=at_ms,
        groups=plans,
        partitions=risks,
        consistent_cut_ms=cut,
        running_replicators=running,
    )
