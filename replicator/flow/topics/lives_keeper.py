"""A running flow's topic lives on both sides, performed with real clients.

``TopicLives`` (the source) and ``RemoteLives`` (the target) say which topics were deleted and
created again and which records were deleted before their copy; this keeper does what follows for
the flow's runner: it drains the old life's copies, moves the partitions it holds to their new
start past the copies already made of the new life (``TailRecovery.new_life``), hands the starts to
the ownership to commit (``core.ownership.Ownership.moved``) and says each re-creation once its
starts are committed (``committed``). A re-created topic's partition not held when it was noticed
is matched when it is assigned (``relive``, ``match_relived``). What the mapping says (the current
life's ids and copies) comes from the state tasks' view, through ``mapping``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from replicator.client.group_offsets import committed_offsets
from replicator.client.mapping import Segment
from replicator.client.mapping_index import Life, MappingIndex
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ReplicationError
from replicator.events import Event, OffsetSync
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.ownership import Ownership
from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.flow.syncs.tail_recovery import TailRecovery, publish_syncs
from replicator.flow.topics.remote_lives import RemoteLives
from replicator.flow.topics.topic_lives import TopicLives
from replicator.kafka.admin import admin_client
from replicator.kafka.settings import consumer_group_id
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.stats import FlowStats

__all__ = ["LivesKeeper"]

_log = logging.getLogger(__name__)


class LivesKeeper:
    """One flow's topic lives while it runs (one process; the loop's thread).

    ``mapping()``: the state tasks' offset mapping (None before they exist); ``remote()``: the
    flow's selection (source topic -> remote topic); ``own``: the flow's ownership, which commits
    the starts; ``forget(keys)``: the copier's and ledger's ``forget``; ``drain()``: wait for what
    is in flight; ``commit_starts()``: commit the starts the ownership has due, now (then, if refused,
    again by the loop); ``emit_durably(event)``: a state event acknowledged before the call returns.
    ``topic_ids``/``remote_ids``: the ids every sync carries, shared with the ledger.
    """

    def __init__(
        self,
        config: MirrorlakeConfig,
        flow: FlowConfig,
        replicator_id: str,
        stats: FlowStats,
        *,
        mapping: Callable[[], MappingIndex | None],
        remote: Callable[[], Mapping[str, RemoteTopic]],
        own: Ownership,
        ledger: SyncLedger,
        forget: Callable[[set[TP]], None],
        drain: Callable[[], None],
        commit_starts: Callable[[], None],
        emit_durably: Callable[[Event], None],
        matched_producer: Callable[[], Producer | None],
        topic_ids: dict[str, str],
        remote_ids: dict[str, str],
    ) -> None:
        self._config, self._flow, self._replicator_id = config, flow, replicator_id
        self._mapping, self._remote, self._own, self._ledger = mapping, remote, own, ledger
        self._forget, self._drain, self._matched_producer = forget, drain, matched_producer
        self._commit_starts = commit_starts
        self.source = TopicLives(
            flow, replicator_id, admin_client(config.cluster(flow.source).client_config()), self._known_topic_id,
            emit_durably, stats, topic_ids, self._unproven_life, self._stopped_life,
        )  # fmt: skip
        self.target = RemoteLives(
            flow, replicator_id, admin_client(config.cluster(flow.target).client_config()), self._known_remote_id,
            self._copied_until, emit_durably, stats, remote_ids, self._stopped_life,
        )  # fmt: skip
        self._known_at_start: dict[TP, int] = {}  # one past the last copy the mapping knew at start
        # per partition, the target offset before which every copy is of the topic the flow knows (its
        # id confirmed by a check after the copy): a re-created topic's copies are looked for past it
        self._sure_until: dict[TP, int] = {}

    # -- checks (each under the runner's ``guarded``: a cluster that does not answer is waited out) --
    def check_source(self, consumer: Consumer, noticed: str) -> None:
        """Re-created source topics (``topic_lives``); records deleted before their copy (``ledger.gaps``)."""
        lives, remote = self.source, self._remote()
        copied = {tp: self._ledger.last_copy(tp) for tp in self._own.assigned}  # before the check: of the topic it sees
        recreated = lives.check(remote, noticed)
        for tp, last in copied.items():
            if last is not None and tp[0] in lives.confirmed:
                self._sure_until[tp] = last[1] + 1  # copies before this target offset are of the known topic
        if noticed == "start" and not self._flow.exactly_once:  # committed positions the log start passed
            self._known_at_start = self._known_copied()
            lives.check_committed(self._read_committed(set(remote)), self._known_at_start)
        if recreated and noticed == "running":
            self._drain()  # the old life's copies and syncs, under the old id
        for r in recreated:
            lives.adopt(r.topic)
            if noticed == "running":  # at start: each partition is matched when assigned (``match_relived``)
                self._restart(consumer, r.topic, r.topic_id)  # said (``announce``) once its starts are committed
                if not any(t == r.topic for t, _p in self._own.assigned):
                    lives.announce(r.topic)
        gaps, self._ledger.gaps = self._ledger.gaps, []
        lives.check_gaps(gaps)

    def check_target(self, consumer: Consumer, noticed: str) -> None:
        """Remote topics that lost their copies (``remote_lives``): their source topics copied again from
        the log start. At start each partition is matched when assigned; running, the copies made
        before are drained under the old id, then the assigned partitions move."""
        lives, remote = self.target, self._remote()
        recreated = lives.check(remote, noticed) if noticed == "start" else lives.poll(remote)
        if recreated and noticed == "running":
            self._drain()
        for r in recreated:
            lives.adopt(r.topic)
            if noticed == "running":
                self._restart(consumer, r.topic, self.source.ids.get(r.topic), remote=True)
            else:
                self.source.pending_reset.update((r.topic, p) for p in range(r.partitions))

    def check_committed(self, consumer: Consumer, keys: list[TP]) -> None:
        """Each newly assigned partition's commit, against the source's log start: past it, the records
        between were deleted before their copy (the consumer resets to the log start and goes on). The
        check at start looks once, through the group's committed offsets; this one sees every
        assignment, in whichever process it lands (each says it under the loss's own event id:
        readers count it once). On the loop's thread, before the partition's first copy. The copies
        known are those of the mapping at start (the view is the state tasks' meanwhile): copies a
        process killed since left past its commit may be counted lost."""
        tps = [TopicPartition(t, p) for t, p in keys]
        try:
            committed = consumer.committed(tps, timeout=10)
        except KafkaException as exc:
            _log.warning("flow %s: committed positions unreadable (%s): a deletion before the copy may go unsaid",
                         self._flow.name, exc)  # fmt: skip
            return
        found = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.error is None and tp.offset >= 0}
        if found:
            self.source.check_committed(found, self._known_at_start, "running")

    # -- assignments ---------------------------------------------------------------------------
    def relive(self, keys: Iterable[TP]) -> list[TP]:
        """Of ``keys`` (just assigned), a re-created topic's partitions this process has not moved to their
        new start: held back and matched (``match_relived``) before they are copied."""
        return self.source.relive(keys)

    @property
    def reliving(self) -> set[TP]:
        return self.source.reliving

    def match_relived(self, keys: list[TP]) -> dict[TP, int]:
        """Where each of a re-created topic's partitions (assigned, held) starts: past the copies of its
        new topic's records on the target, matched by content from the target's log start (at most
        ``max_tail`` records back); their syncs wait in the ownership's ``new_life_syncs`` for the
        start's commit."""
        out: dict[TP, int] = {}
        matched: list[OffsetSync] = []
        remote = self._remote()
        for topic in sorted({t for t, _p in keys if t in remote}):  # else dropped from the selection
            mine = {k: 0 for k in keys if k[0] == topic}
            syncs, at = self._match_new_life(topic, self.source.ids[topic], mine)
            matched += syncs
            for t, p in mine:  # one missing on either cluster: from the log start (offset 0 is reset to it)
                out[(t, p)] = at.get((t, p), 0)
                _log.info("flow %s: %s[%d], of a re-created topic, starts at %d, past the copies of its new records",
                          self._flow.name, t, p, at.get((t, p), 0))  # fmt: skip
        self._own.matched(matched)  # all at once: a failed attempt is made again whole
        return out

    def forgot(self, keys: set[TP]) -> None:
        """``keys`` are this process's no more: matched again at their next assignment here."""
        self.source.relived(keys, committed=False)

    def committed(self, keys: list[TP], syncs: list[OffsetSync]) -> None:
        """A re-created topic's partitions' new starts ``keys`` are committed: publish the ``syncs`` of the
        copies matched before them, durably, and say each re-creation (``announce``)."""
        self.source.relived(keys, committed=True)
        producer = self._matched_producer()
        if syncs and producer is not None:
            publish_syncs(self._config, self._flow, producer, syncs)
        for topic in sorted({t for t, _p in keys}):
            self.source.announce(topic)

    def remote_topic_gone(self, err: KafkaError) -> None:
        """A write failed for a partition the target does not know: name the remote topics that are gone."""
        try:
            gone = self.target.missing(self._remote())
        except KafkaException:
            return  # the target unreadable: the write's own error is said
        if gone:
            raise ReplicationError(
                f"flow {self._flow.name}: remote topic {', '.join(map(repr, gone))} on {self._flow.target} was "
                f"deleted while the flow ran ({err.str()}): the flow stops. Its copies are gone: the next start "
                "creates the topic again and, under on_remote_topic_recreated: recopy (the default), copies the "
                "source topic again from its log start"
            ) from KafkaException(err)

    # -- moving a re-created topic ---------------------------------------------------------------
    def _restart(self, consumer: Consumer, topic: str, topic_id: str | None, remote: bool = False) -> None:
        """Move a re-created topic's assigned partitions to their new start, a new session each: past
        the copies of its records made before the flow noticed it (under the old id), found by content
        (``TailRecovery.new_life``). Their syncs of the new life are published after the start is
        committed: a crash in between finds the old id at restart and matches them again."""
        mine = [tp for tp in self._own.assigned if tp[0] == topic]
        # a new remote topic holds nothing of the old: matched from its offset 0
        since = {key: 0 if remote else self._sure_until.get(key, 0) for key in mine}
        for key in mine:
            self._sure_until.pop(key, None)
        syncs, starts = self._match_new_life(topic, topic_id, since)
        moved = {key: starts.get(key, 0) for key in mine}
        self._forget(set(mine))
        for (t, p), offset in moved.items():
            consumer.seek(TopicPartition(t, p, offset))
        self._own.moved(moved, syncs)
        self.source.relive(mine)  # the others are matched when assigned; these, again if revoked uncommitted
        self._commit_starts()  # now, or again in 1 s when a rebalance refuses it (then its syncs wait)

    def _match_new_life(
        self, topic: str, topic_id: str | None, since: dict[TP, int]
    ) -> tuple[list[OffsetSync], dict[TP, int]]:
        """The copies of a re-created topic's records on the target, per partition of ``since`` searched
        from that target offset on, as syncs of the new life; and where each partition goes on past them."""
        target_topic = self._remote()[topic].target_topic
        wanted = [(t, target_topic, p, d_from) for (t, p), d_from in since.items()]
        flow = self._flow
        origin = SyncOrigin(flow.name, self._replicator_id, flow.source, flow.target)
        source, target = (self._config.cluster(alias).client_config() for alias in (flow.source, flow.target))
        return TailRecovery(origin, source, target).new_life(wanted, topic_id, self.target.ids.get(topic))

    # -- what the mapping says -------------------------------------------------------------------
    def _current_lives(self, topic: str | None = None) -> Iterator[tuple[TP, Life, list[Segment]]]:
        """Each partition of the flow (of ``topic`` only, if given) with its mapping's current life and
        that life's segments, as the state tasks' view knows them (nothing before the view is made)."""
        index = self._mapping()
        if index is None:
            return
        for _f, t, partition in index.partitions(self._flow.name):
            if topic is None or t == topic:
                yield (
                    (t, partition),
                    index.life(self._flow.name, t, partition),
                    index.segments(self._flow.name, t, partition),
                )

    def _known_copied(self) -> dict[TP, int]:
        """Per source partition of the flow, one past the last copy its mapping (current life) knows."""
        return {tp: max(s.upstream_end for s in segs) + 1 for tp, _life, segs in self._current_lives() if segs}

    def _known_remote_id(self, topic: str) -> str | None:
        """The remote topic id the mapping's current life of ``topic`` was copied into (None: unknown)."""
        return next(
            (life.target_topic_id for _tp, life, _s in self._current_lives(topic) if life.target_topic_id), None
        )

    def _copied_until(self, topic: str) -> dict[int, int]:
        """Per partition of ``topic``, one past the last target offset its mapping's current life knows."""
        return {
            tp[1]: max(s.downstream_end for s in segs) + 1 for tp, _life, segs in self._current_lives(topic) if segs
        }

    def _known_topic_id(self, topic: str) -> str | None:
        """The id the mapping's current life of ``topic`` was copied under (None: unknown)."""
        return next((life.topic_id for _tp, life, _s in self._current_lives(topic) if life.topic_id), None)

    def _unproven_life(self, topic: str, partition: int) -> bool:
        """The partition's current life holds no copy, only a ``TopicRecreated`` said it (``unproven_life``)."""
        index = self._mapping()
        return index is not None and index.unproven_life(self._flow.name, topic, partition)

    def _stopped_life(self, topic: str, partition: int) -> str | None:
        """The side whose re-creation, said under ``stop``, started the partition's uncopied current life."""
        index = self._mapping()
        return None if index is None else index.stopped_life(self._flow.name, topic, partition)

    def _read_committed(self, topics: set[str]) -> dict[TP, int]:
        source = self._config.cluster(self._flow.source).client_config()
        found = committed_offsets(source, consumer_group_id(self._flow), sorted(topics))
        return {(o.topic, o.partition): o.offset for o in found}
