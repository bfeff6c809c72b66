"""Where an at-least-once flow resumes copying after a crash: past the copies it knows, never past one it does not.

At-least-once commits a source position only after the syncs of the copies before it are durable,
so a process killed at any instant leaves copies past its last commit: on the target already, with
a durable offset sync, or matched by content by tail recovery. Resuming at the commit copies every
one of them a second time (tens of thousands per SIGKILL). Resuming at "one past the last known
copy" is not safe either: tail recovery matches by content, so its matches need not be contiguous
(a reverse flow's target can hold originals of records that sit, on the source, after records the
flow never copied), and resuming past them would skip those records for good.

Only after a crash (``PreviousRun``): after a clean stop the commit is where copying ended, and
copies past it mean the position was moved back on purpose, to copy again. The rule then: from the
committed position ``C`` (the source's log start without one), walk the
source's records in offset order and resume at the first one that is neither a known copy (in the
mapping's current life, or in the recovered syncs) nor one the flow never copies (``skipped``:
a record that would close a replication cycle). Offsets the reader never returns (transaction
markers, aborted records) are passed over as the copier passes over them. A read that stops short
resumes where it stopped: the rule may copy again, it never skips.

What can still be copied twice: a copy that reached the target but whose offset sync did not, and
that tail recovery could not match (a tail past its bound, a source record deleted meanwhile).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from replicator.client.failover_cost import interval_union
from replicator.client.mapping import Segment
from replicator.events import Event, Lifecycle, OffsetSync
from replicator.flow.core.logs import TP, Headers, PartitionLogs

__all__ = ["Coverage", "LEFT_COPIES", "PreviousRun", "always_crashed", "resume_point", "walk_resume"]

_CHUNK = 20_000  # records per read


class Coverage:
    """Which upstream offsets some segments say were copied (segments may overlap or touch)."""

    def __init__(self, segments: Iterable[Segment]) -> None:
        merged = interval_union((s.upstream_start, s.upstream_end) for s in segments)
        self._starts = [lo for lo, _hi in merged]
        self._spans = merged

    def __contains__(self, upstream: int) -> bool:
        i = bisect.bisect_right(self._starts, upstream) - 1
        return i >= 0 and self._spans[i][1] >= upstream

    @property
    def last(self) -> int | None:
        """The largest covered offset, None when nothing is."""
        return self._spans[-1][1] if self._spans else None


def resume_point(start: int, records: Iterable[tuple[int, bool]], known: Coverage) -> int:
    """Where copying resumes: ``start`` moved over ``records`` (``(offset, skipped)`` from ``start`` on,
    in order, as the reader returned them) while each is a known copy or ``skipped``: the first record
    that is neither, else one past the last record walked. Only what was read counts: a short read
    ends the walk where it ended."""
    position = start
    for offset, skipped in records:
        if not skipped and offset not in known:
            return offset
        position = offset + 1
    return position


def walk_resume(
    logs: PartitionLogs,
    key: TP,
    start: int,
    end: int,
    known: Coverage,
    skipped: Callable[[Headers], bool],
) -> int:
    """``resume_point`` over the source's records of ``[start, end)``, read in chunks through ``logs``:
    the first record neither known nor ``skipped``, else where the reading ended (never past it)."""
    topic, partition = key
    position = start
    while position < end:
        records = logs.read(topic, partition, position, min(end, position + _CHUNK))
        if not records:
            return position  # nothing returned: markers to the end, or a read cut short; never skip
        at = resume_point(position, [(r.offset, skipped(r.headers)) for r in records], known)
        if at <= records[-1].offset:
            return at  # a record the flow has not copied
        position = at
    return position


# The ``reason`` of a ``stopped`` that is no clean stop for every partition the run copied: it lost
# some (a session timeout, not a revoke), one was revoked before its resume past known copies was
# committed or while it was held for recovery, or a commit at a revoke or the close failed, so
# copies past their commit may stay behind. (The words stay: readers match them.)
LEFT_COPIES = "lost partitions before their copies were committed"


class PreviousRun:
    """How the flow's runs before this one ended, as the state log says (a ``StateView`` handler of
    ``lifecycle`` and ``offset_sync`` events; this run's own are left out).

    ``crashed``: the flow's previous run ended without a clean stop (its newest lifecycle event is
    not ``stopped``, or there is none). After a clean stop the commit is where copying ended, so
    known copies past it mean an operator moved the position back on purpose, to copy again (as
    MM2's ``connect offsets alter``): that is honoured, and only a crash resumes past the commit.

    Several processes of one flow: any other process's newer ``started`` counts as a crash, and so
    does another process that copied (emitted an offset sync) after the newest clean stop without a
    clean stop of its own. That is the peer that took the stopped process's partitions over and
    was then killed (the 2026-11-29 soak: a SIGTERMed process came back, read its own ``stopped`` as
    the newest word and resumed at commits its killed peer had left behind: 257 second copies of a
    transactional topic). Both are safe: the recovery at assignment (``takeover``) reads the commit
    as it stands then and never resumes below it. A process that crashed long ago and copied
    nothing since the last clean stop does not count, so a deliberate rewind after every process
    stopped is still honoured. Nor is a stop whose run had lost partitions (``LEFT_COPIES``: no
    revoke, no commit) clean.

    A clean stop speaks for the partitions the stopping process held, not for the flow: ``verdict``
    judges each partition by the process that emitted its newest offset sync, whose own clean stop
    after that sync is what makes the partition's commit the end of its copying. (The 2026-12-02
    soak: a process killed mid-copy left copies past its commits; a peer that held none of its
    partitions stopped cleanly, came back, read that stop as the flow's and resumed at the killed
    process's commits: 23 second copies.) A rewind is honoured for a partition whose last copier
    stopped cleanly; one whose last copier was killed resumes past its known copies. The newest sync
    cannot name a copier that was killed before its first sync of the partition: the recovery that
    finds its copies past the last sync takes them as the crash they are (``takeover.crash_left``).
    A process's runs may share one replicator id: each run is judged by its own end, never by a
    later run's stop (``_ended_cleanly``). Not thread-safe (``syncs.previous_runs`` shares it)."""

    def __init__(self, own_start: Lifecycle) -> None:
        self._own = own_start
        self._newest: Lifecycle | None = None
        # replicator id -> its lifecycle events, (emitted at, state, reason), in time order: with one id
        # for every run of a process (a StatefulSet's pod, a fixed --id), a run is what lies between
        # a ``started`` and the next lifecycle event of that id
        self._timeline: dict[str, list[tuple[int, str, str | None]]] = {}
        self._copied: dict[str, int] = {}  # replicator id -> its newest offset sync's time (this run's left out)
        self._last_sync: dict[tuple[str, int], tuple[int, str]] = {}  # partition -> its newest sync's (at, emitter)

    def take(self, event: Event) -> None:
        own = self._own
        if event.flow != own.flow:
            return
        if isinstance(event, OffsetSync):
            rid, at = event.replicator_id, event.emitted_at_ms
            if rid == own.replicator_id and at >= own.emitted_at_ms:
                return  # this run's own (one id for every run: an earlier run's are before its start)
            self._copied[rid] = max(self._copied.get(rid, 0), at)
            key = (event.source_topic, event.partition)
            if at >= self._last_sync.get(key, (-1, ""))[0]:
                self._last_sync[key] = (at, rid)
            return
        if not isinstance(event, Lifecycle):
            return
        if (event.replicator_id, event.state, event.emitted_at_ms) == (own.replicator_id, own.state, own.emitted_at_ms):
            return  # this run's own start, read back
        if self._newest is None or event.emitted_at_ms >= self._newest.emitted_at_ms:
            self._newest = event
        timeline = self._timeline.setdefault(event.replicator_id, [])
        entry = (event.emitted_at_ms, event.state, event.reason)
        if entry not in timeline:  # a view may hand an event twice
            bisect.insort(timeline, entry, key=lambda e: e[0])

    @property
    def crashed(self) -> bool:
        """Whether the flow as a whole ended without a clean stop (then every partition resumes past its copies)."""
        if self._newest is None or self._newest.state != "stopped" or self._newest.reason == LEFT_COPIES:
            return True
        stop = self._newest.emitted_at_ms
        return any(at > stop and not self._ended_cleanly(rid, at) for rid, at in self._copied.items())

    def _ended_cleanly(self, rid: str, at: int) -> bool:
        """Whether the run of ``rid`` that copied at ``at`` ended with a clean stop: the first lifecycle
        event of ``rid`` after ``at`` is a ``stopped`` without ``LEFT_COPIES``. A ``started`` there is
        a new run of the same id: the one that copied ended without a word (killed), whatever the new
        run said later (the simulator, seed 5: a run killed after its syncs, the next run of its id
        started and stopped cleanly holding nothing, and a peer resumed at the killed run's commits)."""
        for ms, state, reason in self._timeline.get(rid, ()):
            if ms < at or (ms == at and state == "started"):
                continue
            return state == "stopped" and reason != LEFT_COPIES
        return False

    def verdict(self) -> Callable[[str, int], bool]:
        """Per ``(source topic, partition)``, as the state log stands now: whether its copying ended
        in a crash (resume past its known copies) rather than at its commit. A partition no process
        ever synced follows the flow's ``crashed``."""
        if self.crashed:
            return always_crashed
        after = {key for key, (at, rid) in self._last_sync.items() if not self._ended_cleanly(rid, at)}
        return lambda topic, partition: (topic, partition) in after


def always_crashed(_topic: str, _partition: int) -> bool:
    """The verdict when nothing speaks for a clean stop: every partition resumes past its known copies."""
    return True
