"""The state tasks' threads: a lane each, the last round at a stop on the main lane, a bounded stop.

After a frozen state cluster came back, a state task whose client had not found the cluster again
held the last round of a stopping replicator past its exit grace (CI, 2026-11-29): the stop's wait
for that round is now bounded by what is left of the stop budget. A slow audit held heartbeats and
watermarks for 23.6 s in a broker-fault run (2026-12-04): they run on lanes of their own now.
Pure logic: the tasks are plain objects, the producer and view only record what the stop did to them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from replicator.tasks.base import HEARTBEATS_LANE, STATE_LANE, WATERMARKS_LANE, StateTasks
from tests.waiting import wait_for


@dataclass
class _Task:
    name: str
    in_final_round: bool = True
    interval_s: float = 3600.0
    lane: str = STATE_LANE
    hold: threading.Event | None = None  # the run after the first waits for it
    runs: list[str] = field(default_factory=list)  # the thread each run ran on
    ran_at: list[float] = field(default_factory=list)  # when each run started (monotonic)
    closed: bool = False

    def run(self) -> None:
        self.runs.append(threading.current_thread().name)
        self.ran_at.append(time.monotonic())
        if self.hold is not None and len(self.runs) > 1:
            self.hold.wait()

    def close(self) -> None:
        self.closed = True


@dataclass
class _Producer:
    flushed: list[float] = field(default_factory=list)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self.flushed.append(timeout)
        return 0

    def purge(self) -> None:
        pass


def _tasks(*tasks: _Task, leading: bool = True) -> tuple[StateTasks, _Producer, SimpleNamespace]:
    producer = _Producer()
    view = SimpleNamespace(closed=False)
    view.close = lambda: setattr(view, "closed", True)
    ctx = SimpleNamespace(flow=SimpleNamespace(name="A->B"), state=SimpleNamespace(producer=producer), view=view)
    return StateTasks(ctx, list(tasks), is_leader=lambda: leading), producer, view  # type: ignore[arg-type]


def _first_round_done(*tasks: _Task) -> None:
    wait_for(lambda: all(t.runs for t in tasks), "the tasks' first round")


def test_the_final_round_runs_each_task_once_more_on_the_tasks_thread_then_closes() -> None:
    checkpoints, audit, heartbeat = _Task("checkpoints"), _Task("audit"), _Task("heartbeats", in_final_round=False)
    tasks, producer, view = _tasks(checkpoints, audit, heartbeat)
    tasks.start()
    _first_round_done(checkpoints, audit, heartbeat)
    tasks.stop(final_round=True)
    assert checkpoints.runs == ["state-A->B", "state-A->B"]
    assert audit.runs == ["state-A->B", "state-A->B"]
    assert heartbeat.runs == ["state-A->B"]
    assert producer.flushed == [30] and view.closed
    assert checkpoints.closed and audit.closed and heartbeat.closed


def test_a_follower_process_runs_no_final_round() -> None:
    checkpoints = _Task("checkpoints")
    tasks, _producer, view = _tasks(checkpoints, leading=False)
    tasks.start()
    tasks.stop(final_round=True)
    assert checkpoints.runs == [] and checkpoints.closed and view.closed


def test_a_bounded_stop_leaves_a_stuck_final_round_to_the_process_exit() -> None:
    hold = threading.Event()
    audit = _Task("audit", hold=hold)
    tasks, producer, view = _tasks(audit)
    tasks.start()
    _first_round_done(audit)
    try:
        tasks.stop(final_round=True, join_s=0.2, flush_s=10)
        # returned while the audit still waits: nothing flushed or closed under its feet
        assert not hold.is_set()
        assert len(audit.runs) == 2
        assert producer.flushed == [] and not audit.closed and not view.closed
    finally:
        hold.set()


def test_tasks_never_started_still_get_their_final_round_on_the_caller() -> None:
    checkpoints = _Task("checkpoints")
    tasks, producer, view = _tasks(checkpoints)
    tasks.stop(final_round=True, flush_s=10)
    assert checkpoints.runs == [threading.current_thread().name]
    assert producer.flushed == [10] and view.closed


def test_heartbeats_and_watermarks_go_on_while_a_state_task_is_stuck() -> None:
    hold = threading.Event()
    audit = _Task("audit", interval_s=0.01, hold=hold)  # its second run hangs until released
    beat = _Task("heartbeat-emitter", interval_s=0.01, lane=HEARTBEATS_LANE, in_final_round=False)
    marks = _Task("watermarks", interval_s=0.01, lane=WATERMARKS_LANE)
    snapshot = _Task("state-snapshot")
    tasks, _producer, _view = _tasks(audit, beat, marks, snapshot)
    tasks.start()
    try:
        wait_for(lambda: len(audit.runs) == 2, "the audit's second run, which hangs")
        beats, watermarks = len(beat.runs), len(marks.runs)
        wait_for(lambda: len(beat.runs) > beats + 5 and len(marks.runs) > watermarks + 5, "runs beside the hung audit")
        assert len(audit.runs) == 2 and len(snapshot.runs) == 1  # its own lane waited, as it must (one view)
    finally:
        hold.set()
    tasks.stop(final_round=True)
    threads = {beat.runs[0], marks.runs[0], audit.runs[0]}
    assert threads == {"state-A->B-heartbeats", "state-A->B-watermarks", "state-A->B"}
    # the final round: every lane's tasks in their order on the main lane, the snapshot last
    assert marks.runs[-1] == audit.runs[-1] == snapshot.runs[-1] == "state-A->B"
    assert marks.ran_at[-1] > audit.ran_at[-1] and snapshot.ran_at[-1] > marks.ran_at[-1]
    assert beat.runs.count("state-A->B") == 0  # heartbeats have no final round
