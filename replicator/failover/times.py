"""``--at TIME``: an ISO 8601 date-time (UTC when it names no zone) or epoch milliseconds.

``parse_time`` returns the instant the user named, faithfully, even before 1970 (a negative
number): it is the plan's business to resolve it to a real position, never Kafka's. Kafka reads a
negative time in ListOffsets as a sentinel (-1 "latest", -2 "earliest"), so no caller may pass
such a value on (``lookup_time``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from replicator.errors import FailoverError

__all__ = ["parse_time", "format_time", "lookup_time", "shown"]

_EPOCH_MS = re.compile(r"[+-]?[0-9]+", re.ASCII)
_EPOCH_MS_DIGITS = 15  # up to year 33658: anything longer is a mistake, not a time
_FORMS = "an ISO 8601 time (2026-11-22T04:03:00Z, UTC when no zone is named) or epoch milliseconds"
_SHOWN_MAX = 80


def shown(text: str, limit: int = _SHOWN_MAX) -> str:
    """``text`` quoted for an error line: control characters escaped (``repr``), at most ``limit`` characters."""
    quoted = repr(text)
    return quoted if len(quoted) <= limit else f"{quoted[: limit - 14]}...' ({len(text)} chars)"


def parse_time(text: str) -> int:
    """Epoch milliseconds of ``text`` (negative before 1970); ``FailoverError`` naming the forms otherwise."""
    value = text.strip()
    if _EPOCH_MS.fullmatch(value):
        if len(value.lstrip("+-")) > _EPOCH_MS_DIGITS:
            raise FailoverError(f"--at {shown(text)}: epoch milliseconds out of range; expected {_FORMS}")
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        # exact integer arithmetic: float seconds lose milliseconds far from 1970
        delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        why = str(exc) if value and str(exc) and "Invalid isoformat" not in str(exc) else "not a time"
        raise FailoverError(f"--at {shown(text)}: {why}; expected {_FORMS}") from None
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def lookup_time(at_ms: int) -> int:
    """The time to ask Kafka for ``at_ms``: never below 0.

    A broker refuses record timestamps below 0 (but -1, "none", of the oldest message format), so
    a time before 1970 is before every record, exactly as 0 is: the lookup finds the partition's
    first record, where such a time resumes.
    """
    return max(at_ms, 0)


def format_time(ms: int | None) -> str:
    """``ms`` as ISO 8601 UTC, or ``<ms> ms`` for an instant a calendar cannot show (year < 1 or > 9999)."""
    if ms is None:
        return "-"
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
