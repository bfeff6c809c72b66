"""The gold tables with a DuckDB twin, by name (``lakehouse.duck.engine.update_table``)."""

from __future__ import annotations

from lakehouse.duck import divergence, failovers, group_offsets, heartbeats, offset_mapping, rpo, rpo_groups
from lakehouse.duck.engine import Twin

__all__ = ["TWINS"]

TWINS: dict[str, Twin] = {
    "offset_mapping": offset_mapping.TWIN,
    "group_offsets": group_offsets.TWIN,
    "rpo": rpo.TWIN,
    "rpo_groups": rpo_groups.TWIN,
    "divergence": divergence.TWIN,
    "heartbeat_latency": heartbeats.HEARTBEAT_LATENCY,
    "topology": heartbeats.TOPOLOGY,
    "failovers": failovers.TWIN,
    "failbacks": heartbeats.FAILBACKS,
}
