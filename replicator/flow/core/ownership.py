"""Which partitions a process holds, holds back, must commit a start for, and whether its stop is clean.

The group hands partitions to a process in rebalance callbacks (``assign``) and takes them away
(``revoke``, or ``lose`` when the session expired: no revoke, no commit). At-least-once, every
partition assigned without a start of its own is **held** back from the consumer until the flow's
loop has recovered it against the state log as it stands then (``core.takeover``), and is then
given to the consumer at its resume point (``taken_over``). A process's first assignment is no
exception: a recovery made at its start, before the group assigned anything, can be overtaken by
the owner it replaces, still copying until it is killed (seed 197 of the soak). A re-created
topic's partition not moved to its new start yet is held too (``relive``: its new life's copies
are matched first). A held partition revoked before its recovery ran is dropped: its next owner
recovers it.

Starts past known copies (``resume_due``) and a re-created topic's new starts (``reset_due``) are
committed by the loop (``resets``); refused in a rebalance or an outage, they are kept for the
partitions still assigned and tried again a second later.

**A clean stop** is one after which each partition's commit is where its copying ended, so the next
owner may resume there (``core.resume.PreviousRun``). This process's stop is no clean stop
(``left_copies``) when it lost partitions (no revoke, no commit), had a held partition taken away
before its recovery (this run never reconciled its commit with the copies past it: the 2026-12-02
soak, a process assigned everything while stopping, revoked 3 ms later, stopped "cleanly", and the
next read that as leave to resume at the commits), or had a partition revoked before its resume
past known copies was committed (the 30-minute soak: 30 second copies of a dead peer's last
transactions).

Exactly-once flows hold nothing back (a dead writer's transaction is aborted: its copies are not
there) and their stop is clean whatever was lost.

Single-threaded: the flow's loop and its rebalance callbacks, which run inside its ``poll``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from replicator.events import OffsetSync
from replicator.flow.core.logs import TP

__all__ = ["Ownership", "Start", "RETRY_RESETS_S"]

Start = tuple[TP, int | None]  # a partition given to the consumer at an offset (None: its committed position)
RETRY_RESETS_S = 1.0  # a start's commit refused in a rebalance or an outage: asked again after this long


class Ownership:
    def __init__(self, *, exactly_once: bool) -> None:
        self.exactly_once = exactly_once
        self.assigned: set[TP] = set()  # given to the consumer
        self._held: dict[TP, None] = {}  # in assignment order, waiting for their recovery
        self.resume_due: list[tuple[TP, int]] = []  # starts past known copies, assigned, to commit
        self.reset_due: list[tuple[TP, int]] = []  # a re-created topic's new starts, assigned, to commit
        # the syncs of a re-created topic's copies matched at assignment, published once its start is committed
        self.new_life_syncs: dict[TP, list[OffsetSync]] = {}
        self.newly_assigned: set[TP] = set()  # at-least-once: assigned, commit not yet held to the log start
        self.left_copies = False  # see the module's doc: this run's stop cannot vouch for its commits
        self.closing = False  # the consumer is being closed: its last revoke commits nothing
        self.takeover_retry_at = 0.0
        self.resets_retry_at = 0.0

    @property
    def clean(self) -> bool:
        """Whether this run's stop may vouch for its commits (the module's doc), a start not committed
        included: a resume past known copies or a re-created topic's new start still due leaves the
        commit behind copies (the simulator, seed 324: a takeover's resume refused while the
        coordinator was away, then a SIGTERM and a "clean" stop; the next owner resumed at the
        commit and copied the killed peer's 5 records again)."""
        return not (self.left_copies or self.resume_due or self.reset_due)

    # -- the group's callbacks ------------------------------------------------------------------
    def assign(self, starts: Sequence[Start], relive: Iterable[TP] = ()) -> list[Start]:
        """The group assigned ``starts``: those to give the consumer now; the others are held for
        recovery (at-least-once: every one without a start of its own, and ``relive``'s)."""
        if self.exactly_once:
            self.took([key for key, _offset in starts])
            return list(starts)
        always = set(relive)
        now: list[Start] = []
        for key, offset in starts:
            if key not in always and offset is not None:
                now.append((key, offset))
            else:
                self._held[key] = None
        self.took([key for key, _offset in now])
        return now

    def took(self, keys: Iterable[TP]) -> None:
        """``keys`` are the consumer's now."""
        keys = list(keys)
        if not self.exactly_once:
            self.newly_assigned.update(keys)
        self.assigned.update(keys)

    def revoke(self, keys: Iterable[TP]) -> set[TP]:
        """The group revoked ``keys``; returns those that were held (never the consumer's). The caller
        commits the others' positions before it gives them up."""
        keys = list(keys)
        held = self._drop_held(keys)
        if held and not self.exactly_once:
            self.left_copies = True  # taken away before their recovery (the module's doc)
        self.forget(keys)
        return held

    def lose(self, keys: Iterable[TP]) -> set[TP]:
        """The group gave ``keys`` to another process without a revoke (this one's session expired):
        copies past their commit stay behind. Returns those that were held."""
        keys = list(keys)
        self.left_copies = self.left_copies or not self.exactly_once
        held = self._drop_held(keys)
        self.forget(keys)
        return held

    def forget(self, keys: Iterable[TP]) -> None:
        """``keys`` are no longer this process's (revoked, lost): drop what was due for them."""
        gone = set(keys)
        self.reset_due = [(k, o) for k, o in self.reset_due if k not in gone]
        if any(k in gone for k, _o in self.resume_due):
            self.left_copies = True  # revoked before its resume past known copies was committed
        self.resume_due = [(k, o) for k, o in self.resume_due if k not in gone]
        self.newly_assigned -= gone
        for key in gone:
            self.new_life_syncs.pop(key, None)
        self.assigned -= gone

    def _drop_held(self, keys: Sequence[TP]) -> set[TP]:
        out = {k for k in keys if k in self._held}
        for k in out:
            del self._held[k]
        return out

    # -- the loop -------------------------------------------------------------------------------
    @property
    def held(self) -> list[TP]:
        """The partitions waiting for their recovery, in assignment order."""
        return list(self._held)

    def takeover_due(self, now: float) -> list[TP]:
        """The held partitions, when their recovery is due (not backing off after a failed one)."""
        return list(self._held) if self._held and now >= self.takeover_retry_at else []

    def takeover_failed(self, now: float, wait_s: float) -> None:
        """A cluster did not answer the recovery: the partitions stay held, asked again after ``wait_s``."""
        self.takeover_retry_at = now + wait_s

    def taken_over(self, keys: Sequence[TP], resume_at: dict[TP, int], new_starts: dict[TP, int]) -> list[Start]:
        """``keys`` (held) were recovered: give them to the consumer at ``resume_at`` (past known
        copies; None: the commit) or, for a re-created topic's, at ``new_starts``; both are committed
        by the loop (``resets``)."""
        starts: list[Start] = [(k, resume_at.get(k)) for k in keys if k not in new_starts]
        self._drop_held(keys)
        self.reset_due += list(new_starts.items())
        self.resume_due += [(k, o) for k, o in starts if o is not None]
        self.took(keys)
        return starts + list(new_starts.items())

    def moved(self, starts: dict[TP, int], syncs: Sequence[OffsetSync]) -> None:
        """A re-created topic's assigned partitions were moved to ``starts`` (their new life's, past
        ``syncs``' copies): commit them, then publish the syncs (``resets``)."""
        self.reset_due += list(starts.items())
        for sync in syncs:
            self.new_life_syncs.setdefault((sync.source_topic, sync.partition), []).append(sync)

    def matched(self, syncs: Sequence[OffsetSync]) -> None:
        """Syncs of a re-created topic's copies matched at a takeover, published once its start is committed."""
        for sync in syncs:
            self.new_life_syncs.setdefault((sync.source_topic, sync.partition), []).append(sync)

    def resets(self, now: float | None) -> tuple[list[tuple[TP, int]], list[tuple[TP, int]]] | None:
        """The starts to commit at ``now`` (None: at once, whatever a refusal's back-off), as (re-created
        topics' new starts, starts past known copies), handed over (``resets_refused`` gives them
        back); None when nothing is due."""
        if not (self.reset_due or self.resume_due) or (now is not None and now < self.resets_retry_at):
            return None
        reset, self.reset_due = self.reset_due, []
        resumed, self.resume_due = self.resume_due, []
        return reset, resumed

    def resets_refused(self, reset: list[tuple[TP, int]], resumed: list[tuple[TP, int]], now: float) -> None:
        """Their commit was refused (a rebalance, the coordinator moving): kept, and asked again after
        ``RETRY_RESETS_S`` (``forget`` drops those revoked meanwhile: their next owner positions them)."""
        self.reset_due = reset + self.reset_due
        self.resume_due = resumed + self.resume_due
        self.resets_retry_at = now + RETRY_RESETS_S

    def resets_committed(self, reset: list[tuple[TP, int]]) -> list[OffsetSync]:
        """The new starts ``reset`` are committed: the syncs of their matched copies, to publish now."""
        return [sync for key, _o in reset for sync in self.new_life_syncs.pop(key, [])]

    def take_newly_assigned(self) -> list[TP]:
        """The partitions assigned since the last call (their commits are held to the log start)."""
        out, self.newly_assigned = sorted(self.newly_assigned), set()
        return out
