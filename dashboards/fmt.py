"""How the dashboard writes times, durations and counts for people (pure functions, no Streamlit).

Every instant is shown in UTC with its age relative to a reference moment (``now``: the wall
clock, or the "as of" moment when the dashboard travels back in time), e.g.
``2026-11-22 14:03:07 UTC (5 min ago)``. ``None`` is shown as an em dash, never as 0: an unknown
value is not a zero one.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from replicator.text import printable

__all__ = ["UNKNOWN", "missing", "utc", "ago", "when", "duration_ms", "count", "rate", "to_datetime", "text", "code"]

UNKNOWN = "—"
_MARKDOWN = re.compile(r"([\\`*_\[\]<~|$])")  # what can start markup inside a line (and $: LaTeX)


def text(value: object) -> str:
    """``value`` (a name from a cluster or the state topic) as plain text inside Markdown: control
    characters escaped (``replicator.text.printable``), every character that can start Markdown inside
    a line backslash-escaped, so a forged flow or group name shows as what it is, never as a link,
    an image, formatting or a formula."""
    return _MARKDOWN.sub(r"\\\1", printable(str(value), limit=500))


def code(value: object) -> str:
    """``value`` as an inline code span: fenced by more backticks than it holds in a row (CommonMark)."""
    shown = printable(str(value), limit=500)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {shown} {fence}"


def missing(value: object) -> bool:
    """None or NaN (what pandas gives for a null number)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def utc(ms: int | None) -> str:
    """``2026-11-22 14:03:07 UTC``."""
    if ms is None or missing(ms):
        return UNKNOWN
    return to_datetime(int(ms)).strftime("%Y-%m-%d %H:%M:%S UTC")


def moment(ms: int | None, now_ms: int) -> str:
    """A moment short enough for a metric: ``14:03:07 UTC`` within a day of ``now_ms``, else
    ``2026-11-22`` (``utc`` gives it whole, for its help or a caption)."""
    if ms is None or missing(ms):
        return UNKNOWN
    if abs(now_ms - int(ms)) < 86_400_000:
        return to_datetime(int(ms)).strftime("%H:%M:%S UTC")
    return to_datetime(int(ms)).strftime("%Y-%m-%d")


def duration_ms(ms: float | None) -> str:
    """A duration in the unit people read fastest: ``850 ms``, ``4.2 s``, ``3 min 20 s``, ``2 h 5 min``, ``3.0 y``."""
    if ms is None or missing(ms):
        return UNKNOWN
    sign, ms = ("-" if ms < 0 else ""), abs(ms)
    if ms < 1000:
        return f"{sign}{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {secs} s" if secs else f"{sign}{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{sign}{hours} h {minutes} min" if minutes else f"{sign}{hours} h"
    days = hours // 24
    if days < 730:
        return f"{sign}{days} d"
    return f"{sign}{days / 365.25:.1f} y"


def ago(ms: int | None, now_ms: int) -> str:
    """``5 min ago`` / ``in 3 s`` / ``just now`` relative to ``now_ms`` (one unit: it is read at a glance)."""
    if ms is None or missing(ms):
        return UNKNOWN
    diff = now_ms - int(ms)
    if abs(diff) < 1000:
        return "just now"
    text = _coarse(abs(diff))
    return f"{text} ago" if diff > 0 else f"in {text}"


def _coarse(ms: int) -> str:
    """One unit, rounded down: ``42 s``, ``16 min``, ``5 h``, ``3 d``, ``2.1 y``."""
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h"
    return duration_ms(ms)


def when(ms: int | None, now_ms: int) -> str:
    """``2026-11-22 14:03:07 UTC (5 min ago)``."""
    if ms is None or missing(ms):
        return UNKNOWN
    return f"{utc(ms)} ({ago(ms, now_ms)})"


def count(n: float | None, unit: str = "") -> str:
    """``1,234,567 records`` from ``count(1234567, "record")``; the unit is singular (``1 record``)."""
    if n is None or missing(n):
        return UNKNOWN
    text = f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"
    if not unit:
        return text
    return f"{text} {unit if n == 1 else unit + 's'}"


def per_second(value: float | None) -> str:
    """The number of a rate whose unit is in its label (``Records/s``): one decimal below 10."""
    if value is None or missing(value):
        return UNKNOWN
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def rate(per_second: float | None, unit: str = "records") -> str:
    """``12,345 records/s`` (one decimal below 10)."""
    if per_second is None or missing(per_second):
        return UNKNOWN
    text = f"{per_second:,.1f}" if per_second < 10 else f"{per_second:,.0f}"
    return f"{text} {unit}/s"
