"""Bounded waits for things that happen asynchronously on real clusters (not timing assertions)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 90.0, every_s: float = 0.3) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` if it never does within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")
