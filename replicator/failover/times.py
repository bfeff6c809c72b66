"""``--at TIME``: an ISO 8601 date-time (UTC when it names no zone) or epoch milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime

from replicator.errors import FailoverError

__all__ = ["parse_time", "format_time"]


def parse_time(text: str) -> int:
    """Epoch milliseconds of ``text``; ``FailoverError`` naming the expected forms otherwise."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FailoverError(
            f"--at {text!r} is neither an ISO 8601 time (2026-11-22T04:03:00Z) nor epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
