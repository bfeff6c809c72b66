"""Gold ``failovers``' contract: every failover applied, one row per offset written, and its measured
outcome.
"""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "KEY"]

KEY = ("flow",)

SPEC = GoldSpec(
    name="failovers",
    key=KEY,
    row_id=("failover_event_id", "group", "source_topic", "partition"),
    sources=("failover", "checkpoint"),
)
