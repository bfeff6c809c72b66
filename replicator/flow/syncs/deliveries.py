"""What a flow has in flight to its target, and waiting for it: copies, offset syncs, state events.

``drain`` waits until every copy and sync is acknowledged and every sync it produced is published
(at-least-once commits only what durable syncs cover, so a revoke and a stop drain first); once the
flow is asked to stop it waits ``stop_timeout_seconds`` at most (``StopTimedOut``), and ``give_up``
then stops without what the target has not acknowledged. ``check`` turns a refused write into the
flow's failure, or, exactly-once, into an abort that rewinds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Producer

from replicator.config import FlowConfig
from replicator.errors import ReplicationError
from replicator.flow.control.outage import TRANSPORT_CODES
from replicator.flow.control.shutdown import StopBudget, StopTimedOut
from replicator.flow.copying import Copier
from replicator.flow.copying.native_copier import NativeCopier
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.flow.syncs.commits import AbortTransaction, Commits, TransactionalCommits
from replicator.kafka.errors import FATAL_CODES, PURGED_CODES
from replicator.kafka.state_log import StateLog
from replicator.metrics.stats import FlowStats

__all__ = ["Deliveries"]

_log = logging.getLogger(__name__)

# exactly-once: a record not acknowledged within the transaction timeout (a long outage), or one
# whose batch the target refused after an outage for its producer sequence (librdkafka then fails
# the transaction abortably and bumps the epoch at the abort), is copied again from the committed position
_REWINDABLE = TRANSPORT_CODES | {KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID}
# a write to a partition the target does not know: its remote topic may be gone (``remote_topic_gone``)
_TOPIC_GONE = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})
_DRAIN_SLICE_S = 1.0  # a drain waits in slices, watching outages between them


class Deliveries:
    """The flow's writes to its target: ``data`` (the copies' producer, the compiled copier's own or the
    Python producer) and ``beside`` (the syncs' and state events' producer where it is another one).
    ``watch()``: look at the clusters' health while a drain waits (health, metrics);
    ``remote_topic_gone(err)``: raise naming a remote topic deleted under the flow."""

    def __init__(
        self,
        flow: FlowConfig,
        copier: Copier,
        data: Producer | NativeCopier,
        beside: tuple[Producer, ...],
        ledger: SyncLedger,
        state: StateLog,
        stats: FlowStats,
        stop_budget: StopBudget,
        watch: Callable[[], object],
        remote_topic_gone: Callable[[KafkaError], None],
        fatal: Callable[[], KafkaError | None],
    ) -> None:
        self._flow, self._copier, self._data, self._beside = flow, copier, data, beside
        self._ledger, self._state, self._stats, self._budget = ledger, state, stats, stop_budget
        self._watch, self._remote_topic_gone, self._fatal = watch, remote_topic_gone, fatal

    def publish_syncs(self) -> None:
        if self._ledger.has_pending:
            self._ledger.publish()
            self._stats.syncs = self._ledger.published

    def poll(self) -> None:
        """Serve the delivery reports that came back (no wait)."""
        self._data.poll(0)
        for producer in self._beside:
            producer.poll(0)

    def drain(self) -> None:
        """Wait for every record and sync in flight, publishing the syncs they produce.

        Once the flow is asked to stop, it waits ``stop_timeout_seconds`` at most (``StopTimedOut``).
        """
        while True:
            self._data.flush(_DRAIN_SLICE_S)
            for producer in self._beside:
                producer.flush(_DRAIN_SLICE_S if len(self._data) == 0 else 0)
            self.check()
            if self.queued():
                self._watch()  # the target is down or slow: say so (health, metrics) and keep waiting
                self._budget.check(f"acknowledgement by {self._flow.target} of what is in flight")
                continue
            self._ledger.flush()
            if not self._ledger.has_pending and self.queued() == 0:
                return
            self.publish_syncs()

    def queued(self) -> int:
        """Messages not yet acknowledged: copies, syncs and lifecycle events."""
        return len(self._data) + sum(len(producer) for producer in self._beside)

    @property
    def client_failure(self) -> KafkaError | None:
        """What made a client of the flow unusable, as its callbacks saw it: a write refused (a fenced
        producer's reports, of copies or of state events) or a fatal client error. For an exception that
        lost its cause (``runtime._named``). A fatal error first, a purged message last: a purge is what a
        failure left behind (a fenced producer's queued copies), not the failure (test_fenced_flow saw
        "Local: Purged in queue" named while the state events' deliveries held the fencing)."""
        seen = [e for e in (self._copier.delivery_error, self._state.failed, self._fatal()) if e is not None]
        return min(seen, key=lambda e: (e.code() not in FATAL_CODES, e.code() in PURGED_CODES), default=None)

    def check(self) -> None:
        """Raise for a failed write; ``AbortTransaction`` if an exactly-once flow can retry it by rewinding."""
        copier, flow = self._copier, self._flow
        err, failed = copier.delivery_error, copier.transaction_failed
        # a refusal that is not rewindable is raised below, even when the transaction it failed is known
        if flow.exactly_once and (err.code() in _REWINDABLE if err is not None else failed is not None):
            copier.delivery_error = copier.transaction_failed = None  # one abort rewinds both
            why = err.str() if err is not None else f"the open transaction failed: {failed and failed.str()}"
            raise AbortTransaction(f"records not acknowledged by {flow.target}: {why}")
        if err is not None and err.code() in _TOPIC_GONE:
            self._remote_topic_gone(err)
        for err in (copier.delivery_error, copier.transaction_failed, self._state.failed):
            if err is not None:
                raise ReplicationError(
                    f"flow {flow.name}: write to {flow.target} failed: {err.str()}"
                ) from KafkaException(err)

    def give_up(self, exc: StopTimedOut, commits: Commits) -> None:
        """Stop without what the target has not acknowledged: commit only what is durable, drop the rest."""
        flow = self._flow
        records, queued = self._copier.in_flight, self.queued()
        if isinstance(commits, TransactionalCommits):  # everything since the last commit is dropped
            span, unknown = commits.open_transaction_span()
            _log.warning(
                "flow %s: stopping without committing the open transaction (%s): %d source offsets consumed "
                "since the last commit%s are dropped (%d of its records not acknowledged by %s); a restart "
                "resumes from the positions committed on %s",
                flow.name, exc, span,
                f" (plus {unknown} partitions with no committed position yet)" if unknown else "",
                records, flow.target, flow.target,
            )  # fmt: skip
        else:
            _log.warning(
                "flow %s: stopping without flushing %d copied records (%d messages with offset syncs) that %s "
                "did not acknowledge (%s): source offsets were committed only up to what durable offset syncs "
                "cover; a restart copies the rest again",
                flow.name, records, queued, flow.target, exc,
            )  # fmt: skip
        commits.give_up()
        for producer in (self._data, *self._beside):
            producer.purge()  # nothing waits on them now: the producer closes at once
