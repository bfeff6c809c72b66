"""A flow's remote topics' lives: a remote topic deleted (and created again) on the target.

The copies a flow made live in its remote topics. Deleted on the target (by hand, by a clean-up
script, by a topic re-created to change its partition count), a remote topic loses every copy,
and one created again under the same name starts again at offset 0: the mapping's old syncs
then name records that are gone, or other records at the same offsets, and a flow that went on
copying from its position would leave the target without everything before it, silently (MM2
does; its checkpoints then translate into the new topic through the old syncs).

Each check (at the flow's start and at each refresh of its topics) asks the target for the remote
topics' ids (``replicator.metadata.topic_ids``) and compares them with the ids the flow copied
into: this process's, else the mapping's current life (``OffsetSync.target_topic_id``, v3).
Where the mapping knows no remote id (syncs from before v3), a remote topic whose log end lies
below the last copy the mapping knows has lost copies too. Either is a ``TopicRecreated``
event with ``side: target`` (and ``mirrorlake_topics_recreated{side="target"}``); then
``on_remote_topic_recreated`` decides: ``stop`` fails the flow naming the topic; ``recopy``
(the default) copies the source topic again from its log start into the new remote topic, as a
new life of the mapping (its syncs carry the new id), past the copies of it already there (matched
by content, ``TailRecovery.new_life``). Exactly-once flows always stop: their positions live in
the target's transactions, which this does not rewrite.

A remote topic deleted while the flow runs, and not created again, fails the flow's writes: the
flow stops naming it (``missing``); its next start creates it again and recopies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.config import FlowConfig
from replicator.errors import ReplicationError
from replicator.events import Event
from replicator.flow.topics.recreated import recreated_event, stops_on
from replicator.kafka.admin import offsets_of
from replicator.metadata.topic_ids import topic_ids
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.stats import FlowStats

__all__ = ["RemoteLives", "RemoteRecreated"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteRecreated:
    """Source topic ``topic``'s remote topic lost its copies: now ``topic_id`` (``previous``: None
    when only its log end told)."""

    topic: str
    remote_topic: str
    previous_topic_id: str | None
    topic_id: str
    partitions: int


class RemoteLives:
    """The remote topics' ids, checked on demand against the ones the flow copied into.

    ``known(topic)``: the remote id of ``topic``'s copies in the mapping's current life (None:
    unknown). ``copied_until(topic)``: per partition, one past the last target offset the mapping
    knows copied (for remote topics whose id the mapping does not know). ``ids`` (source topic ->
    remote topic id) is shared with the sync tracker, which stamps every sync with it; a new id goes
    there by ``adopt``, once the copies made before it are drained.
    """

    def __init__(
        self,
        flow: FlowConfig,
        replicator_id: str,
        admin: AdminClient,
        known: Callable[[str], str | None],
        copied_until: Callable[[str], Mapping[int, int]],
        emit: Callable[[Event], None],
        stats: FlowStats,
        ids: dict[str, str],
        stopped: Callable[[str, int], str | None] = lambda _topic, _partition: None,
    ) -> None:
        self._flow = flow
        self._stopped = stopped
        self._replicator_id = replicator_id
        self._admin = admin
        self._known = known
        self._copied_until = copied_until
        self._emit = emit
        self._stats = stats
        self.ids = ids
        self._new: dict[str, str] = {}  # source topic -> its remote topic's new id, until adopted
        self._query: _Query | None = None  # the running flow's request of the ids (``poll``)

    def adopt(self, topic: str) -> None:
        """The syncs of ``topic`` carry its remote topic's new id from now on."""
        if topic in self._new:
            self.ids[topic] = self._new.pop(topic)

    def _ids(self, remote: Mapping[str, RemoteTopic]) -> dict[str, str]:
        """The existing remote topics' ids, by remote topic name (one DescribeTopics request)."""
        return topic_ids(self._admin, [r.target_topic for r in remote.values()])

    def missing(self, remote: Mapping[str, RemoteTopic]) -> list[str]:
        """The remote topics that do not exist on the target (deleted while the flow ran)."""
        found = self._ids(remote)
        return sorted(r.target_topic for r in remote.values() if r.target_topic not in found)

    def check(self, remote: Mapping[str, RemoteTopic], noticed: str) -> list[RemoteRecreated]:
        """Compare the remote topics' ids with the known ones; say each that lost its copies (a
        ``TopicRecreated`` event, emitted durably before anything is recopied: a crash afterwards
        finds a life with no copy and matches it, ``MappingIndex.unproven_life``); raise
        ``ReplicationError`` where the flow stops on it. A remote topic not created yet is skipped."""
        return self._compare(remote, self._ids(remote), noticed)

    def poll(self, remote: Mapping[str, RemoteTopic]) -> list[RemoteRecreated]:
        """``check`` for a running flow, without holding its copy loop: the ids are asked for on a
        thread of their own, and compared at the first call after they came back (a frozen target
        would otherwise hold the loop for the admin timeout, and its outage would go unseen). A
        request that failed is asked again at the next call; the target's health is the loop's to see."""
        query = self._query
        if query is not None and not query.done.is_set():
            return []
        self._query = _Query(lambda: self._ids(remote))
        if query is None:
            return []
        if query.error is not None:
            _log.debug("flow %s: remote topic ids not read: %s", self._flow.name, query.error)
            return []
        return self._compare(remote, query.result, "running")

    def _compare(
        self, remote: Mapping[str, RemoteTopic], found: Mapping[str, str], noticed: str
    ) -> list[RemoteRecreated]:
        out = []
        for topic, r in sorted(remote.items()):
            topic_id = found.get(r.target_topic)
            if topic_id is None or self._new.get(topic) == topic_id:
                continue
            first = topic not in self.ids
            previous = self.ids.get(topic) or self._known(topic)
            if previous == topic_id or (previous is None and not self._shorter(r)):
                if first:
                    self._hold_stop(r, topic_id)
                self.ids[topic] = topic_id
                continue
            self._new[topic] = topic_id
            recreated = RemoteRecreated(topic, r.target_topic, previous, topic_id, r.partitions)
            self._say(recreated, noticed)
            out.append(recreated)
        return out

    def _hold_stop(self, r: RemoteTopic, topic_id: str) -> None:
        """A re-creation said under ``stop`` with nothing recopied since: a flow that still stops on it
        stops again (without a second event) rather than recopy at this start."""
        flow = self._flow
        why = stops_on(flow, "target")
        if why and any(self._stopped(r.source_topic, p) == "target" for p in range(r.partitions)):
            raise ReplicationError(
                f"flow {flow.name}: remote topic {r.target_topic!r} on {flow.target} was deleted and created "
                f"again (now topic id {topic_id}; said by a topic_recreated event, nothing recopied since); {why} "
                f"still holds, so the flow stops again. To copy {r.source_topic!r} again from its log start, set "
                "on_remote_topic_recreated: recopy (at-least-once) and start the flow again"
            )

    def _shorter(self, r: RemoteTopic) -> bool:
        """The remote topic ends below a copy the mapping knows in it (its id unknown to the mapping)."""
        until = self._copied_until(r.source_topic)
        if not until:
            return False
        keys = [(r.target_topic, p) for p in sorted(until)]
        ends = offsets_of(self._admin, keys, OffsetSpec.latest(), skip_failed=True)
        return any(ends[(t, p)] < until[p] for t, p in keys if (t, p) in ends)

    def _say(self, r: RemoteRecreated, noticed: str) -> None:
        flow = self._flow
        why = stops_on(flow, "target")
        self._emit(
            recreated_event(
                flow,
                self._replicator_id,
                self._admin,
                side="target",
                topic=r.remote_topic,
                source_topic=r.topic,
                previous_topic_id=r.previous_topic_id,
                topic_id=r.topic_id,
                partitions=r.partitions,
                policy="stop" if why else "recopy",
                noticed=noticed,
            )  # fmt: skip
        )
        self._stats.remote_topics_recreated += 1
        was = f"topic id {r.previous_topic_id} -> {r.topic_id}" if r.previous_topic_id else "it ends below copies made"
        if why:
            raise ReplicationError(
                f"flow {flow.name}: remote topic {r.remote_topic!r} on {flow.target} was deleted and created "
                f"again ({was}): the copies of {r.topic!r} it held are gone; {why} stops here. To copy "
                f"{r.topic!r} again from its log start, set on_remote_topic_recreated: recopy (at-least-once) "
                "and start the flow again"
            )
        _log.warning(
            "flow %s: remote topic %s on %s was deleted and created again (%s): copying %s again from its log "
            "start into it (a new life of the offset mapping)",
            flow.name, r.remote_topic, flow.target, was, r.topic,
        )  # fmt: skip


class _Query:
    """One admin request on a daemon thread: its ``result`` or ``error`` once ``done`` is set."""

    def __init__(self, request: Callable[[], dict[str, str]]) -> None:
        self.result: dict[str, str] = {}
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(request,), name="mirrorlake-remote-ids", daemon=True).start()

    def _run(self, request: Callable[[], dict[str, str]]) -> None:
        try:
            self.result = request()
        except Exception as exc:  # noqa: BLE001 - handed to the loop, which asks again
            self.error = exc
        finally:
            self.done.set()
