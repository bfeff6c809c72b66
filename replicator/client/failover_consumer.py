"""A consumer that follows its group through a failover and a failback, with no restart.

``FailoverConsumer`` has ``confluent_kafka.Consumer``'s poll/consume/commit surface. It follows the
flow's state topic on the flow's target (where ``failover apply`` and ``failback apply --groups``
record what they did) and moves itself:

- a ``failover`` event naming its group: it closes its consumer on the source and continues on the
  target, subscribed to the policy's names of its topics (``A.orders`` for ``orders``), from the
  offsets the failover wrote there;
- a ``failback`` event (action ``groups``) naming it: the same back to the source, from the offsets
  the failback wrote, under the topics' own names;
- a ``consumer_release`` event naming it on the cluster it consumes from (the commands'
  ``--move-consumers``): it commits its positions there and leaves the group, so the move reads
  where it really is, and delivers nothing until the move's event (or ``release_timeout_s``, after
  which it joins again where it was: the move did not happen).

The contract of a position: a record ``poll`` returned counts as processed at the next ``poll``
(``consume``) call, as with auto-commit; a release commits those positions. With it a move re-reads
and loses nothing the flow copied; without a release (the source is down, or the command had no
``--move-consumers``) the move starts at what the group had committed when it ran.

What a move costs reaches the application: ``on_move(Move)`` runs on the thread that polls, before
the first record from the other cluster. ``Move.records_unreplicated`` (records at or after the
group's commit that never reached the target: the source died first), ``records_lost`` and
``records_reread`` are the failover plan's figures for the group; 0 for a failback. At
construction the history decides where the group is now (an application restarted after a
failover starts on the target). The state topic is read once at construction and then every
``check_every_s`` on a thread of its own; ``poll`` acts on what it found.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from replicator.client.policy import policy_from_config
from replicator.client.state_reader import StateLogFollower
from replicator.config import MirrorlakeConfig
from replicator.errors import ConfigError, MirrorlakeError
from replicator.events import ConsumerRelease, Event, Failback, Failover
from replicator.kafka.clients import new_consumer

__all__ = ["FailoverConsumer", "Move"]

_log = logging.getLogger(__name__)
_EVENTS = (ConsumerRelease.event_type, Failover.event_type, Failback.event_type)


@dataclass(frozen=True)
class Move:
    """One move of the consumer's group, as ``on_move`` receives it."""

    group: str
    reason: str  # failover or failback
    from_cluster: str
    to_cluster: str
    topics: tuple[str, ...]  # the names subscribed to on ``to_cluster``
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, offset) the move wrote for the group
    records_lost: int
    records_reread: int
    records_unreplicated: int  # failover: records at or after the group's commit that never reached the target


class FailoverConsumer:
    """See the module doc. ``consumer_config`` is the application's (``group.id`` required; no
    ``bootstrap.servers``: each cluster's address and security come from ``config``)."""

    def __init__(
        self,
        config: MirrorlakeConfig,
        flow: str,
        consumer_config: dict[str, Any],
        topics: Sequence[str],
        *,
        on_move: Callable[[Move], None] | None = None,
        check_every_s: float = 1.0,
        release_timeout_s: float = 300.0,
    ) -> None:
        if not consumer_config.get("group.id"):
            raise ConfigError("FailoverConsumer: consumer_config needs a group.id (the group that moves)")
        if "bootstrap.servers" in consumer_config:
            raise ConfigError(
                "FailoverConsumer: consumer_config must not set bootstrap.servers: each cluster's comes from the config"
            )
        if not topics:
            raise ConfigError("FailoverConsumer: name at least one topic (as named on the flow's source)")
        self._config = config
        self._flow = config.flow(flow)
        self._app_conf = dict(consumer_config)
        self.group = str(consumer_config["group.id"])
        self._topics = tuple(topics)
        self._policy = policy_from_config(config.replication_policy)
        self._on_move = on_move
        self._check_every_s = check_every_s
        self._release_timeout_s = release_timeout_s
        self.cluster = self._flow.source
        self._released_at: float | None = None  # monotonic time of the release this consumer acted on
        self._state = StateLogFollower(
            config.cluster(self._flow.target).client_config(),
            config.state_topic,
            event_types=_EVENTS,
            name=f"failover-consumer-{self.group}",
        )
        history = sorted(self._mine(self._state.poll().events), key=lambda e: e.emitted_at_ms)
        released_ms: int | None = None
        for event in history:
            if isinstance(event, ConsumerRelease):
                released_ms = event.emitted_at_ms if event.cluster == self.cluster else released_ms
            elif (move := self._move_of(event)) is not None:  # the history places the consumer
                self.cluster, released_ms = move.to_cluster, None
        self._consumer: Consumer | None = None
        if released_ms is not None and time.time() * 1000 - released_ms < release_timeout_s * 1000:
            self._released_at = time.monotonic() - (time.time() * 1000 - released_ms) / 1000
            _log.info("group %s: a move from %s is under way; waiting for it", self.group, self.cluster)
        else:
            self._consumer = self._open()
        self._news: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._follower = threading.Thread(target=self._follow, name=f"failover-consumer-{self.group}", daemon=True)
        self._follower.start()

    # -- the Consumer surface -------------------------------------------------------------------

    def poll(self, timeout: float = -1) -> Message | None:
        self._check()
        if self._consumer is None:
            time.sleep(min(self._check_every_s, timeout) if timeout >= 0 else self._check_every_s)
            self._check()
            return None
        return self._consumer.poll(timeout)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        self._check()
        if self._consumer is None:
            time.sleep(min(self._check_every_s, timeout) if timeout >= 0 else self._check_every_s)
            self._check()
            return []
        return self._consumer.consume(num_messages, timeout)

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """``Consumer.commit`` on the cluster consumed from; nothing while released (the release
        committed every position, and the group may already be on the other cluster)."""
        if self._consumer is None:
            return None
        return self._consumer.commit(*args, **kwargs)

    def close(self) -> None:
        self._stop.set()
        self._follower.join()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._state.close()

    def __getattr__(self, name: str) -> Any:
        """Anything else (``assignment``, ``position``, ``committed``...) of the current consumer."""
        consumer = self.__dict__.get("_consumer")
        if consumer is None:
            raise AttributeError(f"{name}: the consumer of group {self.__dict__.get('group')} is between clusters")
        return getattr(consumer, name)

    # -- following the state topic --------------------------------------------------------------

    def _mine(self, events: Sequence[Event]) -> list[Event]:
        out: list[Event] = []
        for e in events:
            if e.flow != self._flow.name or self.group not in getattr(e, "groups", ()):
                continue
            if isinstance(e, Failback) and e.action != "groups":
                continue
            out.append(e)
        return out

    def _move_of(self, event: Event) -> Move | None:
        """The move a failover or failback event makes of this consumer's group (None: it is there already)."""
        to = self._flow.target if isinstance(event, Failover) else self._flow.source
        if to == self.cluster:
            return None
        if isinstance(event, Failover):
            rows = [o for o in event.offsets if o.group == self.group]
            offsets = tuple((o.target_topic, o.partition, o.offset) for o in rows)
            lost, reread = sum(o.records_lost for o in rows), sum(o.records_reread for o in rows)
            unreplicated, reason = sum(o.records_unreplicated or 0 for o in rows), "failover"
        else:
            assert isinstance(event, Failback)
            offsets = tuple((o.topic, o.partition, o.offset) for o in event.offsets if o.group == self.group)
            lost, reread, unreplicated, reason = 0, 0, 0, "failback"
        return Move(self.group, reason, self.cluster, to, self._names(to), offsets, lost, reread, unreplicated)

    def _follow(self) -> None:
        """The state topic's new events of this group, read on a thread of their own: a read can take
        seconds (end offsets asked behind the reader's fetches), the application's poll never waits for it."""
        while not self._stop.wait(self._check_every_s):
            try:
                events = self._mine(self._state.poll(timeout_s=5.0).events)
            except MirrorlakeError as exc:  # the target is down: its events wait for it
                _log.warning("group %s: state topic not read: %s", self.group, exc)
                continue
            for event in sorted(events, key=lambda e: e.emitted_at_ms):
                self._news.put(event)

    def _check(self) -> None:
        """Act, on the polling thread, on what the follower read since the last call."""
        now = time.monotonic()
        news: list[Event] = []
        while True:
            try:
                news.append(self._news.get_nowait())
            except queue.Empty:
                break
        for event in news:
            if isinstance(event, ConsumerRelease):
                if event.cluster == self.cluster and self._consumer is not None:
                    self._release()
                continue
            move = self._move_of(event)
            if move is not None:
                self._move(move)
        waited = now - self._released_at if self._released_at is not None else 0.0
        if self._consumer is None and waited > self._release_timeout_s:
            _log.warning(
                "group %s: released on %s %.0f s ago and no move followed: consuming there again",
                self.group, self.cluster, waited,
            )  # fmt: skip
            self._released_at = None
            self._consumer = self._open()

    def _release(self) -> None:
        """Commit the positions of everything delivered, then leave the group."""
        assert self._consumer is not None
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                _log.warning("group %s: positions not committed on %s at release: %s", self.group, self.cluster, exc)
        self._consumer.close()
        self._consumer = None
        self._released_at = time.monotonic()
        _log.info("group %s: committed and left %s for a move", self.group, self.cluster)

    def _move(self, move: Move) -> None:
        self.cluster = move.to_cluster
        if self._consumer is not None:  # not released: the move's offsets stand, this consumer's commits do not
            # closed aside: against a dead cluster a close waits out its group session, the move does not
            threading.Thread(target=self._consumer.close, name=f"close-{self.group}", daemon=True).start()
        self._released_at = None
        self._consumer = self._open()
        _log.info(
            "group %s: moved from %s to %s (%s); lost %d, re-read %d by the plan",
            self.group, move.from_cluster, move.to_cluster, move.reason, move.records_lost, move.records_reread,
        )  # fmt: skip
        if self._on_move is not None:
            self._on_move(move)

    def _names(self, cluster: str) -> tuple[str, ...]:
        if cluster == self._flow.source:
            return self._topics
        return tuple(self._policy.format_remote_topic(self._flow.source, t) for t in self._topics)

    def _open(self) -> Consumer:
        conf = {**self._config.cluster(self.cluster).client_config(), **self._app_conf}
        consumer = new_consumer(conf)
        consumer.subscribe(list(self._names(self.cluster)))
        return consumer
