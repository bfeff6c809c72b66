"""A flow's topic config and ACL sync, run off the copy loop's thread.

Every ``sync_topic_configs_interval_seconds`` the flow compares the remote topics' configs and
ACLs with the source's (DescribeConfigs and DescribeAcls on both clusters, an alter where they
differ). Run by the copy loop itself, that was tens of milliseconds without copying, a stall in
the end-to-end latency of every record arriving meanwhile. ``TopicMetadataSync`` runs it through a
``BackgroundCall`` and keeps the loop's rules for its failures: when the loop starts the next run
it first looks at how the last one ended; a transient failure (a timeout, a broker down) starts a
wait for the side that does not answer, any other failure is the flow's (raised on its thread).

The same run notices source topics that left the selection (``RemoteTopicDeletions``: deleted on
the source? keep or delete the remote topic). Every decision (an ACL created or deleted, a remote
topic kept or deleted) becomes a ``metadata_change`` event, handed to the loop's thread, which
emits it (``emit``): the background thread never polls the flow's producer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from replicator.config import FlowConfig
from replicator.events import Event, MetadataChange
from replicator.flow.clients import FlowClients
from replicator.flow.control.outage import ADMIN_ERRORS, Outages, Side
from replicator.flow.topics.background import BackgroundCall
from replicator.metadata.acls import AclDecision
from replicator.metadata.topic_deletions import TopicDecision
from replicator.metadata.topics import RemoteTopic

__all__ = ["TopicMetadataSync"]

_JOIN_S = 30.0  # a stopping flow waits this long for a sync in progress
_SIDES: tuple[Side, ...] = ("source", "target")
_CREATED = "the source topic was selected and had no remote topic"


class TopicMetadataSync:
    """``target_topics()``: source topic -> remote topic of the flow's current selection."""

    def __init__(
        self,
        flow: FlowConfig,
        clients: FlowClients,
        target_topics: Callable[[], dict[str, str]],
        outages: Outages,
        emit: Callable[[Event], None],
        replicator_id: str,
    ) -> None:
        self._flow = flow
        self._clients = clients
        self._target_topics = target_topics
        self._outages = outages
        self._emit = emit
        self._replicator_id = replicator_id
        self._selected: dict[str, str] = {}  # the selection the last run saw: source topic -> remote topic
        self._lock = threading.Lock()
        self._decided: list[Event] = []  # made by a run, emitted by the loop's thread
        self._call = BackgroundCall(f"{flow.name} config and ACL sync", self.sync)

    def seed(self, known: dict[str, str], decided: set[str]) -> None:
        """At start: the topics the flow copied or created before (source -> remote: its mapping, its
        ``created`` events), less those whose deletion was decided already: one deleted while no
        process ran is decided at the first run."""
        self._selected = {s: r for s, r in known.items() if s not in decided}

    def created(self, topics: list[RemoteTopic]) -> None:
        """Remote topics the flow just created (on the loop's thread): each a ``metadata_change`` (topic,
        created), so a process started later knows the flow made it even if it never copied into it."""
        for r in topics:
            self._emit(self._event("topic", "created", r.target_topic, r.source_topic, _CREATED))

    def sync(self) -> None:
        """One comparison (and alter where needed) of the remote topics' configs and ACLs, and the
        decisions about source topics that left the selection since the last run."""
        names = self._target_topics()
        events: list[Event] = []
        if self._flow.sync_topic_configs:
            self._clients.config_sync.sync(names)
        if self._flow.sync_topic_acls:
            events += [self._acl_event(d) for d in self._clients.acl_sync.sync(names)]
        gone = {s: r for s, r in self._selected.items() if s not in names}
        events += [self._topic_event(d) for d in self._clients.topic_deletions.decide(gone)]
        self._selected = dict(names)  # after the decisions: a source that did not answer is asked again
        with self._lock:
            self._decided += events

    def _acl_event(self, d: AclDecision) -> MetadataChange:
        return self._event("acl", d.action, d.topic, d.source_topic, d.reason, d.acl, d.source_acl)

    def _topic_event(self, d: TopicDecision) -> MetadataChange:
        return self._event("topic", d.action, d.topic, d.source_topic, d.reason)

    def _event(
        self,
        kind: str,
        action: str,
        topic: str,
        source_topic: str,
        reason: str | None,
        acl: str | None = None,
        source_acl: str | None = None,
    ) -> MetadataChange:
        flow = self._flow
        return MetadataChange(
            flow=flow.name, replicator_id=self._replicator_id, source_cluster=flow.source, target_cluster=flow.target,
            kind=kind, action=action, topic=topic, source_topic=source_topic, acl=acl, source_acl=source_acl,
            reason=reason,
        )  # fmt: skip

    def emit_decided(self) -> None:
        """Emit the decisions the last runs made (on the loop's thread)."""
        with self._lock:
            events, self._decided = self._decided, []
        for event in events:
            self._emit(event)

    def start_if_due(self) -> bool:
        """Start the next run unless one still runs or a side backs off; True if it started."""
        if self._call.running:
            return False
        self.emit_decided()
        self._handle(self._call.take_error())
        if not all(self._outages.due(side) for side in _SIDES):
            return False
        return self._call.start()

    def finish(self) -> None:
        """At the loop's end: the run in progress finishes (a caught-up run has synced at least once)."""
        self._call.join(_JOIN_S)
        self.emit_decided()
        self._handle(self._call.take_error())

    def _handle(self, error: BaseException | None) -> None:
        if error is None:
            return
        if not isinstance(error, ADMIN_ERRORS) or not self._outages.blame(_SIDES, error):
            raise error
