"""The copy loop's batch pacing: full batches while busy, the first record at once while idle."""

from __future__ import annotations

from replicator.flow.copying.batching import Batcher


class _Queue:
    """A consumer's local queue: ``consume(n, timeout)`` as librdkafka answers it, calls recorded."""

    def __init__(self, queued: int = 0) -> None:
        self.queued = queued
        self.calls: list[tuple[int, float]] = []

    def consume(self, n: int, timeout: float) -> list[int]:
        self.calls.append((n, timeout))
        taken = min(n, self.queued)
        self.queued -= taken
        return list(range(taken))


def test_an_idle_flow_takes_what_is_fetched_and_waits_for_the_first_record_only():
    queue = _Queue(queued=3)
    batcher = Batcher(queue.consume, batch=100, busy_at=50, busy_wait_s=0.5, idle_wait_s=0.25)
    assert len(batcher.next()) == 3 and queue.calls == [(100, 0)]  # no wait for a batch to fill
    assert batcher.next() == [] and queue.calls[1:] == [(100, 0), (1, 0.25)]  # nothing queued: the first one
    assert not batcher.busy


def test_a_busy_flow_waits_for_full_batches_until_a_batch_comes_back_small():
    queue = _Queue(queued=260)
    batcher = Batcher(queue.consume, batch=100, busy_at=50, busy_wait_s=0.5, idle_wait_s=0.25)
    assert len(batcher.next()) == 100 and batcher.busy
    assert len(batcher.next()) == 100 and queue.calls[-1] == (100, 0.5)  # busy: wait to fill the batch
    assert len(batcher.next()) == 60 and batcher.busy
    assert len(batcher.next()) == 0 and not batcher.busy  # the burst is over: back to answering at once
    queue.queued = 1
    assert len(batcher.next()) == 1 and queue.calls[-1] == (100, 0)
