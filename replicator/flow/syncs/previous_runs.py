"""``core.resume.PreviousRun`` shared by the threads that read the state log.

The runner feeds one ``PreviousRun`` from two views of the state log: the state tasks' lane and the
loop's own view, refreshed right before each takeover. The core is single-threaded; this holds its
lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from replicator.events import Event, Lifecycle
from replicator.flow.core.resume import PreviousRun

__all__ = ["SharedPreviousRun"]


class SharedPreviousRun:
    """A ``PreviousRun`` whose ``take`` and ``verdict`` may be called from any thread."""

    def __init__(self, own_start: Lifecycle) -> None:
        self._run = PreviousRun(own_start)
        self._lock = threading.Lock()

    def take(self, event: Event) -> None:
        with self._lock:
            self._run.take(event)

    def verdict(self) -> Callable[[str, int], bool]:
        with self._lock:
            return self._run.verdict()

    @property
    def crashed(self) -> bool:
        with self._lock:
            return self._run.crashed
