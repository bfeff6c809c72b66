"""The gold tables' DuckDB twins by name (``lakehouse.duck.engine.update_table``): each spec's
``lakehouse.tables.<name>.duck.TWIN``."""

from __future__ import annotations

import importlib

from lakehouse.duck.engine import Twin
from lakehouse.tables import GOLD_SPECS

__all__ = ["TWINS"]

TWINS: dict[str, Twin] = {
    spec.name: importlib.import_module(f"lakehouse.tables.{spec.name}.duck").TWIN for spec in GOLD_SPECS
}
