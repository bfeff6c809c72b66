"""The lakehouse's tables by name and path, without Spark: what SQL, the API and the dashboard read.

The names come from ``lakehouse.tables.GOLD_SPECS``, the one declaration every engine reads, so
DuckDB readers never import pyspark.
"""

from __future__ import annotations

from pathlib import Path

from ingest.paths import LakehousePaths
from lakehouse.tables import GOLD_SPECS
from replicator.events import registry

__all__ = ["GOLD_TABLE_NAMES", "table_paths"]

GOLD_TABLE_NAMES: tuple[str, ...] = tuple(spec.name for spec in GOLD_SPECS)  # in build order


def table_paths(paths: LakehousePaths) -> dict[str, Path]:
    """View name -> Delta table path: bronze, quarantine, every silver event type, every gold table."""
    out = {"bronze_events": paths.bronze, "quarantine": paths.quarantine}
    out.update({t: paths.silver(t) for t in registry().event_types()})
    out.update({name: paths.gold(name) for name in GOLD_TABLE_NAMES})
    return out
