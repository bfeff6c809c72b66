"""A flow's topic config and ACL sync, run off the copy loop's thread.

Every ``sync_topic_configs_interval_seconds`` the flow compares the remote topics' configs and
ACLs with the source's (DescribeConfigs and DescribeAcls on both clusters, an alter where they
differ). Run by the copy loop itself, that was tens of milliseconds without copying, a stall in
the end-to-end latency of every record arriving meanwhile. ``TopicMetadataSync`` runs it through a
``BackgroundCall`` and keeps the loop's rules for its failures: when the loop starts the next run
it first looks at how the last one ended; a transient failure (a timeout, a broker down) starts a
wait for the side that does not answer, any other failure is the flow's (raised on its thread).
"""

from __future__ import annotations

from collections.abc import Callable

from replicator.config import FlowConfig
from replicator.flow.clients import FlowClients
from replicator.flow.control.outage import ADMIN_ERRORS, Outages, Side
from replicator.flow.topics.background import BackgroundCall

__all__ = ["TopicMetadataSync"]

_JOIN_S = 30.0  # a stopping flow waits this long for a sync in progress
_SIDES: tuple[Side, ...] = ("source", "target")


class TopicMetadataSync:
    """``target_topics()``: source topic -> remote topic of the flow's current selection."""

    def __init__(
        self, flow: FlowConfig, clients: FlowClients, target_topics: Callable[[], dict[str, str]], outages: Outages
    ) -> None:
        self._flow = flow
        self._clients = clients
        self._target_topics = target_topics
        self._outages = outages
        self._call = BackgroundCall(f"{flow.name} config and ACL sync", self.sync)

    def sync(self) -> None:
        """One comparison (and alter where needed) of the remote topics' configs and ACLs."""
        names = self._target_topics()
        if self._flow.sync_topic_configs:
            self._clients.config_sync.sync(names)
        if self._flow.sync_topic_acls:
            self._clients.acl_sync.sync(names)

    def start_if_due(self) -> bool:
        """Start the next run unless one still runs or a side backs off; True if it started."""
        if self._call.running:
            return False
        self._handle(self._call.take_error())
        if not all(self._outages.due(side) for side in _SIDES):
            return False
        return self._call.start()

    def finish(self) -> None:
        """At the loop's end: the run in progress finishes (a caught-up run has synced at least once)."""
        self._call.join(_JOIN_S)
        self._handle(self._call.take_error())

    def _handle(self, error: BaseException | None) -> None:
        if error is None:
            return
        if not isinstance(error, ADMIN_ERRORS) or not self._outages.blame(_SIDES, error):
            raise error
