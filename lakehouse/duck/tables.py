"""The gold tables with a DuckDB twin, by name (``lakehouse.duck.engine.update_table``)."""

from __future__ import annotations

from lakehouse.duck import offset_mapping
from lakehouse.duck.engine import Twin

__all__ = ["TWINS"]

TWINS: dict[str, Twin] = {
    "offset_mapping": offset_mapping.TWIN,
}
