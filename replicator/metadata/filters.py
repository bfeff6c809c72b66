"""Which topics a flow replicates (MM2's ``TopicFilter``/``DefaultTopicFilter``)."""

from __future__ import annotations

from typing import Protocol

from replicator.config import FlowConfig
from replicator.config.patterns import compile_any

__all__ = ["TopicFilter", "RegexTopicFilter", "GroupFilter", "RegexGroupFilter"]


class TopicFilter(Protocol):
    def should_replicate_topic(self, topic: str) -> bool:
        """True when ``topic`` matches the flow's selection (before policy and cycle checks)."""
        ...


class RegexTopicFilter:
    """Include/exclude lists of regexes, each matched against the whole topic name, as MM2 does,
    in linear time (``replicator.config.patterns``: a name from a cluster never makes it backtrack)."""

    def __init__(self, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
        self._include = compile_any(include)
        self._exclude = compile_any(exclude)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> RegexTopicFilter:
        return cls(flow.topics, flow.topics_exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        if self._include is None or not self._include.fullmatch(topic):
            return False
        return not (self._exclude is not None and self._exclude.fullmatch(topic))


class GroupFilter(Protocol):
    def should_replicate_group(self, group: str) -> bool:
        """True when the consumer group's offsets are checkpointed (MM2's ``GroupFilter``)."""
        ...


class RegexGroupFilter:
    """``groups``/``groups_exclude`` regexes, each matched against the whole group id."""

    def __init__(self, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
        self._topics = RegexTopicFilter(include, exclude)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> RegexGroupFilter:
        return cls(flow.groups, flow.groups_exclude)

    def should_replicate_group(self, group: str) -> bool:
        return self._topics.should_replicate_topic(group)
