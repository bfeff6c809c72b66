"""How old a figure is, and whether it may still be shown as now.

A watermark's figures (records and seconds not replicated) are true at the moment it was observed.
Replicators emit one per ``watermarks_interval_seconds`` and ``lakehouse serve`` publishes them a
build later; older than that, nobody measured since (every replicator of the flow is down and no
``mirrorlake observe --follow`` runs, or the source does not answer) and the figure is a past
observation. Records keep arriving while nothing copies, so a stale count of records not replicated
is a lower bound ("at least N, as of T"), and so is the age of the oldest of them (it grew by the
figure's age). Shown as current, it would be the wrong number in the headline an operator acts on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dashboards import fmt

__all__ = ["Freshness", "freshness", "stale_after_ms", "STALE_GRACE_MS"]

# a lakehouse build cadence's worth of delay beyond two watermark intervals (``lakehouse serve
# --interval`` is 20-30 s in the docs' examples)
STALE_GRACE_MS = 30_000


@dataclass(frozen=True)
class Freshness:
    """``as_of_ms``: when the oldest of the figures was observed; ``age_ms`` its age at ``now``."""

    as_of_ms: int
    age_ms: int
    stale: bool

    def bound(self, value: float | None, unit: str = "") -> str:
        """``value`` as the reader should take it: itself while fresh, ``≥ value`` once stale."""
        text = fmt.count(value, unit)
        return f"≥ {text}" if self.stale and value is not None and text != fmt.UNKNOWN else text

    def older_by_age(self, seconds: float | None) -> str:
        """An age measured at the observation, as now: ``≥ seconds + age`` once stale."""
        if seconds is None:
            return fmt.UNKNOWN
        if not self.stale:
            return fmt.duration_ms(seconds * 1000)
        return f"≥ {fmt.duration_ms(seconds * 1000 + self.age_ms)}"

    def caption(self, now_ms: int) -> str:
        """``as of <time> (<age>)``, and why it is a bound once stale."""
        text = f"as of {fmt.when(self.as_of_ms, now_ms)}"
        if self.stale:
            text += (
                ": no newer watermark (no replicator of the flow runs, or the source does not answer); "
                "`mirrorlake observe --follow` beside the replicators keeps the figures live"
            )
        return text


def stale_after_ms(interval_s: float) -> float:
    """How old a figure of watermarks emitted every ``interval_s`` may be before it is stale: two
    intervals and a build's delay."""
    return 2 * interval_s * 1000 + STALE_GRACE_MS


def freshness(observed_ms: Iterable[int], now_ms: int, interval_s: float) -> Freshness | None:
    """The freshness of figures observed at ``observed_ms`` (None: no figure): stale once the oldest
    is older than two watermark intervals (``interval_s``) and a build's delay."""
    times = [int(t) for t in observed_ms if not fmt.missing(t)]
    if not times:
        return None
    as_of = min(times)
    age = max(0, now_ms - as_of)
    return Freshness(as_of, age, age > stale_after_ms(interval_s))
