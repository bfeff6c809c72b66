"""Stop requests: how ``mirrorlake failover apply --stop-replication`` stops every replicator of a flow.

The request is a ``lifecycle`` event of the flow with state ``stop_requested`` in the flow's state
topic (on the target, which a failover can always reach; the source may be gone). Every flow runner
watches that topic from where it stood when the runner started (so an old request never stops a new
run) and, on a request, stops its own flow the ordinary way: the copy loop drains, publishes its
final offset syncs, checkpoints and watermarks, and emits ``stopped``. Other flows of the process
go on. Every process of a flow watches, not only the one that runs the state tasks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from replicator.client.state_reader import StateLogFollower
from replicator.errors import ReplicationError
from replicator.events import Lifecycle
from replicator.kafka.log_bounds import throwaway_reader, topic_bounds

__all__ = ["STOP_REQUESTED", "StopRequestWatcher"]

_log = logging.getLogger(__name__)
STOP_REQUESTED = "stop_requested"
_TIMEOUT_S = 10.0


def _end_offsets(conf: dict[str, Any], topic: str) -> dict[int, int]:
    with throwaway_reader(conf, "mirrorlake-stop-watch-start") as consumer:
        bounds = topic_bounds(consumer, topic, timeout_s=_TIMEOUT_S)
    return {p: end for p, (_start, end) in (bounds or {}).items()}


class StopRequestWatcher:
    """Calls ``on_request`` once when a ``stop_requested`` lifecycle event of ``flow`` arrives after
    ``start``; polls every ``interval_s`` on its own daemon thread until ``close``."""

    def __init__(
        self,
        target_conf: dict[str, Any],
        state_topic: str,
        flow: str,
        on_request: Callable[[], None],
        *,
        interval_s: float = 1.0,
    ) -> None:
        self._conf = target_conf
        self._topic = state_topic
        self._flow = flow
        self._on_request = on_request
        self._interval_s = interval_s
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._follower: StateLogFollower | None = None

    def start(self) -> None:
        """Fix the starting point now (synchronously), then watch in the background."""
        try:
            start = _end_offsets(self._conf, self._topic)
        except KafkaException as exc:
            _log.warning("flow %s: stop requests not watched (state topic unreadable: %s)", self._flow, exc)
            return
        self._follower = StateLogFollower(
            self._conf, self._topic, event_types=("lifecycle",), name="mirrorlake-stop-watch", start_offsets=start
        )
        self._thread = threading.Thread(target=self._loop, name=f"stop-watch-{self._flow}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        assert self._follower is not None
        while not self._closed.wait(self._interval_s):
            try:
                events = self._follower.poll(_TIMEOUT_S).events
            except ReplicationError as exc:
                _log.warning("flow %s: cannot read stop requests: %s", self._flow, exc)
                continue
            request = next(
                (e for e in events if isinstance(e, Lifecycle) and e.flow == self._flow and e.state == STOP_REQUESTED),
                None,
            )
            if request is not None:
                _log.info("flow %s: stop requested by %s (%s)", self._flow, request.replicator_id, request.reason)
                self._on_request()
                return

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(2 * _TIMEOUT_S)
        if self._follower is not None:
            self._follower.close()
