"""Where mirrorlake caches what it downloads: Kafka's jars (mvn), Spark's packages (ivy).

One root for every package, ``$MIRRORLAKE_CACHE`` or ``~/.cache/mirrorlake``, so a CI cache or a
machine image keeps one directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$MIRRORLAKE_CACHE`` if set, else ``~/.cache/mirrorlake``."""
    env = os.environ.get("MIRRORLAKE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mirrorlake"
