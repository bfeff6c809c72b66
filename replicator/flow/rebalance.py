"""The consumer group's callbacks and the takeover of held partitions, performing ``Ownership``'s decisions.

librdkafka calls ``assign``, ``revoke`` and ``lost`` inside the flow's poll; the decisions (which
partitions to hold for recovery, when a stop stops being clean, which starts are due) are
``core.ownership.Ownership``'s, the recovery's are ``core.takeover``'s. This performs them on the
consumer: assignments at their starts, commits of the revoked partitions' positions and of the
starts due, and what the flow's other pieces must forget of a partition it gave up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition

from replicator.config import FlowConfig
from replicator.errors import MirrorlakeError
from replicator.flow.control.outage import Outages, transient
from replicator.flow.control.rejoin import RejoinWatchdog
from replicator.flow.core.ownership import Ownership, Start
from replicator.flow.core.sync_ledger import TP
from replicator.flow.syncs.commits import Commits
from replicator.flow.syncs.tail_recovery import Recovery
from replicator.flow.topics.lives_keeper import LivesKeeper
from replicator.kafka.errors import kafka_error, kafka_error_reason
from replicator.metrics.stats import FlowStats

__all__ = ["Rebalance", "positions"]

_log = logging.getLogger(__name__)

# a commit refused because the group moved on: the member was fenced or a rebalance runs
_REBALANCE_CODES = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
)


class Recover(Protocol):
    def __call__(self, selected: list[tuple[str, str, int]]) -> Recovery:
        """Recover ``selected`` (source topic, target topic, partition) against the state log now."""
        ...


def refused_for_now(exc: KafkaException) -> bool:
    """A commit refused by an outage or because the group moved on (to try again, not to fail for)."""
    err = kafka_error(exc)
    return transient(exc) or (err is not None and err.code() in _REBALANCE_CODES)


class Rebalance:
    """One flow's rebalance callbacks and takeovers (the loop's thread; callbacks run inside its poll).

    ``recover``: the takeover's recovery of the selected held partitions (``recover_orphan_copies``
    judged on the state log as it stands); ``remote()``: the flow's selection (source topic ->
    remote topic name); ``forget(keys, partitions)``: what the flow's other pieces keep for
    partitions given up (copier, ledger, backpressure)."""

    def __init__(
        self,
        flow: FlowConfig,
        consumer: Consumer,
        own: Ownership,
        commits: Commits,
        lives: LivesKeeper,
        rejoin: RejoinWatchdog,
        outages: Outages,
        stats: FlowStats,
        *,
        recover: Recover,
        remote: Callable[[], dict[str, str]],
        forget: Callable[[set[TP], list[TopicPartition]], None],
    ) -> None:
        self._flow, self._consumer, self._own, self._commits = flow, consumer, own, commits
        self._lives, self._rejoin, self._outages, self._stats = lives, rejoin, outages, stats
        self._recover, self._remote, self._forget = recover, remote, forget

    # -- the group's callbacks -------------------------------------------------------------------
    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: assigned %s", self._flow.name, names(partitions))
        if self._own.closing:  # a join that ended while leaving (``leave_group``): the client assigns them
            return
        self._rejoin.assigned()
        if self._flow.exactly_once:
            self._commits.on_assign(consumer, partitions)
            self._own.assign([((tp.topic, tp.partition), None) for tp in partitions])
        else:
            relive = self._lives.relive((tp.topic, tp.partition) for tp in partitions)  # a re-created topic's
            starts = [((tp.topic, tp.partition), _start(tp)) for tp in partitions]
            consumer.incremental_assign(positions(self._own.assign(starts, relive)))
            if held := self._own.held:
                _log.info("flow %s: %s held until the copies their last owner left are recovered",
                          self._flow.name, names([TopicPartition(t, p) for t, p in held]))  # fmt: skip
        self._stats.assigned = sorted(self._own.assigned)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: revoked %s", self._flow.name, names(partitions))
        if not self._own.closing:
            self._commits.before_revoke(partitions)
        held = self._own.revoke((tp.topic, tp.partition) for tp in partitions)
        self._gone(partitions)
        self._stats.revoked += len(partitions)
        _unassign_all_but(consumer, partitions, held)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.warning("flow %s: lost %s", self._flow.name, names(partitions))
        self._rejoin.lost(time.monotonic())
        self._commits.after_lost(partitions)
        held = self._own.lose((tp.topic, tp.partition) for tp in partitions)
        self._gone(partitions)
        _unassign_all_but(consumer, partitions, held)

    def _gone(self, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._lives.forgot(gone)
        self._forget(gone, partitions)
        self._stats.assigned = sorted(self._own.assigned)
        for tp in gone:
            self._stats.lag.pop(tp, None)

    # -- the loop --------------------------------------------------------------------------------
    def take_over(self) -> None:
        """Recover the held partitions' copies (``core.takeover``), then assign them past those copies.

        On the loop's thread, outside any rebalance callback, against the state log as it stands now:
        a recovery made at start, before the group assigned anything, could be overtaken by a peer
        that copied on and was then killed (seed 197 of the soak: 139 second copies of a partition
        whose start recovery ran while its owner still copied). A cluster that does not answer keeps
        them held and is asked again after its back-off (they would only wait for it anyway)."""
        held = self._own.held
        remote = self._remote()
        relive = [k for k in held if k in self._lives.reliving]
        selected = [(t, remote[t], p) for t, p in held if t in remote and (t, p) not in relive]
        try:
            new_starts = self._lives.match_relived(relive)
            recovery = self._recover(selected)
        except (KafkaException, MirrorlakeError) as exc:
            if not self._outages.blame(("source", "target"), exc):
                raise
            wait = max(1.0, self._outages.delay_left("source"), self._outages.delay_left("target"))
            self._own.takeover_failed(time.monotonic(), wait)
            return
        starts = self._own.taken_over(held, recovery.resume_at, new_starts)
        self._consumer.incremental_assign(positions(starts))
        for (t, p), offset in starts:
            if offset is not None and (t, p) not in new_starts:
                _log.info("flow %s: %s[%d] resumes at %d, past the copies its last owner made",
                          self._flow.name, t, p, offset)  # fmt: skip
        self._stats.assigned = sorted(self._own.assigned)

    def commit_due(self, now: float | None) -> None:
        """Commit the starts the ownership has due at ``now`` (None: at once, whatever a refusal's back-off)."""
        if (due := self._own.resets(now)) is not None:
            self._commit(*due)

    def _commit(self, reset: list[tuple[TP, int]], resumed: list[tuple[TP, int]]) -> None:
        """Commit a re-created topic's partitions' new starts, then publish the syncs of the copies
        matched before them and say so (``LivesKeeper.committed``); and the starts past known copies
        (the flow's position then says where it stands). Refused in a rebalance or an outage: again in 1 s."""
        if reset and not self._flow.exactly_once:
            # stored too: the auto-commit would otherwise commit the old life's stored position over
            # this one (a seek keeps it), and a crash before the next copy would resume there
            try:
                self._consumer.store_offsets(offsets=positions(reset))
            except KafkaException as exc:  # not assigned any more: its next owner positions it
                _log.debug("flow %s: store_offsets: %s", self._flow.name, exc)
        try:
            self._consumer.commit(offsets=positions(reset + resumed), asynchronous=False)
        except KafkaException as exc:
            if not refused_for_now(exc):
                raise
            _log.warning("flow %s: start positions not committed yet (%s): trying again in 1 s",
                         self._flow.name, kafka_error_reason(exc))  # fmt: skip
            self._own.resets_refused(reset, resumed, time.monotonic())
            return
        self._lives.committed([key for key, _offset in reset], self._own.resets_committed(reset))


def _unassign_all_but(consumer: Consumer, partitions: list[TopicPartition], held: set[TP]) -> None:
    """Partitions taken away while held for recovery were never assigned to the consumer: only the
    others are unassigned (the client would refuse the whole list). Last in the callback: the
    positions of the others are committed first."""
    if held:
        consumer.incremental_unassign([tp for tp in partitions if (tp.topic, tp.partition) not in held])


def positions(starts: list[Start] | list[tuple[TP, int]]) -> list[TopicPartition]:
    """The consumer's view of ``starts`` (None: no start of its own, the committed position)."""
    return [TopicPartition(t, p, OFFSET_INVALID if offset is None else offset) for (t, p), offset in starts]


def _start(tp: TopicPartition) -> int | None:
    """A partition's start as the group gave it (None: no start of its own)."""
    return None if tp.offset == OFFSET_INVALID else tp.offset


def names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
