"""The recovery of partitions handed to a process: the copies its last owner left, and where it resumes.

A process killed with SIGKILL leaves copies past its last commit, with a durable sync or none;
copying from the commit would make each of them a second time. So every partition an at-least-once
process is handed is recovered against the state log as it stands then, before its first copy:

1. **Orphans.** Per partition, the last copy the mapping's current life knows is ``(U, D)``; the
   target past ``D`` (at most ``max_tail`` records) is matched by content against the source from
   ``U + 1`` (and up to ``LOOKAHEAD`` records before, for second copies: a killed writer's batch
   that reached the target after the flow copied the same records again). A partition with no
   mapping is searched from the target's log start against the source from its commit. The
   matches become syncs (``matching.recovery_syncs``), stamped with the two topics' ids; a topic
   whose id changed while it was read gives none (its records may be of two topics).
2. **Verdict.** A partition resumes at its commit only when its last copier stopped cleanly
   (``resume.PreviousRun.verdict``) and no orphan was found past its last sync: a clean stop
   publishes the syncs of all its copies before it commits, so orphans are a crash's, whoever
   synced last (a peer killed before its first sync of a partition it was handed).
3. **Resume.** Every other partition resumes at the first source record from its commit that is
   neither a known copy (mapping or recovered) nor one the flow never copies (``resume.walk_resume``).

The caller publishes ``TakeoverPlan.syncs`` durably before it assigns at ``resume_at``: a resume
past a recovered copy whose sync was lost would leave that copy without a mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from replicator.client.mapping import Segment
from replicator.client.mapping_index import MappingIndex
from replicator.events import OffsetSync
from replicator.flow.core.logs import TP, Bounds, Headers, PartitionLogs, hashed_range
from replicator.flow.core.matching import LOOKAHEAD, TopicIds, match_copies, recovery_syncs
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.resume import Coverage, always_crashed, walk_resume

__all__ = [
    "Recovered",
    "StateReader",
    "TakeoverPlan",
    "Verdicts",
    "match_tail",
    "orphan_syncs",
    "plan_takeover",
    "topic_pair_ids",
]

_log = logging.getLogger(__name__)

Selected = tuple[str, str, int]  # (source topic, target topic, partition)


class StateReader(Protocol):
    """The flow's reading of the state log: its offset mapping, read on to the log's end by ``refresh``."""

    index: MappingIndex

    def refresh(self) -> None: ...


class Verdicts(Protocol):
    """How the runs before this one ended (``resume.PreviousRun``, fed by the same reading)."""

    def verdict(self) -> Callable[[str, int], bool]: ...


@dataclass(frozen=True)
class Recovered:
    """What recovery did for one partition: target records read past ``D``, copies given a sync."""

    source_topic: str
    partition: int
    tail: int
    matched: int


@dataclass(frozen=True)
class Matched:
    """One partition's match: target records read, pairs, their syncs, source offsets read (in order)."""

    tail: int
    pairs: list[tuple[int, int]]
    syncs: list[OffsetSync]
    read: list[int]


@dataclass(frozen=True)
class TakeoverPlan:
    """What a takeover found: the ``syncs`` to publish (durably, first), per partition the offset
    where copying resumes when that is past its commit (``resume_at``), what recovery read per
    partition (``report``) and the partitions resumed at their commit after a clean stop (``clean``)."""

    syncs: list[OffsetSync] = field(default_factory=list)
    resume_at: dict[TP, int] = field(default_factory=dict)
    report: list[Recovered] = field(default_factory=list)
    clean: list[TP] = field(default_factory=list)


def topic_pair_ids(
    source: PartitionLogs, target: PartitionLogs, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], TopicIds]:
    """Per (source topic, remote topic): their ids on the two clusters now (None: does not exist)."""
    source_ids = source.topic_ids(sorted({s for s, _t in pairs}))
    remote_ids = target.topic_ids(sorted({t for _s, t in pairs}))
    return {(s, t): (source_ids.get(s), remote_ids.get(t)) for s, t in pairs}


def match_tail(
    origin: SyncOrigin,
    source: PartitionLogs,
    target: PartitionLogs,
    selected: Selected,
    tail_range: Bounds,
    upstream: tuple[int, int, int],
    last: tuple[int, int] | None,
    ids: TopicIds,
) -> Matched:
    """Match the target's ``tail_range`` against the source from ``upstream``'s first offset (its
    log bounds beside it), the copy before them ``last`` (None: none known); the syncs carry ``ids``."""
    topic, target_topic, p = selected
    u_from, s_low, s_end = upstream
    tail = hashed_range(target, target_topic, p, *tail_range)
    if not tail:
        return Matched(0, [], [], [])
    src_end = min(s_end, u_from + len(tail) + LOOKAHEAD)
    # from before the last known copy too: the tail may hold second copies of records the flow had
    # copied again before a killed writer's batch reached the target
    src_from = max(s_low, u_from - len(tail) - LOOKAHEAD) if last else u_from
    src = hashed_range(source, topic, p, src_from, src_end)
    timestamps = {r.offset: r.timestamp for r in src}
    pairs = match_copies([(r.offset, r.hash) for r in tail], [(r.offset, r.hash) for r in src], expect_from=u_from)
    syncs = recovery_syncs(origin, topic, target_topic, p, last, pairs, timestamps, ids)
    return Matched(len(tail), pairs, syncs, [r.offset for r in src])


def orphan_syncs(
    origin: SyncOrigin,
    source: PartitionLogs,
    target: PartitionLogs,
    index: MappingIndex,
    partitions: Sequence[Selected],
    committed: Mapping[TP, int],
    *,
    max_tail: int = 1_000_000,
) -> tuple[list[OffsetSync], list[Recovered]]:
    """Syncs for every orphan copy of ``partitions`` (step 1 of the module's doc): in each stretch of
    the target no known copy holds (``unmapped``), the tail past the last known copy and, when a
    mapping exists, the stretches before and between known copies past the commit's floor."""
    flow = origin.flow
    syncs: list[OffsetSync] = []
    report: list[Recovered] = []
    if not partitions:
        return syncs, report
    ids = topic_pair_ids(source, target, [(s, t) for s, t, _p in partitions])
    t_bounds = target.bounds([(t, p) for _s, t, p in partitions])
    s_bounds = source.bounds([(s, p) for s, _t, p in partitions])
    for topic, target_topic, partition in partitions:
        if (target_topic, partition) not in t_bounds or (topic, partition) not in s_bounds:
            continue
        (t_low, t_end), (s_low, s_end) = t_bounds[(target_topic, partition)], s_bounds[(topic, partition)]
        segments = index.segments(flow, topic, partition)
        start = max(s_low, committed.get((topic, partition), s_low))
        stretches = unmapped(segments, (t_low, t_end), start)
        if sum(hi - lo for lo, hi, _before in stretches) > max_tail:
            _log.warning(
                "flow %s: %s[%d] has %d target records no offset sync names past its commit; only its tail is "
                "recovered", flow, target_topic, partition, sum(hi - lo for lo, hi, _b in stretches),
            )  # fmt: skip
            stretches = [x for x in stretches if x[1] == t_end and x[1] - x[0] <= max_tail]
        tail = matched = 0
        for lo, hi, before in stretches:
            u_from = before[0] + 1 if before else start
            m = match_tail(
                origin, source, target, (topic, target_topic, partition), (lo, hi), (u_from, s_low, s_end), before,
                ids.get((topic, target_topic), (None, None)),
            )  # fmt: skip
            syncs += m.syncs
            tail, matched = tail + m.tail, matched + len(m.pairs)
        if tail:  # else markers or aborted records only
            report.append(Recovered(topic, partition, tail, matched))
    return _still(origin, source, target, ids, syncs, report)


def unmapped(segments: Sequence[Segment], bounds: Bounds, commit: int) -> list[tuple[int, int, tuple[int, int] | None]]:
    """The target offsets ``[lo, hi)`` of ``bounds`` that no known copy holds, each with the copy
    before it ``(U, D)`` (None: none), from the floor of ``commit`` on: past the oldest known copy of
    the newest record before the commit that has one (a copy of a record past the commit was made
    after it), else from the log start. With no mapping, the whole partition; the tail past the last
    known copy always.

    Copies past the last known one are a killed writer's; stretches before it hold them too when
    another writer's copies landed after them and were synced (a process frozen past its session
    while it drained: the simulator, seed 1914, found a killed peer's copies before them made again)."""
    t_low, t_end = bounds
    if not segments:
        return [(t_low, t_end, None)] if t_end > t_low else []
    ordered = sorted(segments, key=lambda s: s.downstream_start)
    floor = t_low
    before_commit = [s for s in ordered if s.upstream_start < commit]
    if before_commit:  # the newest record before the commit with a copy, and its oldest copy
        u = max(min(s.upstream_end, commit - 1) for s in before_commit)
        floor = max(floor, min(s.downstream_start + u - s.upstream_start for s in before_commit if s.covers(u)) + 1)
    out: list[tuple[int, int, tuple[int, int] | None]] = []
    position, before = t_low, None
    for seg in ordered:
        lo, hi = max(position, floor), min(seg.downstream_start, t_end)
        if hi > lo:
            out.append((lo, hi, before))
        position = max(position, seg.downstream_end + 1)
        before = (seg.upstream_end, seg.downstream_end)
    last = max(ordered, key=lambda s: s.downstream_end)
    lo = max(t_low, last.downstream_end + 1)
    if t_end > lo:
        out.append((lo, t_end, (last.upstream_end, last.downstream_end)))
    return out


def _still(
    origin: SyncOrigin,
    source: PartitionLogs,
    target: PartitionLogs,
    ids: dict[tuple[str, str], TopicIds],
    syncs: list[OffsetSync],
    report: list[Recovered],
) -> tuple[list[OffsetSync], list[Recovered]]:
    """Drop the matches of topics deleted or created again while they were read: their records may be
    of two topics, and the flow's own check says the re-creation."""
    now = topic_pair_ids(source, target, list(ids))
    changed = {key[0] for key, before in ids.items() if now.get(key) != before}
    for (topic, remote), before in sorted(ids.items()):
        if topic in changed:
            _log.warning(
                "flow %s: %s -> %s created again while its copies were matched (topic ids %s -> %s): "
                "its matches are dropped", origin.flow, topic, remote, before, now.get((topic, remote)),
            )  # fmt: skip
    return [x for x in syncs if x.source_topic not in changed], [r for r in report if r.source_topic not in changed]


def plan_takeover(
    origin: SyncOrigin,
    source: PartitionLogs,
    target: PartitionLogs,
    state: StateReader,
    partitions: Sequence[Selected],
    committed: Mapping[TP, int],
    *,
    previous: Verdicts | None = None,
    skipped: Callable[[Headers], bool] = lambda _h: False,
    max_tail: int = 1_000_000,
    max_scan: int = 1_000_000,
) -> TakeoverPlan:
    """Recover ``partitions`` (source topic, target topic, partition) of ``origin``'s flow (the
    module's steps), judged by the state log as it stands now: ``state`` is read on to its end first,
    then ``previous`` (None: every partition resumes past its known copies) judges each partition's
    last copier on that reading. ``committed``: the flow group's committed positions; ``skipped``: the
    records the flow never copies (by their headers: a replication cycle's)."""
    if not partitions:
        return TakeoverPlan()
    read_now(state)
    crashed = previous.verdict() if previous is not None else always_crashed
    syncs, report = orphan_syncs(origin, source, target, state.index, partitions, committed, max_tail=max_tail)
    orphaned = crash_left(report)
    after_crash: list[TP] = []
    clean: list[TP] = []
    for topic, _target, partition in partitions:
        key = (topic, partition)
        (after_crash if crashed(topic, partition) or key in orphaned else clean).append(key)
    resume_at = _resume_points(origin.flow, source, after_crash, committed, state.index, syncs, skipped, max_scan)
    return TakeoverPlan(syncs, resume_at, report, clean)


def read_now(state: StateReader) -> None:
    """Read the state log on to its end before judging: a peer may have copied, and been killed,
    since the process started (618b1bf: judged by a view a slow audit held, a standby resumed at a
    killed peer's commits)."""
    state.refresh()


def crash_left(report: Sequence[Recovered]) -> set[TP]:
    """The partitions whose orphans say their copying ended in a crash, whoever synced last: a clean
    stop publishes the syncs of all its copies before it commits (8b5fec6: a peer killed before its
    first sync of a partition it was handed left the newest sync to a clean stop; 10,666 second copies)."""
    return {(r.source_topic, r.partition) for r in report if r.matched}


def _resume_points(
    flow: str,
    source: PartitionLogs,
    partitions: list[TP],
    committed: Mapping[TP, int],
    index: MappingIndex,
    recovered: list[OffsetSync],
    skipped: Callable[[Headers], bool],
    max_scan: int,
) -> dict[TP, int]:
    """Per partition whose known copies reach past its commit, where copying resumes (``resume``):
    the mapping's current life and the syncs just recovered are what is known."""
    if not partitions:
        return {}
    extra = MappingIndex()
    extra.add(recovered)
    bounds = source.bounds(partitions)
    out: dict[TP, int] = {}
    for key in partitions:
        if key not in bounds:
            continue
        low, end = bounds[key]
        topic, partition = key
        known = Coverage([*index.segments(flow, topic, partition), *extra.segments(flow, topic, partition)])
        start = max(low, committed.get(key, low))
        last = known.last
        if last is None or last < start:
            continue
        upto = min(last + 1, end)
        if upto - start > max_scan:
            _log.warning(
                "%s[%d]: %d records between the commit and the last known copy, more than %d: resuming at the "
                "commit (they are copied again)",
                topic, partition, upto - start, max_scan,
            )  # fmt: skip
            continue
        at = walk_resume(source, key, start, upto, known, skipped)
        if at > start:
            out[key] = at
    return out
