"""At a flow's start, give an offset sync to every copy a killed process left without one.

At-least-once gates the source commit on durable syncs, so a process killed with SIGKILL loses no
record; but the copies it wrote to the target after its last durable sync stay on the target with
no row in the offset mapping: a target offset inside them has no reverse translation, and a
failback or an audit cannot say which source record they hold. The restart copies those records
again (at larger offsets), which fixes forward translation, not the orphans.

Recovery, per partition of the flow that has a mapping: the last copy the mapping knows is
``(U, D)``; if the target holds records past ``D``, read that tail (at most what was written
between two syncs) and the source from ``U + 1`` (and, for second copies, up to ``_LOOKAHEAD``
records before it), match them by content (``record_hash``: key, value, headers without the
provenance header, timestamp), in order, and publish the matched pairs as ``OffsetSync`` events
with reason ``recovered``, before copying resumes. A second copy is a killed writer's batch that
reached the target after the flow copied the same records again (``gap_recovery`` finds those
that land between two of the flow's copies).

Contract of the published syncs (``replicator.client.mapping.points_from_sync``): each maximal run
of matched pairs adjacent on both sides becomes one sync at its first pair, carrying the copy
before it (``(U, D)`` or the previous run's end) as ``previous_*`` (a boundary unless adjacent),
and, for runs of two or more, one at its last pair carrying the pair before it. Target records
that match nothing (another producer's, another flow's) get no sync: they are not copies.

Matching is greedy in offset order with a bounded look-ahead on the source, which skips source
records the flow never copies (provenance cycles, markers are never read). Partitions whose tail
exceeds ``max_tail`` records are left as they are and logged: a bound on the restart's cost.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from confluent_kafka import Producer

from replicator.client.group_offsets import committed_offsets
from replicator.client.mapping_index import MappingIndex
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ReplicationError
from replicator.events import OffsetSync, SyncReason
from replicator.flow.syncs.offset_sync import SyncOrigin
from replicator.flow.syncs.resume import Coverage, Headers, ResumeScan, always_crashed
from replicator.kafka.admin import admin_client
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.kafka.settings import consumer_group_id
from replicator.kafka.state_log import StateLog
from replicator.metadata.topic_ids import topic_ids
from replicator.tasks.audit import RangeReader, record_hash
from replicator.tasks.base import StateView

__all__ = [
    "match_copies",
    "recovery_syncs",
    "hashed_range",
    "TailRecovery",
    "Recovered",
    "Recovery",
    "recover_orphan_copies",
    "publish_syncs",
    "topic_pair_ids",
    "TopicIds",
]

_log = logging.getLogger(__name__)

_LOOKAHEAD = 10_000  # source records a copy may be ahead of the previous match (skipped records)
_CHUNK = 20_000  # records per read: memory holds hashes, not records

Hashed = tuple[int, int]  # (offset, record hash)
Bounds = tuple[int, int]  # a partition's [start, end) offsets
TopicIds = tuple[str | None, str | None]  # (source topic id, remote topic id); None: not known


def match_copies(
    target: Sequence[Hashed], source: Sequence[Hashed], lookahead: int = _LOOKAHEAD, expect_from: int | None = None
) -> list[Hashed]:
    """``(upstream, downstream)`` pairs, in target order: each target record is matched to the next
    source record with its content, scanning at most ``lookahead`` source records past the previous
    match (a copy in order); failing that, to the latest *earlier* source record with its content, and
    the order goes on from there (a second copy of records copied before: a killed writer's batch that
    reached the target after the flow had copied them again). Both sequences in offset order.

    ``expect_from``: the source offset the first in-order copy is looked for at (default: the first
    source record); the source records before it are there to be found as second copies only.
    """
    pairs: list[Hashed] = []
    seen: dict[int, list[int]] = {}  # hash -> indices of the source records scanned so far, ascending
    scanned = 0  # source[:scanned] are in ``seen``
    i = 0 if expect_from is None else bisect_left(source, expect_from, key=lambda r: r[0])

    def scan_to(end: int) -> None:
        nonlocal scanned
        for k in range(scanned, end):
            seen.setdefault(source[k][1], []).append(k)
        scanned = max(scanned, end)

    scan_to(i)
    for d, h in target:
        limit = min(len(source), i + lookahead)
        j = i
        while j < limit and source[j][1] != h:
            j += 1
        if j == limit:  # not ahead: a second copy of an earlier record, or no copy at all
            scan_to(limit)
            before = seen.get(h, [])
            k = bisect_left(before, i) - 1
            if k < 0:
                continue  # another producer's record, or a copy beyond the look-ahead: no pair
            j = before[k]  # the latest earlier record with this content
        pairs.append((source[j][0], d))
        i = j + 1
    return pairs


def recovery_syncs(
    origin: SyncOrigin,
    source_topic: str,
    target_topic: str,
    partition: int,
    last_copy: tuple[int, int] | None,
    pairs: Sequence[Hashed],
    timestamps: dict[int, int],
    ids: TopicIds = (None, None),
) -> list[OffsetSync]:
    """The syncs that prove every pair (see the module's contract); ``last_copy`` is ``(U, D)``, None
    when the partition has no mapping (the first run's first sync then carries no ``previous_*``).
    ``ids``: the (source, remote) topic ids of the topics the pairs were read from, the mapping's
    life they belong to; an id-less sync joins whatever life is current when it is read, which after
    a re-creation is another topic's (seed 197 of the soak: a takeover's matches in a remote topic
    deleted later put its copies into the recopied topic's mapping)."""
    out: list[OffsetSync] = []
    prev: tuple[int, int] | None = last_copy
    k = 0
    while k < len(pairs):
        start = k
        while k + 1 < len(pairs) and pairs[k + 1][0] == pairs[k][0] + 1 and pairs[k + 1][1] == pairs[k][1] + 1:
            k += 1
        first, last = pairs[start], pairs[k]
        out.append(_sync(origin, source_topic, target_topic, partition, first, prev, timestamps, ids))
        if k > start:
            out.append(_sync(origin, source_topic, target_topic, partition, last, pairs[k - 1], timestamps, ids))
        prev = last
        k += 1
    return out


def topic_pair_ids(
    source_conf: dict[str, object], target_conf: dict[str, object], pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], TopicIds]:
    """Per (source topic, remote topic): their ids on the two clusters now (None for a topic that does
    not exist). Raises ``KafkaException`` when a cluster does not answer."""
    source_ids = topic_ids(admin_client(source_conf), sorted({s for s, _t in pairs}))
    remote_ids = topic_ids(admin_client(target_conf), sorted({t for _s, t in pairs}))
    return {(s, t): (source_ids.get(s), remote_ids.get(t)) for s, t in pairs}


def _sync(
    origin: SyncOrigin,
    source_topic: str,
    target_topic: str,
    partition: int,
    pair: Hashed,
    previous: tuple[int, int] | None,
    timestamps: dict[int, int],
    ids: TopicIds,
) -> OffsetSync:
    return OffsetSync(
        flow=origin.flow,
        replicator_id=origin.replicator_id,
        source_cluster=origin.source_cluster,
        target_cluster=origin.target_cluster,
        source_topic=source_topic,
        target_topic=target_topic,
        partition=partition,
        upstream_offset=pair[0],
        downstream_offset=pair[1],
        upstream_timestamp_ms=timestamps.get(pair[0], -1),
        reason=SyncReason.RECOVERED,
        previous_upstream_offset=previous[0] if previous else None,
        previous_downstream_offset=previous[1] if previous else None,
        source_topic_id=ids[0],
        target_topic_id=ids[1],
    )


@dataclass(frozen=True)
class Recovered:
    """What recovery did for one partition: target records read past ``D``, copies given a sync."""

    source_topic: str
    partition: int
    tail: int
    matched: int


class TailRecovery:
    """Finds the orphan copies of a flow's partitions and returns the syncs that cover them."""

    def __init__(
        self,
        origin: SyncOrigin,
        source_conf: dict[str, object],
        target_conf: dict[str, object],
        *,
        max_tail: int = 1_000_000,
    ) -> None:
        self._origin = origin
        self._source_conf = dict(source_conf)
        self._target_conf = dict(target_conf)
        self._max_tail = max_tail

    def run(
        self, index: MappingIndex, partitions: list[tuple[str, str, int]], committed: dict[tuple[str, int], int]
    ) -> tuple[list[OffsetSync], list[Recovered]]:
        """Syncs for every orphan copy in ``partitions`` (source topic, target topic, partition).

        A partition with a mapping is searched past its last known copy ``(U, D)``; one without
        (killed before its first durable sync) from the target's log start, against the source
        from the flow's ``committed`` position (else the source's log start). The syncs carry the
        ids the two topics have on the clusters (``topic_pair_ids``), the life they are copies of; a
        topic whose id changes while it is read gives none.
        """
        flow = self._origin.flow
        syncs: list[OffsetSync] = []
        report: list[Recovered] = []
        if not partitions:
            return syncs, report
        ids = topic_pair_ids(self._source_conf, self._target_conf, [(s, t) for s, t, _p in partitions])
        with self._reading(partitions) as (bounds, source, target):
            for (topic, target_topic, partition), ((t_low, t_end), (s_low, s_end)) in bounds.items():
                segments = index.segments(flow, topic, partition)
                last: tuple[int, int] | None = None
                if segments:
                    seg = max(segments, key=lambda s: s.downstream_end)
                    last = (seg.upstream_end, seg.downstream_end)
                d_from = max(t_low, last[1] + 1) if last else t_low
                u_from = last[0] + 1 if last else max(s_low, committed.get((topic, partition), s_low))
                if t_end <= d_from:
                    continue
                if t_end - d_from > self._max_tail:
                    _log.warning(
                        "flow %s: %s[%d] has %d target records past its last offset sync; not recovered",
                        flow, target_topic, partition, t_end - d_from,
                    )  # fmt: skip
                    continue
                m = self._match(
                    source, target, (topic, target_topic, partition), (d_from, t_end), (u_from, s_low, s_end), last,
                    ids.get((topic, target_topic), (None, None)),
                )  # fmt: skip
                if m.tail:  # else markers or aborted records only
                    syncs += m.syncs
                    report.append(Recovered(topic, partition, m.tail, len(m.pairs)))
        return self._still(ids, syncs, report)

    def _still(
        self, ids: dict[tuple[str, str], TopicIds], syncs: list[OffsetSync], report: list[Recovered]
    ) -> tuple[list[OffsetSync], list[Recovered]]:
        """Drop the matches of topics deleted or created again while they were read: their records may be
        of two topics, and the flow's own check says the re-creation."""
        now = topic_pair_ids(self._source_conf, self._target_conf, list(ids))
        changed = {key[0] for key, before in ids.items() if now.get(key) != before}
        for (topic, remote), before in sorted(ids.items()):
            if topic in changed:
                _log.warning(
                    "flow %s: %s -> %s created again while its copies were matched (topic ids %s -> %s): "
                    "its matches are dropped", self._origin.flow, topic, remote, before, now.get((topic, remote)),
                )  # fmt: skip
        return [x for x in syncs if x.source_topic not in changed], [r for r in report if r.source_topic not in changed]

    @contextmanager
    def _reading(
        self, partitions: list[tuple[str, str, int]]
    ) -> Iterator[tuple[dict[tuple[str, str, int], tuple[Bounds, Bounds]], RangeReader, RangeReader]]:
        """Each partition's (target, source) log bounds (one missing on either side is left out) and
        a reader of each cluster, closed afterwards."""
        flow = self._origin.flow
        with throwaway_reader(self._target_conf, f"{flow}-recovery") as consumer:
            ends = log_bounds(consumer, [(t, p) for _s, t, p in partitions], skip_missing=True)
        with throwaway_reader(self._source_conf, f"{flow}-recovery") as consumer:
            source_ends = log_bounds(consumer, [(s, p) for s, _t, p in partitions], skip_missing=True)
        bounds = {
            (s, t, p): (ends[(t, p)], source_ends[(s, p)])
            for s, t, p in partitions
            if (t, p) in ends and (s, p) in source_ends
        }
        source = RangeReader(self._source_conf, f"{flow}-recovery-source")
        target = RangeReader(self._target_conf, f"{flow}-recovery-target")
        try:
            yield bounds, source, target
        finally:
            source.close()
            target.close()

    def _match(
        self,
        source: RangeReader,
        target: RangeReader,
        partition: tuple[str, str, int],
        tail_range: Bounds,
        upstream: tuple[int, int, int],
        last: tuple[int, int] | None,
        ids: TopicIds,
    ) -> _Matched:
        """Match the target's ``tail_range`` against the source from ``upstream``'s first offset (its
        log bounds beside it), the copy before them ``last`` (None: none known); the syncs carry ``ids``."""
        topic, target_topic, p = partition
        u_from, s_low, s_end = upstream
        tail = hashed_range(target, target_topic, p, *tail_range)
        if not tail:
            return _Matched(0, [], [], [])
        src_end = min(s_end, u_from + len(tail) + _LOOKAHEAD)
        # from before the last known copy too: the tail may hold second copies of records the
        # flow had copied again before a killed writer's batch reached the target
        src_from = max(s_low, u_from - len(tail) - _LOOKAHEAD) if last else u_from
        src_msgs = hashed_range(source, topic, p, src_from, src_end, keep_ts=True)
        timestamps = {o: ts for o, _h, ts in src_msgs}
        pairs = match_copies(tail, [(o, h) for o, h, _ts in src_msgs], expect_from=u_from)
        syncs = recovery_syncs(self._origin, topic, target_topic, p, last, pairs, timestamps, ids)
        return _Matched(len(tail), pairs, syncs, [o for o, _h, _ts in src_msgs])

    def new_life(
        self, partitions: list[tuple[str, str, int, int]], topic_id: str | None, remote_topic_id: str | None = None
    ) -> tuple[list[OffsetSync], dict[tuple[str, int], int]]:
        """The copies of a re-created topic's records the flow made before it noticed the new topic.

        Between the topic's re-creation and the check that notices it, the flow's consumer may copy
        records of the new topic (reset to its log start when the old position is out of range, or
        on from the old position when the new topic is already longer) under the old topic's id.
        ``partitions``: (source topic, target topic, partition, ``d_from``), ``d_from`` the target
        offset from which copies are in doubt (the end of the copies made before the last check
        that saw the old id). The target from there is matched by content against the new topic
        from its log start. A re-created *remote* topic is matched the same way from its offset 0
        (``d_from`` 0): what it holds of the source from its log start was recopied. Returns the
        syncs of the matches, stamped ``topic_id`` and ``remote_topic_id`` (the new life of the
        mapping), and per partition the first source offset none of them covers: copying goes
        on there, so a record copied before the flow noticed is not copied again unless a record
        before it was never copied (then from that record: nothing lost, some copied twice)."""
        syncs: list[OffsetSync] = []
        resume: dict[tuple[str, int], int] = {}
        since = {(s, t, p): d for s, t, p, d in partitions}
        if not since:
            return syncs, resume
        with self._reading(list(since)) as (bounds, source, target):
            for (topic, target_topic, partition), ((t_low, t_end), (s_low, s_end)) in bounds.items():
                d_from = max(t_low, since[(topic, target_topic, partition)], t_end - self._max_tail)
                m = self._match(
                    source, target, (topic, target_topic, partition), (d_from, t_end), (s_low, s_low, s_end), None,
                    (topic_id, remote_topic_id),
                )  # fmt: skip
                syncs += m.syncs
                matched = {u for u, _d in m.pairs}
                # copying goes on at the first source record read with no copy found
                resume[(topic, partition)] = next(
                    (o for o in m.read if o not in matched), m.read[-1] + 1 if m.read else s_low
                )
                if m.tail:
                    _log.info(
                        "flow %s: %s[%d]: %d of %d target records from offset %d are copies of the new topic's "
                        "records; its copying goes on at %d",
                        self._origin.flow, topic, partition, len(m.pairs), m.tail, d_from, resume[(topic, partition)],
                    )  # fmt: skip
        return syncs, resume


@dataclass(frozen=True)
class _Matched:
    """One partition's match: target records read, pairs, their syncs, source offsets read (in order)."""

    tail: int
    pairs: list[Hashed]
    syncs: list[OffsetSync]
    read: list[int]


def hashed_range(reader: RangeReader, topic: str, partition: int, start: int, end: int, keep_ts: bool = False) -> list:
    """``(offset, hash)`` (with ``keep_ts``: ``(offset, hash, timestamp)``) of ``[start, end)``, in chunks."""
    out: list = []
    position = start
    while position < end:
        msgs = reader.read(topic, partition, position, min(end, position + _CHUNK))
        if not msgs:
            break
        for m in msgs:
            h = record_hash(m.key(), m.value(), m.headers(), m.timestamp()[1])  # type: ignore[arg-type]
            out.append((m.offset(), h, m.timestamp()[1]) if keep_ts else (m.offset(), h))
        position = msgs[-1].offset() + 1  # type: ignore[operator]
    return out


@dataclass(frozen=True)
class Recovery:
    """What a flow's start found: how many ``syncs`` it published for orphan copies, and
    ``resume_at``: per source partition, where copying resumes when that is past its commit
    (``replicator.flow.syncs.resume``)."""

    syncs: int = 0
    resume_at: dict[tuple[str, int], int] = field(default_factory=dict)


def recover_orphan_copies(
    config: MirrorlakeConfig,
    flow: FlowConfig,
    replicator_id: str,
    producer: Producer,
    partitions: list[tuple[str, str, int]],
    view: StateView,
    skipped: Callable[[Headers], bool] = lambda _h: False,
    crashed: Callable[[str, int], bool] = always_crashed,
) -> Recovery:
    """Publish, durably, the syncs of the copies a killed process left without one; and say where
    each partition resumes so that no copy the flow knows is made twice.

    Call before the flow copies anything (its new copies would otherwise be taken for orphans'
    neighbours). ``partitions``: (source topic, target topic, partition) of the flow's selection;
    ``producer`` writes to the target's state topic outside any transaction. ``view``: the flow's
    state view, refreshed by the caller right before (``crashed`` is judged on that same reading),
    not closed here. ``skipped``: the
    records the flow never copies (by their headers: a replication cycle's). ``crashed``: per
    (source topic, partition), whether its copying ended without a clean stop of the process that
    copied it last (``resume.PreviousRun.verdict``); after a clean stop its committed position stands,
    unless copies past the last sync were found: those were made after it, by a process that crashed.
    """
    if not partitions:
        return Recovery()
    started = time.monotonic()
    origin = SyncOrigin(flow.name, replicator_id, flow.source, flow.target)
    source_conf = config.cluster(flow.source).client_config()
    recovery = TailRecovery(origin, source_conf, config.cluster(flow.target).client_config())
    offsets = committed_offsets(source_conf, consumer_group_id(flow), {source for source, _t, _p in partitions})
    committed = {(o.topic, o.partition): o.offset for o in offsets}
    syncs, report = recovery.run(view.index, partitions, committed)
    for r in report:
        _log.info(
            "flow %s: %s[%d]: %d target records past the last offset sync, %d recovered as copies",
            flow.name, r.source_topic, r.partition, r.tail, r.matched,
        )  # fmt: skip
    _log.info(
        "flow %s: orphan copies searched in %d partitions in %.1f s: %d syncs to publish",
        flow.name, len(partitions), time.monotonic() - started, len(syncs),
    )  # fmt: skip
    if syncs:
        publish_syncs(config, flow, producer, syncs)
    # copies without a sync are a crash's, whoever synced last: a clean stop publishes the syncs of
    # all its copies before it commits. (A process killed before its first sync of a partition it
    # was handed leaves the newest sync to the clean stop of the partition's previous owner.)
    orphaned = {(r.source_topic, r.partition) for r in report if r.matched}
    judged = [(crashed(s, p) or (s, p) in orphaned, (s, t, p)) for s, t, p in partitions]
    after_crash = [k for was_crash, k in judged if was_crash]
    clean = [f"{s}[{p}]" for was_crash, (s, _t, p) in judged if not was_crash]
    if clean:
        _log.info(
            "flow %s: %s: their last copier stopped cleanly: copying resumes at the committed positions",
            flow.name, ", ".join(clean),
        )  # fmt: skip
    if not after_crash:
        return Recovery(len(syncs), {})
    resume_at = _resume_points(source_conf, flow, after_crash, committed, view.index, syncs, skipped)
    return Recovery(len(syncs), resume_at)


def publish_syncs(config: MirrorlakeConfig, flow: FlowConfig, producer: Producer, syncs: list[OffsetSync]) -> None:
    """Emit ``syncs`` to the state topic and wait for them all to be acknowledged (or raise)."""
    state = StateLog(producer, config.state_topic)
    for sync in syncs:
        while True:
            try:
                state.emit(sync)
                break
            except BufferError:
                producer.poll(0.05)
    if not state.flushed():
        raise ReplicationError(f"flow {flow.name}: recovered offset syncs not acknowledged by {flow.target}")


def _resume_points(
    source_conf: dict[str, object],
    flow: FlowConfig,
    partitions: list[tuple[str, str, int]],
    committed: dict[tuple[str, int], int],
    index: MappingIndex,
    recovered: list[OffsetSync],
    skipped: Callable[[Headers], bool],
) -> dict[tuple[str, int], int]:
    """Per partition whose known copies reach past its commit, where copying resumes (``resume``):
    the mapping's current life and the syncs just recovered are what is known. Durable first: a
    resume past a recovered copy whose sync was lost would leave that copy without a mapping."""
    extra = MappingIndex()
    extra.add(recovered)
    with throwaway_reader(source_conf, f"{flow.name}-resume") as consumer:
        bounds = log_bounds(consumer, [(s, p) for s, _t, p in partitions], skip_missing=True)
    wanted = []
    for topic, _target, partition in partitions:
        if (topic, partition) not in bounds:
            continue
        low, _end = bounds[(topic, partition)]
        known = Coverage([*index.segments(flow.name, topic, partition), *extra.segments(flow.name, topic, partition)])
        wanted.append((topic, partition, max(low, committed.get((topic, partition), low)), known))
    scan = ResumeScan(source_conf, f"{flow.name}-resume", skipped)
    return scan.run(wanted, {k: end for k, (_low, end) in bounds.items()})
