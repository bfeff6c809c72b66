"""How long a stopping flow may wait for its target: the stop budget.

On SIGTERM (or a stop request) a flow drains what is in flight and commits. While the target is
down that drain could wait forever, so once the stop is asked for, every wait on the target (the
drain, a transaction's commit or abort) is bounded by ``stop_timeout_seconds`` in all. When the
budget is spent, ``StopTimedOut`` is raised from that wait and the flow stops without what the
target has not acknowledged: at-least-once commits only positions that a durable offset sync
covers, exactly-once leaves its open transaction uncommitted (its successor's
``init_transactions`` aborts it), so the records not acknowledged are copied again at restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["StopBudget", "StopTimedOut"]


class StopTimedOut(Exception):  # noqa: N818 (a signal, not an error)
    """The flow was asked to stop and the target did not take what is in flight within the budget."""


class StopBudget:
    """Starts counting when ``stopping()`` first answers True; ``check`` raises once it is spent."""

    def __init__(self, seconds: float, stopping: Callable[[], bool]) -> None:
        self.seconds = seconds
        self._stopping = stopping
        self._until: float | None = None

    def check(self, waiting_for: str) -> None:
        """Raise ``StopTimedOut`` if the flow is stopping and has waited ``seconds`` since the stop."""
        if self._until is None:
            if not self._stopping():
                return
            self._until = time.monotonic() + self.seconds
        if time.monotonic() >= self._until:
            raise StopTimedOut(f"{waiting_for} not done {self.seconds:g} s after the stop")

    def left(self) -> float | None:
        """Seconds left of the budget once the flow is stopping (0 when spent); None while it is not."""
        if self._until is None:
            if not self._stopping():
                return None
            self._until = time.monotonic() + self.seconds
        return max(0.0, self._until - time.monotonic())

    @property
    def spent(self) -> bool:
        return self._until is not None and time.monotonic() >= self._until
