"""The lakehouse's tables by name and path, without Spark: what SQL, the API and the dashboard read.

``lakehouse.gold_tables`` defines how each gold table is built (Spark); this module only names
them, so DuckDB readers never import pyspark. A test holds the two lists equal.
"""

from __future__ import annotations

from pathlib import Path

from ingest.paths import LakehousePaths
from replicator.events import registry

__all__ = ["GOLD_TABLE_NAMES", "table_paths"]

# In build order, as ``lakehouse.gold_tables.GOLD_TABLES``.
GOLD_TABLE_NAMES: tuple[str, ...] = (
    "offset_mapping",
    "group_offsets",
    "rpo",
    "rpo_groups",
    "divergence",
    "heartbeat_latency",
    "topology",
    "failovers",
    "failbacks",
)


def table_paths(paths: LakehousePaths) -> dict[str, Path]:
    """View name -> Delta table path: bronze, quarantine, every silver event type, every gold table."""
    out = {"bronze_events": paths.bronze, "quarantine": paths.quarantine}
    out.update({t: paths.silver(t) for t in registry().event_types()})
    out.update({name: paths.gold(name) for name in GOLD_TABLE_NAMES})
    return out
