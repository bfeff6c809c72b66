"""One replicator process of an at-least-once flow, in the simulation: the runner's calls, in its order.

``SimProcess.main`` is ``replicator.flow.runner.FlowRunner``'s sequence for an at-least-once flow,
cut where the real process waits (``yield``): the started event's acknowledgement, each turn of
the loop (whose poll serves the group's callbacks), a drain, the durable publication of recovered
syncs, the stopped event. The decisions are the core's (``Ownership``, ``plan_takeover``,
``PreviousRun``, ``SyncLedger``); what this module adds is what the runner's clients do: positions,
produce, stored and committed offsets (``AtLeastOnceCommits``: only what a durable sync covers).

Acknowledgements come from the world (``land_copies``, ``land_state``): a copy lands on the target
when the world says so and its delivery report waits for the process's next poll, as librdkafka's
do; a kill loses every report not yet served.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mirrorlake.simulation.group import Callback
from mirrorlake.simulation.logs import SimLogs
from mirrorlake.simulation.state_topic import Pending, SimView
from replicator.events import Event, Lifecycle
from replicator.flow.core.logs import TP
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.ownership import Ownership
from replicator.flow.core.resume import LEFT_COPIES, PreviousRun
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.flow.core.takeover import plan_takeover

if TYPE_CHECKING:
    from mirrorlake.simulation.world import World

__all__ = ["SimProcess", "InFlight"]


@dataclass(frozen=True)
class InFlight:
    """A copy produced and not acknowledged yet."""

    partition: int
    upstream: int
    hash: int
    timestamp: int
    produced_step: int


@dataclass
class _Emitter:
    """The ``StateEmitter`` the ledger writes to: the process's producer of state events."""

    queue: deque[Pending] = field(default_factory=deque)

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        self.queue.append(Pending(event, on_durable))


class SimProcess:
    """Incarnation ``incarnation`` of the process in ``slot`` (one replicator id per slot, as a pod's)."""

    def __init__(self, world: World, slot: int, incarnation: int) -> None:
        self.world = world
        self.slot, self.incarnation = slot, incarnation
        self.member = (slot, incarnation)
        self.replicator_id = f"r{slot}"
        s = world.settings
        self.topic, self.target_topic = world.source.topic, world.target.topic
        self.origin = SyncOrigin(s.flow, self.replicator_id, "A", "B")
        self.state = _Emitter()
        self.copies: dict[int, deque[InFlight]] = {p: deque() for p in range(s.partitions)}
        self.stale = dict.fromkeys(range(s.partitions), 0)  # copies in flight whose report is dropped
        self.reports: deque[tuple[InFlight, int]] = deque()  # (copy, downstream offset), served at the next poll
        self.durable: deque[Callable[[], None]] = deque()  # acknowledged state events' callbacks, likewise
        self.ledger = SyncLedger(self.origin, s.offset_lag_max, self.state, lambda _s: None)
        self.own = Ownership(exactly_once=False)
        self.positions: dict[int, int] = {}
        self.stored: dict[int, int] = {}
        self.previous: PreviousRun | None = None
        self.view: SimView | None = None
        self.term = False  # SIGTERM asked
        self.frozen = False  # SIGSTOP
        self.left_behind = False  # a synchronous commit failed (``Commits.left_behind``)
        self.joined = False
        self.done = False
        self.waiting: str | None = None  # what the generator waits on at its last yield
        self._gen: Iterator[str] = self.main()

    # -- stepping --------------------------------------------------------------------------------
    def step(self) -> None:
        """Run to the next point where the real process would wait."""
        try:
            self.waiting = next(self._gen)
        except StopIteration:
            self.done = True
            self.waiting = None

    def _key(self, partition: int) -> TP:
        return (self.topic, partition)

    def _log(self, text: str) -> None:
        self.world.note(f"p{self.slot}.{self.incarnation}: {text}")

    # -- the runner's sequence -------------------------------------------------------------------
    def main(self) -> Iterator[str]:
        started = Lifecycle(flow=self.origin.flow, replicator_id=self.replicator_id, state="started")
        yield from self._emit_durably(started)
        self.previous = PreviousRun(started)
        self.view = SimView(self.world.state_topic, [self.previous.take])
        self.view.refresh()  # the state tasks' first read (``previous`` hears it)
        self.world.group.join(self.member)
        self.joined = True
        flush_every = self.world.settings.sync_interval_steps
        turns = 0
        while not self.term:
            yield "loop"
            for callback in self.world.group.take_callbacks(self.member):
                yield from self._serve(callback)
            if self.own.takeover_due(self.world.now_s):
                yield from self._take_over()
            if (due := self.own.resets(self.world.now_s)) is not None:
                self._commit_resets(*due)
            self._fetch_and_produce()
            self._serve_reports()
            turns += 1
            if turns % flush_every == 0:
                self.ledger.flush()
            if self.ledger.has_pending:
                self.ledger.publish()
            self._store(self.ledger.advanced_positions(self.own.assigned))
        # the clean stop: the starts still due, commits.close (drain, store every covered position,
        # commit), then stopped
        if (due := self.own.resets(None)) is not None:
            self._commit_resets(*due)
        yield from self._drain()
        self._store(self.ledger.commit_positions(self.own.assigned))
        self._commit_sync()
        unclean = not self.own.clean or self.left_behind
        stopped = Lifecycle(
            flow=self.origin.flow,
            replicator_id=self.replicator_id,
            state="stopped",
            reason=LEFT_COPIES if unclean else None,
        )
        yield from self._emit_durably(stopped)
        self.own.closing = True
        self.world.group.leave(self.member)  # the close's revoke commits nothing
        self.joined = False
        self._log("stopped" + (" (left copies)" if unclean else " cleanly"))

    def _emit_durably(self, event: Event) -> Iterator[str]:
        landed: list[bool] = []
        self.state.emit(event, on_durable=lambda: landed.append(True))
        while not landed:
            yield "flush"
            self._serve_reports()

    # -- rebalance callbacks ---------------------------------------------------------------------
    def _serve(self, callback: Callback) -> Iterator[str]:
        keys = [self._key(p) for p in callback.partitions]
        if callback.kind == "assign":
            self._log(f"assigned {list(callback.partitions)}")
            now = self.own.assign([(k, None) for k in keys])  # no start of its own: every one held
            self._start(now)
        elif callback.kind == "revoke":
            self._log(f"revoked {list(callback.partitions)}")
            if not self.own.closing:  # commits.before_revoke: drain, store, commit
                yield from self._drain()
                self._store(self.ledger.commit_positions(keys))
                self._commit_sync()
            self.own.revoke(keys)
            self._forget(callback.partitions)
            self.world.group.revoked(self.member, callback.partitions)
        else:
            self._log(f"lost {list(callback.partitions)}: joins the group again")
            self.own.lose(keys)
            self._forget(callback.partitions)
            for p in callback.partitions:
                for window in self.world.lost_at.get((self.member, p), []):
                    if window[1] is None:
                        window[1] = self.world.step
            self.world.group.join(self.member)  # librdkafka rejoins after a session it lost

    def _forget(self, partitions: tuple[int, ...]) -> None:
        """The copier's and ledger's ``forget``: reports not handed over yet, and those of copies still
        in flight, are of a session that ended; they are dropped (their copies are orphans, recovered
        by content by the partition's next owner), as the copiers drop them."""
        gone = set(partitions)
        self.reports = deque((c, d) for c, d in self.reports if c.partition not in gone)
        for p in partitions:
            self.positions.pop(p, None)
            self.stored.pop(p, None)
            self.stale[p] = len(self.copies[p])
        self.ledger.forget([self._key(p) for p in partitions])

    def _start(self, starts: list[tuple[TP, int | None]]) -> None:
        """Positions of partitions given to the consumer: their start, else the committed one, else 0."""
        for (_t, p), offset in starts:
            self.positions[p] = offset if offset is not None else self.world.group.committed.get(p, 0)

    # -- takeover --------------------------------------------------------------------------------
    def _take_over(self) -> Iterator[str]:
        held = self.own.held
        assert self.view is not None
        source, target = SimLogs(self.world.source), SimLogs(self.world.target)
        selected = [(t, self.target_topic, p) for t, p in held]
        committed = {self._key(p): o for p, o in self.world.group.committed.items()}
        plan = plan_takeover(self.origin, source, target, self.view, selected, committed, previous=self.previous)
        if plan.syncs:
            landed: list[bool] = []
            last = len(plan.syncs) - 1
            for i, sync in enumerate(plan.syncs):
                self.state.emit(sync, on_durable=(lambda: landed.append(True)) if i == last else None)
            while not landed:  # publish_syncs: flushed before anything is assigned
                yield "flush"
                self._serve_reports()
        self.previous = None  # a clean stop speaks for the commits of the first assignment only
        starts = self.own.taken_over(held, plan.resume_at, {})
        self._log(
            f"took over {[p for _t, p in held]}: recovered {len(plan.syncs)} syncs, resume at "
            f"{ {p: o for (_t, p), o in plan.resume_at.items()} }, clean {[p for _t, p in plan.clean]}"
        )
        self._start(starts)

    def _commit_resets(self, reset: list[tuple[TP, int]], resumed: list[tuple[TP, int]]) -> None:
        offsets = {p: o for (_t, p), o in reset + resumed}
        if self.world.group.commit(self.member, offsets):
            self.own.resets_committed(reset)
        else:
            self.own.resets_refused(reset, resumed, self.world.now_s)

    # -- copying ---------------------------------------------------------------------------------
    def _fetch_and_produce(self) -> None:
        batch = self.world.settings.batch
        for p in sorted(self.positions):
            if self._key(p) not in self.own.assigned:
                continue
            records, after = self.world.source.data_from(p, self.positions[p], batch)
            for r in records:
                self.copies[p].append(InFlight(p, r.offset, r.hash, r.timestamp, self.world.step))
            self.positions[p] = after

    def _serve_reports(self) -> None:
        while self.reports:
            copy, downstream = self.reports.popleft()
            self.ledger.delivered(
                self.topic, copy.partition, copy.upstream, downstream, copy.timestamp, self.target_topic
            )
        while self.durable:
            self.durable.popleft()()

    def _drain(self) -> Iterator[str]:
        """``FlowRunner._drain``: wait for every copy and state event in flight, publishing their syncs."""
        while True:
            self._serve_reports()
            if self.queued():
                yield "drain"
                continue
            self.ledger.flush()
            if not self.ledger.has_pending:
                return
            self.ledger.publish()

    def queued(self) -> int:
        return sum(len(q) for q in self.copies.values()) + len(self.state.queue) + len(self.reports) + len(self.durable)

    # -- offsets ---------------------------------------------------------------------------------
    def _store(self, positions: dict[TP, int]) -> None:
        for (_t, p), offset in positions.items():
            if self._key(p) in self.own.assigned:
                self.stored[p] = offset

    def _commit_sync(self) -> None:
        if self.stored and not self.world.group.commit(self.member, dict(self.stored)):
            self.left_behind = True

    def auto_commit(self) -> bool:
        """librdkafka's auto-commit of the stored offsets (a background thread: it runs while the loop waits)."""
        return bool(self.stored) and self.world.group.commit(self.member, dict(self.stored))

    # -- what the world does to it -------------------------------------------------------------
    def land_copies(self, partition: int, n: int) -> int:
        """The target acknowledges up to ``n`` copies of ``partition`` (in order); returns how many."""
        queue = self.copies[partition]
        done = 0
        while queue and done < n:
            copy = queue.popleft()
            downstream = self.world.land_copy(copy, self.member)
            if self.stale[partition]:
                self.stale[partition] -= 1  # of a session that ended: its report is dropped
            else:
                self.reports.append((copy, downstream))
            done += 1
        return done

    def land_state(self, n: int) -> int:
        done = 0
        while self.state.queue and done < n:
            pending = self.state.queue.popleft()
            self.world.state_topic.land(pending.event)
            if pending.on_durable is not None:
                self.durable.append(pending.on_durable)
            done += 1
        return done

    def killed(self, copies_share: float, state_share: float) -> tuple[int, list[Event]]:
        """SIGKILL: of what was sent and not acknowledged, a prefix lands (what the brokers had received);
        returns how many copies landed and which state events."""
        copies = sum(self.land_copies(p, int(len(queue) * copies_share)) for p, queue in self.copies.items())
        events = [pending.event for pending in list(self.state.queue)[: int(len(self.state.queue) * state_share)]]
        self.land_state(len(events))
        self.done = True
        return copies, events
