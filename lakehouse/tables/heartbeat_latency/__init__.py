"""Gold ``heartbeat_latency``'s contract: one row per observed heartbeat, its latency along its path."""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "HEARTBEAT_KEY"]

HEARTBEAT_KEY = ("origin_cluster", "origin_timestamp_ms")

SPEC = GoldSpec(
    name="heartbeat_latency",
    key=HEARTBEAT_KEY,
    row_id=(*HEARTBEAT_KEY, "event_id"),
    sources=("heartbeat",),
)
