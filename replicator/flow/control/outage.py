"""What a flow is waiting for while a cluster is down, and when to try again.

A broker outage is not a flow failure: librdkafka reconnects by itself and keeps what was
produced queued, so the flow's job is to *wait well*. ``Outages`` keeps one entry per cluster the
flow is waiting for (``source`` or ``target``) with the reason, and:

- logs one WARNING when a wait starts (or its reason changes) and one INFO when it ends, never a
  line per retry;
- schedules the next attempt of a failed operation with tenacity's bounded exponential back-off
  (0.5 s doubling up to 10 s), so a dead broker is never polled in a busy loop;
- probes a waited-for cluster with one metadata request per back-off step and clears the wait when
  it answers (librdkafka has no "broker is back" event).

``transient`` decides which errors are waits rather than failures: a timeout, or a retriable or
transport-level ``KafkaError``. Authorisation, unknown topic, invalid config stay failures.
Single-threaded except ``on_client_error`` (librdkafka's error callback, served by poll on the
flow thread too) and the readers of ``waiting`` (the health endpoint), which only read a copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException
from tenacity import RetryCallState, wait_exponential

from replicator.errors import ClusterUnreachableError, ReplicationError
from replicator.kafka.connectivity import MetadataProbe
from replicator.kafka.errors import kafka_error, kafka_error_reason

__all__ = ["Outages", "Side", "transient", "TRANSPORT_CODES", "ADMIN_ERRORS"]

_log = logging.getLogger(__name__)

Side = Literal["source", "target"]

# librdkafka's codes for "cannot talk to the cluster right now" (as opposed to "not allowed", "bad request")
TRANSPORT_CODES = frozenset(
    {
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,  # a broker's handle torn down mid-request (it went away or restarted)
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError._WAIT_COORD,  # the group's coordinator not found yet (a commit while the cluster is down)
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)

_BACKOFF = wait_exponential(multiplier=0.5, min=0.5, max=10.0)
_PROBE_TIMEOUT_S = 1.0


# what a flow's admin operation (topic refresh, config and ACL sync) may raise for an outage: these
# go to ``Outages.blame``, anything else fails the flow
ADMIN_ERRORS = (KafkaException, ReplicationError, TimeoutError)


def transient(exc: BaseException) -> bool:
    """True if ``exc`` means "the cluster is not reachable now", so waiting and retrying is right."""
    if isinstance(exc, TimeoutError | ClusterUnreachableError):
        return True
    cause = exc.__cause__
    if cause is not None and cause is not exc and transient(cause):
        return True
    err = kafka_error(exc) if isinstance(exc, KafkaException) else None
    return err is not None and (err.code() in TRANSPORT_CODES or bool(err.retriable()))


def describe(exc: BaseException) -> str:
    """A one-line reason for a log or health entry (librdkafka's text, not a repr)."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return kafka_error_reason(exc)


@dataclass
class _Wait:
    reason: str
    since: float
    attempts: int = 0
    next_try: float = 0.0


class Outages:
    """The clusters one flow waits for; ``clients`` maps each side to its librdkafka settings."""

    def __init__(self, flow: str, clusters: Mapping[Side, str], clients: Mapping[Side, dict[str, Any]]) -> None:
        self._flow = flow
        self._clusters = dict(clusters)
        self._clients = dict(clients)
        self._waits: dict[Side, _Wait] = {}
        self._probes: dict[Side, MetadataProbe] = {}
        self.recoveries = 0  # waits that ended (a counter for metrics and tests)
        self.fatal: KafkaError | None = None  # a client's last fatal error (the instance is unusable)

    # -- reading -----------------------------------------------------------------------------
    @property
    def waiting(self) -> dict[str, str]:
        """``{"target": "cluster B: Connection refused ..."}`` for every side waited for now."""
        return {side: f"cluster {self._clusters[side]}: {w.reason}" for side, w in list(self._waits.items())}

    def is_waiting(self, side: Side) -> bool:
        return side in self._waits

    def waited_s(self, side: Side) -> float:
        wait = self._waits.get(side)
        return time.monotonic() - wait.since if wait else 0.0

    # -- entering and leaving a wait ---------------------------------------------------------
    def wait_for(self, side: Side, reason: str) -> None:
        """Start (or keep) waiting for ``side``; logs once per new wait or changed reason."""
        wait = self._waits.get(side)
        if wait is None:
            wait = self._waits[side] = _Wait(reason, time.monotonic())
            wait.next_try = wait.since + self._delay(wait)
            _log.warning(
                "flow %s: waiting for the %s cluster %s: %s (retrying with back-off up to 10 s)",
                self._flow, side, self._clusters[side], reason,
            )  # fmt: skip
        else:
            wait.reason = reason  # the same wait: health shows the newest reason, the log keeps quiet

    def recovered(self, side: Side) -> None:
        wait = self._waits.pop(side, None)
        if wait is not None:
            self.recoveries += 1
            _log.warning(
                "flow %s: the %s cluster %s answers again after %.1f s; resuming",
                self._flow, side, self._clusters[side], time.monotonic() - wait.since,
            )  # fmt: skip

    def failed(self, side: Side, exc: BaseException) -> bool:
        """Note a failed operation on ``side``: True (and a wait) if transient, False if a real failure."""
        if not transient(exc):
            return False
        self.wait_for(side, describe(exc))
        self._retry_later(self._waits[side])
        return True

    def _retry_later(self, wait: _Wait) -> None:
        wait.attempts += 1
        wait.next_try = time.monotonic() + self._delay(wait)

    def blame(self, sides: tuple[Side, ...], exc: BaseException) -> bool:
        """Like ``failed`` for an operation touching several sides: each side that does not answer a
        probe now starts a wait (the last side if all answer: the operation still failed)."""
        if not transient(exc):
            return False
        silent = [side for side in sides if not self._answers(side)]
        for side in silent or sides[-1:]:
            self.failed(side, exc)
        return True

    def _answers(self, side: Side) -> bool:
        """One metadata request; a client whose request failed is not asked again.

        A probe client made while the cluster was frozen can stay without a usable broker
        connection after the cluster answers again (seen with librdkafka 2.16: every request waits
        for a broker that never comes up, for minutes), so each attempt after a failure starts
        from a fresh client.
        """
        try:
            self._probe(side).request(_PROBE_TIMEOUT_S)
        except KafkaException:
            self._probes.pop(side, None)
            return False
        return True

    def delay_left(self, side: Side) -> float:
        """Seconds until the next attempt on ``side`` is due (0 if not waiting)."""
        wait = self._waits.get(side)
        return max(0.0, wait.next_try - time.monotonic()) if wait else 0.0

    def due(self, side: Side) -> bool:
        """Whether an operation on ``side`` may be tried now (always, unless waiting and backing off)."""
        wait = self._waits.get(side)
        return wait is None or time.monotonic() >= wait.next_try

    def client_error_callback(self, side: Side) -> Callable[[KafkaError], None]:
        """An ``error_cb`` for a client of ``side``: all brokers down starts a wait; others are logged."""

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal = err
                _log.error("flow %s: fatal %s client error: %s", self._flow, side, err.str())
            elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE):
                if err.code() == KafkaError._ALL_BROKERS_DOWN:
                    self.wait_for(side, "all brokers are down")
            else:
                _log.debug("flow %s: %s client error: %s", self._flow, side, err.str())

        return on_error

    # -- probing -----------------------------------------------------------------------------
    def probe_due(self) -> None:
        """For each waited-for side whose back-off has passed: one metadata request; clears on an answer.

        Blocks at most about one second per waited-for side; call it from the flow's loop.
        """
        for side in list(self._waits):
            if not self.due(side):
                continue
            if self._answers(side):
                self.recovered(side)
            else:
                self._retry_later(self._waits[side])

    def _probe(self, side: Side) -> MetadataProbe:
        if side not in self._probes:
            self._probes[side] = MetadataProbe(self._clients[side])
        return self._probes[side]

    @staticmethod
    def _delay(wait: _Wait) -> float:
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = wait.attempts + 1
        return float(_BACKOFF(state))
