"""Reading from the source only as fast as the target takes records: bounded memory in an outage.

Without it a flow whose target is down keeps consuming, and librdkafka keeps every produced record
in its local queue until the queue is full. ``Backpressure`` pauses every assigned source
partition while the target is waited for (``Outages``) or the producer's queue holds more than
``high`` records, and resumes them when the target answers and the queue is below ``low``.
Paused partitions keep their position: librdkafka resumes fetching at the next unread offset.

It also notices a *silent* target (a frozen broker or a dropped network keeps connections open, so
librdkafka reports nothing for a long time): records queued and none acknowledged for
``stall_s`` seconds start a wait for the target; an acknowledgement ends it. ``acknowledged`` and
``in_flight`` count the flow's records (``len(producer)`` also counts events and requests, so it
only bounds the queue).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sized

from confluent_kafka import Consumer, TopicPartition

from replicator.flow.control.outage import Outages

__all__ = ["Backpressure"]

_log = logging.getLogger(__name__)
# acknowledgements served within this time after a wait began were for requests sent before it
_EVIDENCE_S = 1.0


class Backpressure:
    def __init__(
        self,
        flow: str,
        consumer: Consumer,
        producer: Sized,
        outages: Outages,
        acknowledged: Callable[[], int],
        in_flight: Callable[[], int],
        *,
        high: int,
        low: int,
        stall_s: float = 5.0,
    ) -> None:
        self._flow = flow
        self._consumer = consumer
        self._producer = producer
        self._outages = outages
        self._acknowledged = acknowledged
        self._in_flight = in_flight
        self._high = high
        self._low = low
        self._stall_s = stall_s
        self._paused: set[tuple[str, int]] = set()
        self._acked = acknowledged()
        self._progress_at = time.monotonic()  # the last time the queue shrank (or was empty)
        self.paused = False

    def update(self) -> bool:
        """Pause or resume as the target and the queue say; True while reading is paused."""
        queued = len(self._producer)  # records, requests and events not served yet
        acked = self._acknowledged()
        now = time.monotonic()
        waiting = self._outages.is_waiting("target")
        if acked > self._acked:
            self._progress_at = now
            if waiting and self._outages.waited_s("target") > _EVIDENCE_S:
                self._outages.recovered("target")  # it acknowledges again
        elif waiting or self._in_flight() == 0:
            self._progress_at = now  # a stall is measured from the end of a wait, not across it
        elif now - self._progress_at > self._stall_s:
            self._outages.wait_for("target", f"nothing acknowledged for {self._stall_s:g} s")
        self._acked = acked
        full = queued >= self._high or (self.paused and queued > self._low)
        if self._outages.is_waiting("target") or full:
            self._pause(queued)
        elif self.paused:
            self._resume()
        return self.paused

    def _pause(self, queued: int) -> None:
        assignment = self._consumer.assignment()
        new = [tp for tp in assignment if (tp.topic, tp.partition) not in self._paused]
        if new:
            self._consumer.pause(new)
            self._paused.update((tp.topic, tp.partition) for tp in new)
        if not self.paused:
            why = "the target is down" if self._outages.is_waiting("target") else f"{queued} records await the target"
            _log.info("flow %s: reading paused: %s", self._flow, why)
            self.paused = True

    def _resume(self) -> None:
        self.resume_all()
        _log.info("flow %s: reading resumed", self._flow)

    def resume_all(self) -> None:
        """Resume the whole assignment, not only what this class paused: a partition paused when a
        rebalance crossed the pause is then not left paused for ever (resuming one that runs is a no-op)."""
        assignment = self._consumer.assignment()
        if assignment:
            self._consumer.resume(assignment)
        self._paused.clear()
        self.paused = False

    def forget(self, partitions: list[TopicPartition]) -> None:
        """Partitions revoked or lost: a later assignment of them starts unpaused (and is paused anew)."""
        for tp in partitions:
            self._paused.discard((tp.topic, tp.partition))
