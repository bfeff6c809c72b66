"""One admin operation of a flow at a time, off the copy loop's thread.

Topic config and ACL sync ask both clusters (DescribeConfigs, DescribeAcls, maybe alter) every
``sync_topic_configs_interval_seconds``: tens of milliseconds during which a copy loop that ran it
itself copied nothing, which showed as a stall in the end-to-end latency of every record that
arrived meanwhile (p99). ``BackgroundCall`` runs the operation on a thread of its own; the loop
starts it when it is due and collects how the previous run ended when it starts the next one, so
an error is handled on the loop's thread, with the loop's rules (an outage waits, anything else
fails the flow), one interval later than before.

The operation must be safe to run beside the loop: it may use admin clients (librdkafka's are
thread-safe) and read what the loop publishes whole (a dict it replaces, never mutates).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["BackgroundCall"]

_log = logging.getLogger(__name__)


class BackgroundCall:
    """Runs ``operation`` on a daemon thread named ``name``, one run at a time."""

    def __init__(self, name: str, operation: Callable[[], object]) -> None:
        self._name = name
        self._operation = operation
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def take_error(self) -> BaseException | None:
        """How the last finished run failed (None: it succeeded, or none ran); cleared once taken."""
        if self.running:
            return None
        error, self._error = self._error, None
        return error

    def start(self) -> bool:
        """Start a run unless one is still going; True if it started."""
        if self.running:
            return False
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            self._operation()
        except BaseException as exc:  # handed to the loop's thread, which decides (take_error)
            self._error = exc

    def join(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a run in progress (a stopping flow)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                _log.warning("%s still running after %.0f s; leaving it", self._name, timeout_s)
