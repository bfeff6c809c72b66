"""Gold ``topology``'s contract: per (origin cluster, observing cluster), how heartbeats travel."""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "KEY"]

KEY = ("origin_cluster", "cluster")

SPEC = GoldSpec(name="topology", key=KEY, row_id=KEY, sources=("heartbeat",), depends_on=("heartbeat_latency",))
