"""Which source topics a flow copies now, and where each goes: the flow's topic following.

Every refresh asks the source for its topics and partitions, selects the flow's (filter, policy,
own topics excluded), makes sure each remote topic exists with at least the source's partition
count, and (re)subscribes the flow's consumer when the selection changed. A record from a topic
or partition newer than the last refresh triggers a refresh of its own (``remote_for``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from replicator.metadata.topics import RemoteTopic, TopicSelector

__all__ = ["TopicFollower", "TopicSource"]

_log = logging.getLogger(__name__)


class TopicSource(Protocol):
    """What the follower needs of ``replicator.metadata.topics.TopicManager``."""

    def source_partitions(self) -> dict[str, int]: ...

    def ensure_remote_topics(self, topics: list[RemoteTopic]) -> list[RemoteTopic]: ...


class TopicFollower:
    """Keeps ``remote`` (source topic -> ``RemoteTopic``) current; calls ``subscribe`` on changes.

    ``subscribe(topics)`` receives the new selection (empty: unsubscribe); ``see_partitions(topic)``
    makes the producer learn a remote topic's new partitions; ``created`` hears of each remote topic
    the follower created (on the refreshing thread).
    """

    def __init__(
        self,
        flow: str,
        selector: TopicSelector,
        topics: TopicSource,
        subscribe: Callable[[list[str]], None],
        see_partitions: Callable[[str], None],
        created: Callable[[list[RemoteTopic]], None] = lambda _topics: None,
    ) -> None:
        self._flow = flow
        self._selector = selector
        self._topics = topics
        self._subscribe = subscribe
        self._see_partitions = see_partitions
        self._created = created
        self.remote: dict[str, RemoteTopic] = {}

    def refresh(self) -> None:
        selected = self._selector.select(self._topics.source_partitions())
        changed = selected.keys() != self.remote.keys() or any(
            self.remote[t].partitions != r.partitions for t, r in selected.items()
        )
        made = self._topics.ensure_remote_topics(list(selected.values())) if selected and changed else []
        if made:
            self._created(made)
        if selected.keys() != self.remote.keys():
            _log.info("flow %s: replicating %s", self._flow, ", ".join(selected) or "no topics")
            self._subscribe(list(selected))
        self.remote = selected

    def remote_for(self, topic: str, partition: int) -> RemoteTopic:
        """The remote topic of a consumed record's topic; refreshes first if the record is news to us."""
        remote = self.remote.get(topic)
        if remote is None or partition >= remote.partitions:  # newer than our last topic refresh
            self.refresh()
            remote = self.remote[topic]
            self._see_partitions(remote.target_topic)
        return remote

    def target_topics(self) -> dict[str, str]:
        return {t: r.target_topic for t, r in self.remote.items()}
