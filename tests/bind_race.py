"""A local broker started on ports found free can lose them before its JVM binds: start again."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

from replicator.errors import ClusterStartError

__all__ = ["on_new_ports_after_a_bind_race"]

_BIND_ATTEMPTS = 3
_T = TypeVar("_T")


def on_new_ports_after_a_bind_race(start: Callable[[int], _T], what: str) -> _T:
    """``start(attempt)`` (attempt 1, 2, 3), again when a broker could not bind its port.

    A port found free can still be taken before the broker's JVM binds it, seconds later (another
    xdist worker picks its ports at random in the same range). ``start`` picks its ports afresh
    each attempt and stops what it started when it fails; a bind failure is retried with a warning
    naming the port, any other start failure is raised."""
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        try:
            return start(attempt)
        except ClusterStartError as exc:
            if "Address already in use" not in str(exc) or attempt == _BIND_ATTEMPTS:
                raise
            warnings.warn(f"{what} started again on new ports: " + " | ".join(str(exc).splitlines()[:4]), stacklevel=1)
    raise AssertionError("unreachable")
