"""Rejoining the consumer group when librdkafka does not after it lost the flow's partitions.

When the source's group coordinator goes away (a broker restart) the consumer's session can
expire: librdkafka reports the assignment *lost* and is meant to rejoin by itself. Under load it
sometimes does not (the consumer keeps polling with no assignment and never joins again; seen once
in CI, 8 minutes without a record after a 3 s source restart, and reported against librdkafka for
coordinator outages). A flow with no partitions copies nothing and says nothing, so the runner
arms this watchdog on a loss and disarms it on the next assignment (an empty one counts: the
group answered). If no assignment arrived within ``after_s``, ``due`` says so once and re-arms, and
the runner subscribes anew, which starts a fresh join. Pure logic on a caller's clock, so a test
can drive it without a broker.
"""

from __future__ import annotations

__all__ = ["RejoinWatchdog"]


class RejoinWatchdog:
    """Armed by a loss of partitions, disarmed by any assignment; ``due`` after ``after_s`` without one."""

    def __init__(self, after_s: float) -> None:
        if after_s <= 0:
            raise ValueError(f"after_s must be positive, got {after_s}")
        self._after_s = after_s
        self._armed_at: float | None = None
        self.rejoins = 0

    @property
    def armed(self) -> bool:
        return self._armed_at is not None

    def lost(self, now: float) -> None:
        """Partitions were lost: an assignment is expected within ``after_s`` (an earlier arm stays)."""
        if self._armed_at is None:
            self._armed_at = now

    def assigned(self) -> None:
        """The group answered with an assignment (possibly empty): nothing to watch."""
        self._armed_at = None

    def due(self, now: float) -> bool:
        """True once ``after_s`` passed since the loss with no assignment; then waits ``after_s`` again."""
        if self._armed_at is None or now - self._armed_at < self._after_s:
            return False
        self._armed_at = now
        self.rejoins += 1
        return True
