"""A flow's source topics' lives: a topic deleted and created again, and records deleted before their copy.

Two ways a source partition's offsets stop meaning what the flow thinks, both silent in MM2:

* **Re-created topic.** Deleted and created under the same name, a topic gets a new topic id and
  its offsets start again: the flow's committed position (say 10,000) then names a record of the
  new topic, and a flow that resumed there skipped the new topic's first 10,000 records. Each
  refresh of the flow's topics asks the source for their ids (``replicator.metadata.topic_ids``)
  and compares them with the ids the flow copied under (at start: the mapping's current life, kept
  by the offset syncs' ``source_topic_id``). A new id is a ``TopicRecreated`` event (and the
  ``mirrorlake_topics_recreated`` metric); then ``on_topic_recreated`` decides: ``stop`` fails
  the flow naming the topic, ``continue`` (the default) copies the new topic from its log start
  into the same remote topic. Its syncs carry the new id, so the mapping starts a new life and
  never translates an offset of the new topic through copies of the old. The runner drains what
  is in flight first (the old life's syncs keep the old id), then moves each partition of the topic
  it holds to its new start, and commits (and stores, for the auto-commit) that start, so a crash
  afterwards cannot resume at the old position. The new start is past the copies of the new
  topic's records already on the target, matched by content (``TailRecovery.new_life``): made
  under the old id before a check noticed the new one (by this process, or by one that stopped or
  died before noticing), or by another process of the flow in the new life. A partition of the
  topic this process did not hold when it noticed (``pending_reset``; at start, every one) is held
  back when assigned and matched the same way before it is copied (``relive``): neither its commit
  (perhaps the old life's) nor the mapping (perhaps not told yet) is trusted. The matches' syncs are
  published only after the start is committed: a crash in between finds the old id at restart and
  matches again, never a new life whose commit is still the old position.
* **Records deleted before their copy.** Retention or ``delete-records`` moved a partition's log
  start past the flow's position: the consumer resets to the log start and the records in between
  never reach the target. At assignment the committed position is compared with the log start;
  while running, every upstream gap among the copies (``SyncLedger.gaps``) is compared with the
  log start. Each loss is a ``RecordsLostBeforeCopy`` event with its offset range and count (and
  the ``mirrorlake_records_lost_before_copy`` metric). The count is in offsets: where transaction
  markers lie in a range, it is an upper bound on records.

Exactly-once flows stop on a re-created topic whatever the setting: their positions live in the
target's transactions, which this does not rewrite.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.config import FlowConfig
from replicator.errors import ReplicationError
from replicator.events import Event, RecordsLostBeforeCopy, fact_event_id
from replicator.flow.topics.recreated import recreated_event, stops_on
from replicator.kafka.admin import offsets_of
from replicator.metadata.topic_ids import topic_ids
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.stats import FlowStats

__all__ = ["TopicLives", "Recreated"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recreated:
    topic: str
    previous_topic_id: str
    topic_id: str


class TopicLives:
    """Topic ids of the flow's selection and the losses of its partitions, checked on demand.

    ``known(topic)``: the id the flow copied the topic under before this process (the mapping's
    current life; None when unknown). ``unproven(topic, partition)``: that life was started by a
    re-creation and holds no copy of the partition yet (``MappingIndex.unproven_life``). ``emit``
    writes a state event durably; ``ids`` (topic -> id) is shared with the sync tracker, which stamps
    every sync with it: a re-created topic's new id goes there only when ``adopt`` says the old
    life's copies are all acknowledged.
    """

    def __init__(
        self,
        flow: FlowConfig,
        replicator_id: str,
        admin: AdminClient,
        known: Callable[[str], str | None],
        emit: Callable[[Event], None],
        stats: FlowStats,
        ids: dict[str, str],
        unproven: Callable[[str, int], bool] = lambda _topic, _partition: False,
        stopped: Callable[[str, int], str | None] = lambda _topic, _partition: None,
    ) -> None:
        self._flow = flow
        self._unproven = unproven
        self._stopped = stopped
        self._replicator_id = replicator_id
        self._admin = admin
        self._known = known
        self._emit = emit
        self._stats = stats
        self.ids = ids
        self._new: dict[str, str] = {}  # re-created topic -> its new id, until adopted
        self._unannounced: dict[str, tuple[Recreated, RemoteTopic, str]] = {}
        # a re-created topic's partitions this process has not moved to their new start: matched when assigned
        self.pending_reset: set[tuple[str, int]] = set()
        self.reliving: set[tuple[str, int]] = set()  # assigned, matched or being matched, start not committed yet
        self._said: dict[tuple[str, int], int] = {}  # per partition, the end of the losses said so far
        self.confirmed: set[str] = set()  # the topics the last check found under the id the flow copies them by

    def _offsets(self, partitions: Iterable[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """Each partition's log start or end; one that fails is left out (asked again at the next check)."""
        return offsets_of(self._admin, partitions, spec, skip_failed=True)

    def adopt(self, topic: str) -> None:
        """The syncs of ``topic`` carry its new id from now on (its old life's copies are settled)."""
        if topic in self._new:
            self.ids[topic] = self._new.pop(topic)

    def check(self, remote: Mapping[str, RemoteTopic], noticed: str) -> list[Recreated]:
        """Compare the selection's ids with the known ones; return the re-created topics.

        The ``TopicRecreated`` event of one waits for ``announce``: the runner first moves (and
        commits) the partitions it owns to the new log start, so a crash before that finds the old
        id again at restart and does it then. A flow that stops on one emits the event and raises
        ``ReplicationError`` here.
        """
        found = topic_ids(self._admin, list(remote))
        out: list[Recreated] = []
        self.confirmed = set()
        for topic, topic_id in sorted(found.items()):
            first = topic not in self.ids
            previous = self.ids.get(topic) or self._known(topic)
            if previous is None or previous == topic_id:
                self.ids[topic] = topic_id
                self.confirmed.add(topic)
                if first:  # a new life another process said, whose owner may have died before moving
                    self._hold_stop(topic, topic_id, remote[topic].partitions)
                    self.pending_reset.update(
                        (topic, p) for p in range(remote[topic].partitions) if self._unproven(topic, p)
                    )
                continue
            if self._new.get(topic) == topic_id:
                continue  # noticed already, not adopted yet
            recreated = Recreated(topic, previous, topic_id)
            self._new[topic] = topic_id
            self._unannounced[topic] = (recreated, remote[topic], noticed)
            self.pending_reset.update((topic, p) for p in range(remote[topic].partitions))
            if stops_on(self._flow, "source"):
                self.announce(topic)
            out.append(recreated)
        return out

    def _hold_stop(self, topic: str, topic_id: str, partitions: int) -> None:
        """A re-creation said under ``stop`` with nothing of the new life copied since: a flow that still
        stops on it stops again (without a second event) rather than copy into it at this start."""
        flow = self._flow
        why = stops_on(flow, "source")
        if why and any(self._stopped(topic, p) == "source" for p in range(partitions)):
            raise ReplicationError(
                f"flow {flow.name}: source topic {topic!r} was deleted and created again (now topic id "
                f"{topic_id}; said by a topic_recreated event, nothing of it copied since); {why} still holds, "
                f"so the flow stops again. To copy its new records after the old ones on {flow.target}, set "
                "on_topic_recreated: continue (at-least-once) and start the flow again"
            )

    def announce(self, topic: str) -> None:
        """Emit ``topic``'s ``TopicRecreated`` event (once); raise when the flow stops on it."""
        if topic not in self._unannounced:
            return
        r, remote, noticed = self._unannounced.pop(topic)
        flow = self._flow
        why = stops_on(flow, "source")
        self._emit(
            recreated_event(
                flow,
                self._replicator_id,
                self._admin,
                side="source",
                topic=r.topic,
                source_topic=r.topic,
                previous_topic_id=r.previous_topic_id,
                topic_id=r.topic_id,
                partitions=remote.partitions,
                policy="stop" if why else "continue",
                noticed=noticed,
            )  # fmt: skip
        )
        self._stats.topics_recreated += 1
        if why:
            raise ReplicationError(
                f"flow {flow.name}: source topic {r.topic!r} was deleted and created again (topic id "
                f"{r.previous_topic_id} -> {r.topic_id}); {why} stops here. Its new records have offsets the "
                f"old copies on {flow.target} already use: to copy them after the old ones, set "
                "on_topic_recreated: continue (at-least-once) and start the flow again"
            )
        _log.warning(
            "flow %s: source topic %s was deleted and created again (topic id %s -> %s): copying the new topic "
            "from its log start into %s, after the old copies (a new life of the offset mapping)",
            flow.name, r.topic, r.previous_topic_id, r.topic_id, remote.target_topic,
        )  # fmt: skip

    def lost(self, topic: str, partition: int, position: int, log_start: int, noticed: str) -> None:
        """Records ``[position, log_start)`` were deleted before the flow copied them: say so, once.
        A range this process said already is not said again (a later check starts where it ended)."""
        position = max(position, self._said.get((topic, partition), position))
        if log_start <= position:
            return
        self._said[(topic, partition)] = log_start
        flow = self._flow
        n = log_start - position
        self._emit(
            RecordsLostBeforeCopy(
                flow=flow.name,
                replicator_id=self._replicator_id,
                event_id=fact_event_id(flow.name, "records_lost_before_copy", topic, partition, position, log_start),
                source_cluster=flow.source,
                target_cluster=flow.target,
                source_topic=topic,
                partition=partition,
                from_offset=position,
                to_offset=log_start,
                records=n,
                noticed=noticed,
            )
        )
        self._stats.records_lost_before_copy += n
        _log.warning(
            "flow %s: %s[%d]: offsets %d..%d (%d records) were deleted on %s before the flow copied them: "
            "they are not on %s",
            flow.name, topic, partition, position, log_start - 1, n, flow.source, flow.target,
        )  # fmt: skip

    def check_committed(
        self,
        committed: Mapping[tuple[str, int], int],
        known: Mapping[tuple[str, int], int] | None = None,
        noticed: str = "start",
    ) -> None:
        """At the flow's start: a committed position (``committed``, the flow group's) that the log start
        has passed is a loss, from the commit or past the last copy the mapping knows (``known``: per
        partition, one past it), whichever is later: a killed process's copies past its commit are not
        lost. Every process of the flow may say so: the event's id is the loss's own, so readers count
        it once. (Copies a killed process left without a durable sync, whose source records are gone,
        cannot be told apart and are counted lost.)"""
        known = known or {}
        committed = {tp: max(c, known.get(tp, c)) for tp, c in committed.items()}
        behind = [tp for tp in committed if tp[0] not in {t for t, _p in self.pending_reset | self.reliving}]
        starts = self._offsets(behind, OffsetSpec.earliest())
        for tp in behind:
            if tp in starts:
                self.lost(tp[0], tp[1], committed[tp], starts[tp], noticed)

    def relive(self, keys: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of ``keys`` (just assigned), a re-created topic's partitions this process has not moved to their
        new start: the runner holds them back and matches their new life's copies before copying."""
        out = [k for k in keys if k in self.pending_reset]
        self.pending_reset -= set(out)
        self.reliving |= set(out)
        return out

    def relived(self, keys: Iterable[tuple[str, int]], committed: bool) -> None:
        """``keys`` left ``reliving``: their new start ``committed``, or taken away before (then the next
        assignment here matches them again)."""
        keys = set(keys) & self.reliving
        self.reliving -= keys
        if not committed:
            self.pending_reset |= keys

    def check_gaps(self, gaps: list[tuple[str, int, int, int]]) -> None:
        """Hold each upstream gap the copies revealed against the log start: deleted before the copy?"""
        if not gaps:
            return
        starts = self._offsets(sorted({(t, p) for t, p, _f, _u in gaps}), OffsetSpec.earliest())
        for topic, partition, first, upto in gaps:
            low = starts.get((topic, partition))
            if low is not None and low > first:
                self.lost(topic, partition, first, min(low, upto), "running")
