"""Gold ``topology``'s contract: per (origin cluster, observing cluster), how heartbeats travel."""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "KEY", "ORIGIN"]

KEY = ("origin_cluster", "cluster")  # one row each
# A late observation of one hop changes the next hop's latency (``heartbeat_latency.hop_latency_ms``),
# seen at another cluster: a new heartbeat of an origin recomputes every row of that origin.
ORIGIN = ("origin_cluster",)

SPEC = GoldSpec(name="topology", key=ORIGIN, row_id=KEY, sources=("heartbeat",), depends_on=("heartbeat_latency",))
