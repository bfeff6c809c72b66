"""Where a flow's source positions are kept: the two delivery modes.

``AtLeastOnceCommits``: positions are committed to the *source* group, and only up to what a
durable offset sync covers (``SyncLedger.commit_positions``), so a crash replays, never skips,
and every committed record has an exact mapping.

``TransactionalCommits`` (``exactly_once: true``): records, their offset syncs and the source
positions are written to the *target* in one transaction; the positions live in the target's
positions topic (``replicator.kafka.position_store``) and are read from there when partitions are assigned. A process
killed mid-transaction leaves an open transaction that its restarted successor (same
``transactional.id``) aborts at once, so read_committed consumers on the target never see a
duplicate or a record without its sync.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from replicator.errors import ReplicationError
from replicator.flow.control.outage import Outages
from replicator.flow.control.shutdown import StopBudget
from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.kafka.errors import kafka_error, transaction_failed
from replicator.kafka.position_store import PositionStore
from replicator.metrics.mm2_metrics import WindowedValue

__all__ = ["AbortTransaction", "AtLeastOnceCommits", "TransactionalCommits", "Commits"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
_TXN_CALL_TIMEOUT_S = 10  # one attempt; a coordinator that is down is waited out with back-off


class AbortTransaction(Exception):  # noqa: N818 (a signal, not an error)
    """Raised inside a transaction's drain when its records cannot all be acknowledged (the target
    was down longer than the transaction timeout): the transaction is aborted and the flow rewinds."""


class Commits:
    """The hooks a flow calls; each mode implements them.

    ``commit_ms``: how long each offset commit took, in ms (MM2's ``offset-commit-avg-time-ms``).
    """

    commit_ms: WindowedValue
    # a synchronous commit (at a revoke, the close, a give-up) failed: copies past the committed
    # positions are left behind, so the run's stop is no clean stop
    left_behind: bool = False

    def abort(self, why: str) -> None:
        """Give up what is not committed and rewind to the committed positions (exactly-once only)."""
        raise NotImplementedError

    def start(self) -> None: ...

    def consumed(self, tp: TP, next_offset: int) -> None: ...

    def after_batch(self, force: bool = False) -> None: ...

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None: ...

    def before_revoke(self, partitions: list[TopicPartition]) -> None: ...

    def after_lost(self, partitions: list[TopicPartition]) -> None:
        """``partitions`` were taken away without a revoke (the group gave them to another process)."""

    def close(self) -> None: ...

    def give_up(self) -> None:
        """The flow stops without waiting any longer for the target (``StopTimedOut``): keep only what
        is durable there; later hooks (a revoke while the consumer closes) wait for nothing."""

    def positions(self) -> dict[TP, int]:
        """Source positions this process has read up to (exactly-once) or is unsure of (empty)."""
        return {}

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The committed source positions of ``partitions``, wherever this mode keeps them."""
        raise NotImplementedError

    def unsettled(self) -> dict[TP, int | None]:
        """Partitions read past what the target holds for good: the position it holds (None: none).
        Empty at-least-once (an acknowledged copy is on the target)."""
        return {}

    @property
    def in_transaction(self) -> bool:
        return False


class AtLeastOnceCommits(Commits):
    """Stores (for the consumer's auto-commit) only positions a durable sync covers.

    ``assigned()`` is the flow's current assignment, kept by its rebalance callbacks, so the
    per-batch hook asks the consumer nothing and stores only partitions whose coverage moved.
    """

    def __init__(
        self,
        consumer: Consumer,
        ledger: SyncLedger,
        drain: Callable[[], None],
        flow: str,
        assigned: Callable[[], set[TP]],
    ) -> None:
        self._consumer = consumer
        self._ledger = ledger
        self._drain = drain
        self._flow = flow
        self._assigned = assigned
        self._given_up = False
        self.commit_ms = WindowedValue()  # storing positions for the auto-commit, and synchronous commits

    def after_batch(self, force: bool = False) -> None:
        if force:
            self._store(self._ledger.commit_positions(self._assigned()))
        else:
            self._store(self._ledger.advanced_positions(self._assigned()))

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return self._consumer.committed(partitions, timeout=10) if partitions else []

    def _store(self, positions: dict[TP, int]) -> None:
        if positions:
            started = time.monotonic()
            offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
            try:
                self._consumer.store_offsets(offsets=offsets)
            except KafkaException as exc:  # revoked meanwhile: the new owner replays from its commit
                _log.debug("flow %s: store_offsets: %s", self._flow, exc)
            self.commit_ms.add((time.monotonic() - started) * 1000)

    def before_revoke(self, partitions: list[TopicPartition]) -> None:
        if not self._given_up:
            self._drain()
        self._store(self._ledger.commit_positions((tp.topic, tp.partition) for tp in partitions))
        self._commit_sync()

    def close(self) -> None:
        self._drain()
        self.after_batch(force=True)
        self._commit_sync()

    def give_up(self) -> None:
        """Commit the positions durable syncs cover (the source is up); the rest is copied again."""
        self._given_up = True
        self.after_batch(force=True)
        self._commit_sync()

    def _commit_sync(self) -> None:
        started = time.monotonic()
        if not commit_sync(self._consumer, self._flow):
            # the 2026-12-02 soak: a revoke's commit refused (coordinator down) after a recopy into
            # a re-created remote topic, then a SIGTERM and a "clean" stop; the next owner resumed
            # at the old commits and copied the whole topic a second time (13,337 second copies)
            self.left_behind = True
        self.commit_ms.add((time.monotonic() - started) * 1000)


class TransactionalCommits(Commits):
    def __init__(
        self,
        consumer: Consumer,
        producer: Producer,
        store: PositionStore,
        ledger: SyncLedger,
        drain: Callable[[], None],
        flow: str,
        interval_s: float,
        outages: Outages | None = None,
        stop_budget: StopBudget | None = None,
    ) -> None:
        self._consumer = consumer
        self._producer = producer
        self._store = store
        self._ledger = ledger
        self._drain = drain
        self._flow = flow
        self._interval_s = interval_s
        self._outages = outages
        self._stop_budget = stop_budget
        self._positions: dict[TP, int] = {}  # next source offset per partition, as of this transaction
        self._written: dict[TP, int] = {}  # positions already in a committed transaction
        self._dirty = False  # something was produced in the open transaction
        self._next_commit = 0.0
        self.commits = 0
        self.commit_ms = WindowedValue()  # drain + positions + commit_transaction, per committed transaction

    def start(self) -> None:
        try:
            self._producer.init_transactions(60)
        except KafkaException as exc:
            raise ReplicationError(f"flow {self._flow}: cannot start transactions on the target: {exc}") from exc
        self._begin()

    def _begin(self) -> None:
        self._producer.begin_transaction()
        self._dirty = False
        self._next_commit = time.monotonic() + self._interval_s

    @property
    def in_transaction(self) -> bool:
        return self._dirty

    def consumed(self, tp: TP, next_offset: int) -> None:
        self._positions[tp] = next_offset
        self._dirty = True

    def positions(self) -> dict[TP, int]:
        return dict(self._positions)

    def unsettled(self) -> dict[TP, int | None]:
        """Copies in the open transaction vanish if it aborts: held back to the committed one."""
        return {tp: self._written.get(tp) for tp, o in self._positions.items() if self._written.get(tp) != o}

    def open_transaction_span(self) -> tuple[int, int]:
        """What an abort of the open transaction would drop: (source offsets consumed in it on the
        partitions whose last committed position is known, partitions consumed with none known yet)."""
        known = sum(o - self._written[tp] for tp, o in self._positions.items() if tp in self._written)
        unknown = sum(1 for tp in self._positions if tp not in self._written)
        return known, unknown

    def after_batch(self, force: bool = False) -> None:
        if self._dirty and (force or time.monotonic() >= self._next_commit):
            self._commit()

    def _commit(self) -> None:
        """Records acknowledged -> their syncs in the transaction -> positions -> commit."""
        started = time.monotonic()
        try:
            self._drain()
            changed = {tp: o for tp, o in self._positions.items() if self._written.get(tp) != o}
            self._store.write(self._producer, changed)
            self._waiting_out(lambda: self._producer.commit_transaction(_TXN_CALL_TIMEOUT_S))
            self._written.update(changed)
            self.commits += 1
            self.commit_ms.add((time.monotonic() - started) * 1000)
        except AbortTransaction as exc:
            self._abort(str(exc))
        except KafkaException as exc:
            err = kafka_error(exc)
            if not (isinstance(err, KafkaError) and transaction_failed(err)):
                raise ReplicationError(f"flow {self._flow}: transaction failed: {exc}") from exc
            try:
                self._abort(str(err.str()))
            except KafkaException as abort_exc:  # it failed fatally: nothing this producer writes counts
                raise ReplicationError(f"flow {self._flow}: transaction failed: {exc}; abort: {abort_exc}") from exc
        self._begin()

    def abort(self, why: str) -> None:
        self._abort(why)
        self._begin()

    def _abort(self, why: str) -> None:
        """Abort, forget what the transaction copied, and rewind to the target's committed positions."""
        _log.warning("flow %s: aborting transaction: %s", self._flow, why)
        self._waiting_out(lambda: self._producer.abort_transaction(_TXN_CALL_TIMEOUT_S))
        self._ledger.forget_all()
        assigned = self._consumer.assignment()
        for tp in self._waiting_out(lambda: self.committed(assigned)):
            if tp.offset >= 0:
                self._consumer.seek(tp)
            self._positions.pop((tp.topic, tp.partition), None)
            self._written.pop((tp.topic, tp.partition), None)

    def _waiting_out(self, call: Callable[[], _T]) -> _T:
        """``call()``, retried with back-off while the target is unreachable (a retriable error).

        librdkafka allows retrying ``commit_transaction``/``abort_transaction`` after a retriable
        error; an error that requires an abort, or any other, propagates at once.
        """
        while True:
            try:
                return call()
            except (KafkaException, ReplicationError) as exc:
                err = kafka_error(exc) or kafka_error(exc.__cause__ or exc)
                if self._outages is None or (err is not None and transaction_failed(err)):
                    raise
                if not self._outages.failed("target", exc):
                    raise
                if self._stop_budget is not None:
                    self._stop_budget.check("the transaction's commit or abort on the target")
                self._producer.poll(self._outages.delay_left("target"))

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        found = self._store.read([(tp.topic, tp.partition) for tp in partitions])
        return [TopicPartition(tp.topic, tp.partition, found.get((tp.topic, tp.partition), -1)) for tp in partitions]

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Start each new partition where the target's last committed transaction left it."""
        starts = []
        for tp in self.committed(partitions):
            offset = tp.offset if tp.offset >= 0 else OFFSET_INVALID  # none yet: auto.offset.reset
            starts.append(TopicPartition(tp.topic, tp.partition, offset))
            if tp.offset >= 0:  # known, so caught-up checks need not read the store again
                self._positions[(tp.topic, tp.partition)] = self._written[(tp.topic, tp.partition)] = tp.offset
        consumer.incremental_assign(starts)

    def before_revoke(self, partitions: list[TopicPartition]) -> None:
        if self._dirty:
            self._commit()
        for tp in partitions:
            self._positions.pop((tp.topic, tp.partition), None)
            self._written.pop((tp.topic, tp.partition), None)

    def after_lost(self, partitions: list[TopicPartition]) -> None:
        """The open transaction holds copies and positions of partitions another process may own by
        now, and started copying from the committed positions: committing it would put a second
        copy of those records on the target, visible to read_committed. It is aborted instead (every
        partition rewinds to its committed position; the ones kept are copied again in the next)."""
        lost = {(tp.topic, tp.partition) for tp in partitions}
        held = lost & self._positions.keys()
        for tp in lost:
            self._positions.pop(tp, None)
            self._written.pop(tp, None)
        if self._dirty and held:
            self.abort(f"partitions lost to the group while copying: {sorted(held)}")

    def close(self) -> None:
        """Commit what is open. The empty transaction begun after it is left for the producer's close
        to discard: aborting a transaction the broker never saw is refused under transaction.version 2."""
        if self._dirty:
            self._commit()

    def give_up(self) -> None:
        """Leave the open transaction uncommitted: the next ``init_transactions`` of this transactional
        id aborts it, and the flow resumes from the positions committed on the target."""
        self._dirty = False


def commit_sync(consumer: Consumer, flow: str) -> bool:
    """Synchronously commit the stored offsets; False when the commit failed (nothing stored is
    not a failure)."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        err = kafka_error(exc)
        if not (isinstance(err, KafkaError) and err.code() == KafkaError._NO_OFFSET):
            _log.warning("flow %s: commit failed: %s", flow, exc)
            return False
    return True
