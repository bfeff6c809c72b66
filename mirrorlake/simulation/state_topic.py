"""The simulated state topic: events land when the broker acknowledges them, in each writer's order.

A process's writes wait in its producer (``in_flight``) until an acknowledgement lands them; a
killed process's unacknowledged writes land only as a prefix (what the broker had received). A
reader (``SimView``) replays what landed into the offset mapping and hands every event to its
subscribers, as ``replicator.tasks.base.StateView`` does over Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from replicator.client.mapping_index import MappingIndex
from replicator.events import Event

__all__ = ["StateTopic", "SimView", "Pending"]


@dataclass
class Pending:
    """An event in a producer, with what to do once it is acknowledged (in the writer's next poll)."""

    event: Event
    on_durable: Callable[[], None] | None = None


@dataclass
class StateTopic:
    landed: list[Event] = field(default_factory=list)

    def land(self, event: Event) -> None:
        self.landed.append(event)


class SimView:
    """A reader of the state topic: the mapping of ``flow`` and every event, handed to subscribers."""

    def __init__(self, topic: StateTopic, subscribers: list[Callable[[Event], None]]) -> None:
        self._topic = topic
        self._read = 0
        self._subscribers = subscribers
        self.index = MappingIndex()

    def refresh(self) -> None:
        new = self._topic.landed[self._read :]
        self._read = len(self._topic.landed)
        self.index.add(new)
        for event in new:
            for subscriber in self._subscribers:
                subscriber(event)
