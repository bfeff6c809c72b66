"""An admin operation off the copy loop's thread: one run at a time, its failure handed back."""

from __future__ import annotations

import threading

from replicator.flow.topics.background import BackgroundCall


def test_one_run_at_a_time_and_the_failure_reaches_the_caller_once():
    release = threading.Event()
    runs = []

    def operation() -> None:
        runs.append(1)
        release.wait(10)
        if len(runs) == 1:
            raise TimeoutError("no answer")

    call = BackgroundCall("test sync", operation)
    assert call.take_error() is None  # none ran yet
    assert call.start() and call.running
    assert not call.start()  # still running: not started twice
    assert call.take_error() is None  # a running call has no outcome yet
    release.set()
    call.join(10)
    error = call.take_error()
    assert isinstance(error, TimeoutError) and call.take_error() is None  # taken once
    assert call.start()
    call.join(10)
    assert call.take_error() is None and runs == [1, 1]
