"""A flow with records to copy that copies none, and no outage to explain it: said, then mended.

``/health`` said ``ok`` for eight minutes once in CI while a flow, its target frozen for 15 s and
answering again, copied nothing more (the process stopped cleanly on SIGTERM, so its loop was
turning). Whatever holds a consumer that way (a partition left paused by a pause and a rebalance
crossing each other, a fetcher that never asks again), the flow's own figures show it: the
consumer's positions do not move and nothing is acknowledged, while the source has records past
those positions and no cluster is waited for. ``StallWatch`` turns that into a state:

- after ``after_s`` of it, a stall: the runner logs one WARNING with what it sees, ``/health`` says
  ``degraded`` with the reason under ``loop``, and the runner resumes every assigned partition;
- after twice ``after_s``, the runner joins the consumer group anew (a fresh fetch state);
- any progress, an outage or nothing left to copy ends it (one WARNING line, beside the first).

Pure logic on the caller's clock, so a test drives it without a broker.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["StallWatch", "RESUME", "REJOIN"]

RESUME = 1  # the first remedy: resume every assigned partition
REJOIN = 2  # the second: join the consumer group anew


@dataclass
class StallWatch:
    """``observe`` at each measurement says which remedy is due now (0: none); ``stalled_s`` how long
    the current stall has lasted."""

    after_s: float
    _progress: Hashable = field(default=None, init=False)
    _since: float | None = field(default=None, init=False)
    _applied: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.after_s <= 0:
            raise ValueError(f"after_s must be positive, got {self.after_s}")

    def observe(self, now: float, progress: Hashable, behind: int, excused: bool) -> int:
        """Note the flow's ``progress`` (anything that changes when it moves), the records ``behind``
        its positions, and whether an outage ``excused`` it; the remedy due now (``RESUME``,
        ``REJOIN``, or 0), each returned once per stall."""
        if excused or behind <= 0 or progress != self._progress or self._since is None:
            self._progress, self._since, self._applied = progress, now, 0
            return 0
        held = now - self._since
        due = REJOIN if held >= 2 * self.after_s else RESUME if held >= self.after_s else 0
        if due > self._applied:
            self._applied = due
            return due
        return 0

    def stalled_s(self, now: float) -> float:
        """Seconds the current stall has lasted (0 when the flow is not stalled)."""
        if self._applied == 0 or self._since is None:
            return 0.0
        return now - self._since
