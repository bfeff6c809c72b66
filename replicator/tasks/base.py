"""The periodic side of a flow: checkpoints, heartbeats, watermarks, config snapshots, audits.

They run on threads of their own with their own clients, beside the copy loop, so none of them
ever slows the hot path down; each emits events to the flow's state topic. A task that fails is
logged and retried at its next interval: replication state is best effort next to the data, and
the copy loop's health never depends on it.

Each task names its ``lane``: one thread per lane. The tasks that read the flow's ``StateView``
(checkpoints, audits, snapshots) share the ``state`` lane, as the view is not thread-safe; the
heartbeats and the watermarks each have a lane of their own, because their figures are only true
when fresh (a heartbeat's arrival time is its latency, a watermark the RPO an operator acts on) and
an audit of a busy partition or a checkpoint round of many groups takes seconds.

``StateTasks.final_round`` runs the tasks once more after the copy loop stopped (a batch run's
checkpoints and audits then reflect everything it copied).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Producer

from replicator.access.permissions import authorization_failure
from replicator.client.mapping_index import Life, MappingIndex
from replicator.client.state_reader import StateLogFollower
from replicator.client.state_snapshot import SNAPSHOT_TYPES, FlowSnapshot, load_snapshot
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.events import Event
from replicator.kafka.clients import new_producer
from replicator.kafka.settings import idempotent_producer_config
from replicator.kafka.state_log import StateLog
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.mm2_metrics import Mm2Metrics

__all__ = ["HEARTBEATS_LANE", "STATE_LANE", "WATERMARKS_LANE", "StateTask", "StateTasks", "TaskContext", "StateView"]

_log = logging.getLogger(__name__)


class StateView:
    """What the flow's state topics say so far: the offset mapping of this flow and its reverse.

    ``refresh`` reads only what arrived since the last call. The reverse flow (target->source)
    writes its syncs to the source cluster's state topic; they rename offsets of topics that came
    from the target back to the target's names. Tasks that need other event types ``subscribe``
    to them (before the first refresh) and keep what they need; the view keeps no event list.

    The first refresh starts from each flow's state snapshot where there is one
    (``replicator.client.state_snapshot``): the mapping from its segments, subscribers from its
    latest events, the log from its position. ``snapshot()`` is what the snapshot task writes.
    """

    def __init__(self, config: MirrorlakeConfig, flow: FlowConfig) -> None:
        self.index = MappingIndex()
        self._config = config
        self._flow = flow
        self._handlers: dict[str, list[Callable[[Event], None]]] = {}
        self._followers: list[StateLogFollower] | None = None
        self._latest = FlowSnapshot(flow.name)  # this flow's latest events (checkpoints, watermarks, ...)

    def subscribe(self, event_type: str, handler: Callable[[Event], None]) -> None:
        if self._followers is not None:
            raise RuntimeError("subscribe before the first refresh")
        self._handlers.setdefault(event_type, []).append(handler)

    def refresh(self) -> None:
        """Take new events: syncs into the mapping, subscribed types to their handlers."""
        if self._followers is None:
            self._followers = [self._start(alias, name) for alias, name in self._logs()]
        for follower in self._followers:
            read = follower.poll()
            self.index.add(read.events)
            for event in read.events:
                self._take(event)

    def _logs(self) -> list[tuple[str, str]]:
        """(cluster, flow) of each state log the view follows: this flow's, then its reverse's when
        the config has a reverse flow (nothing else writes reverse syncs to the source's log)."""
        logs = [(self._flow.target, self._flow.name)]
        reverse = f"{self._flow.target}->{self._flow.source}"
        if any(f.name == reverse for f in self._config.flows):
            logs.append((self._flow.source, reverse))
        return logs

    def _start(self, alias: str, flow_name: str) -> StateLogFollower:
        conf = self._config.cluster(alias).client_config()
        snap = load_snapshot(conf, self._config.state_topic, flow_name)
        if snap is not None:
            for (topic, partition), (target_topic, segments) in snap.segments.items():
                life = snap.lives.get((topic, partition), Life(None, None))
                self.index.seed(flow_name, topic, partition, target_topic, segments, *life)
            if flow_name == self._flow.name:
                self._latest.seen.update(snap.seen)
            for event in snap.latest.values():
                self._take(event)
        return self._follower(alias, snap.positions if snap else None)

    def _follower(self, alias: str, start_offsets: Mapping[int, int] | None) -> StateLogFollower:
        return StateLogFollower(
            self._config.cluster(alias).client_config(),
            self._config.state_topic,
            event_types=sorted({*SNAPSHOT_TYPES, *self._handlers}),  # all a complete snapshot keeps
            name=f"state-{self._flow.name}",
            start_offsets=start_offsets,
        )

    def fork(self, subscribers: Mapping[str, Sequence[Callable[[Event], None]]] | None = None) -> StateView:
        """A view of its own, for another thread, that starts where this one is: its mapping a copy,
        its followers at this one's read positions (the state log is not read again). Its handlers are
        ``subscribers`` only (event type -> handlers), each handed what the fork reads from then on:
        a handler subscribed to both views sees an event from each, so it must take one twice alike.
        Call on the thread that refreshes this view."""
        view = StateView(self._config, self._flow)
        for event_type, handlers in (subscribers or {}).items():
            for handler in handlers:
                view.subscribe(event_type, handler)
        view.index = copy.deepcopy(self.index)
        if self._followers is not None:
            view._followers = [
                view._follower(alias, follower.positions)
                for (alias, _flow), follower in zip(self._logs(), self._followers, strict=True)
            ]
        return view

    def _take(self, event: Event) -> None:
        if event.flow == self._flow.name:
            self._latest.keep(event)
        for handler in self._handlers.get(event.event_type, ()):
            handler(event)

    @property
    def started(self) -> bool:
        """Whether a task has read the state log through this view (none may need to: no groups)."""
        return self._followers is not None

    def snapshot(self) -> FlowSnapshot:
        """This flow's mapping and latest events as of what the view has read of the target's log."""
        if self._followers is None:
            self.refresh()
        assert self._followers is not None
        flow = self._flow.name
        segments = {
            (topic, partition): (
                self.index.target_topic(flow, topic) or "",
                self.index.segments(flow, topic, partition),
            )
            for _f, topic, partition in self.index.partitions(flow)
        }
        lives = {(topic, p): self.index.life(flow, topic, p) for _f, topic, p in self.index.partitions(flow)}
        return FlowSnapshot(
            flow, self._followers[0].positions, segments, dict(self._latest.latest), dict(self._latest.seen), lives
        )

    def close(self) -> None:
        for follower in self._followers or ():
            follower.close()


@dataclass
class TaskContext:
    """What every task of one flow shares."""

    config: MirrorlakeConfig
    flow: FlowConfig
    replicator_id: str
    state: StateLog  # the flow's state topic, written through the tasks' own producer
    remote_topics: Callable[[], dict[str, RemoteTopic]]  # the flow's current topic selection
    view: StateView
    metrics: Mm2Metrics = field(default_factory=Mm2Metrics)  # the flow's MM2-named metrics (checkpoint latency)

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        """Write ``event`` to the state topic; ``on_durable`` runs (in a ``poll``) once it is acknowledged."""
        while True:
            try:
                self.state.emit(event, on_durable)
                return
            except BufferError:
                self.state.producer.poll(0.05)


STATE_LANE = "state"  # the tasks that share the flow's StateView
HEARTBEATS_LANE = "heartbeats"
WATERMARKS_LANE = "watermarks"


class StateTask(Protocol):
    name: str
    interval_s: float
    in_final_round: bool
    lane: str  # tasks of one lane share a thread (``STATE_LANE`` for a task that reads the view)

    def run(self) -> None: ...

    def close(self) -> None: ...


_SLOW_S = 2.0  # a state task's run longer than this is logged


class StateTasks:
    """Runs tasks on their intervals until ``stop``, a thread per lane; ``final_round`` runs each once.

    A task runs at a fixed rate (every ``interval_s`` from the start, at once again when a run took
    longer), so a heartbeat every second stays one per second whatever the run takes.

    With several processes per flow only one runs the tasks: ``is_leader`` says whether this
    process leads now (the flow decides: the owner of the first selected partition). A process
    that led last keeps the final round, which runs every task of every lane in their order (the
    state snapshot last) on the main lane's thread, once the other lanes' threads have ended.
    """

    def __init__(self, ctx: TaskContext, tasks: list[StateTask], is_leader: Callable[[], bool] = lambda: True) -> None:
        self.ctx = ctx
        self.tasks = tasks
        self._is_leader = is_leader
        self.leading = False
        self.errors: dict[str, str] = {}
        self._error_kinds: dict[str, str] = {}  # task -> exception type of its current failure
        self._stop = threading.Event()
        self._final_round = False  # set by ``stop``: the thread runs each task once more before it ends
        self._thread: threading.Thread | None = None  # the main lane's: it runs the final round

    def lanes(self) -> dict[str, list[StateTask]]:
        """Each lane's tasks in their order, the main lane (``STATE_LANE`` when any task has it) first."""
        lanes: dict[str, list[StateTask]] = {}
        if any(task.lane == STATE_LANE for task in self.tasks):
            lanes[STATE_LANE] = []
        for task in self.tasks:
            lanes.setdefault(task.lane, []).append(task)
        return lanes

    def start(self) -> None:
        if not self.tasks:
            return
        flow = self.ctx.flow.name
        (_main, main_tasks), *others = self.lanes().items()
        threads = [
            threading.Thread(target=self._loop, args=(tasks, ()), name=f"state-{flow}-{lane}", daemon=True)
            for lane, tasks in others
        ]
        self._thread = threading.Thread(
            target=self._loop, args=(main_tasks, threads), name=f"state-{flow}", daemon=True
        )
        for thread in (*threads, self._thread):
            thread.start()

    def _loop(self, tasks: list[StateTask], others: Sequence[threading.Thread]) -> None:
        """One lane's schedule; the main lane's (``others`` are the rest) then waits for them and
        runs the final round."""
        started = time.monotonic()
        due = {task.name: started for task in tasks}
        while not self._stop.is_set():
            self.leading = self._is_leader()
            if not self.leading:
                self._stop.wait(0.5)
                due = dict.fromkeys(due, time.monotonic())
                continue
            for task in tasks:
                if time.monotonic() >= due[task.name]:
                    self._run(task)
                    due[task.name] = max(due[task.name] + task.interval_s, time.monotonic())
            self.ctx.state.producer.poll(0)
            self._stop.wait(max(0.01, min(due.values()) - time.monotonic()))
        for thread in others:
            thread.join()
        if self._final_round:
            self._run_final_round()

    def _run_final_round(self) -> None:
        for task in self.tasks:
            if task.in_final_round:
                self._run(task)

    def _run(self, task: StateTask) -> None:
        """Run one task; a failure is logged at WARNING when it starts or changes kind, not every retry.
        A run longer than ``_SLOW_S`` is logged: the other tasks of its lane waited."""
        started = time.monotonic()
        try:
            task.run()
        except Exception as exc:  # noqa: BLE001 (logged and retried: the copy loop must go on)
            kind = type(exc).__name__
            if self._error_kinds.get(task.name) != kind:
                # refused by an ACL: say which one to grant (asked once per change of kind, not every retry)
                reason = authorization_failure(self.ctx.config, self.ctx.flow, exc) or exc
                _log.warning("flow %s: %s failed, retrying at its interval: %s", self.ctx.flow.name, task.name, reason)
                self.errors[task.name] = f"{type(reason).__name__}: {reason}"
            elif not self.errors.get(task.name, "").startswith("MissingPermissionError"):
                self.errors[task.name] = f"{kind}: {exc}"  # the latest reason of the same kind
            self._error_kinds[task.name] = kind
            return
        finally:
            took = time.monotonic() - started
            if took > _SLOW_S:
                flow = self.ctx.flow.name
                _log.info("flow %s: state task %s took %.1f s (its lane %s waited)", flow, task.name, took, task.lane)
        self._error_kinds.pop(task.name, None)
        if self.errors.pop(task.name, None) is not None:
            _log.info("flow %s: %s works again", self.ctx.flow.name, task.name)

    def stop(
        self, *, final_round: bool = False, force: bool = False, flush_s: float = 30, join_s: float | None = None
    ) -> None:
        """Stop the thread; ``final_round`` runs each task once more if this process leads (or ``force``);
        state events not acknowledged within ``flush_s`` are dropped (each task emits them again).

        ``join_s``: wait that long at most for the thread, the final round included (a task waiting for
        a cluster that is down, or whose client has not found the cluster again after an outage); if
        it is still running, its clients are left open to the process's exit.
        """
        self._final_round = final_round and (force or self.leading or self._is_leader())
        self._stop.set()
        if self._thread is None:
            if self._final_round:
                self._run_final_round()
        else:
            self._thread.join(join_s)
            if self._thread.is_alive():
                _log.info("flow %s: state tasks still busy; not waiting for them", self.ctx.flow.name)
                return
        self.ctx.state.producer.flush(flush_s)
        if flush_s == 0:
            self.ctx.state.producer.purge()
        for task in self.tasks:
            task.close()
        self.ctx.view.close()


def task_producer(target_conf: dict[str, Any], client_id: str) -> Producer:
    return new_producer(idempotent_producer_config(target_conf, client_id))
