"""Every gold table on Spark, in build order: each spec's ``lakehouse.tables.<name>.spark.TABLE``."""

from __future__ import annotations

import importlib

from lakehouse.gold import GoldTable
from lakehouse.tables import GOLD_SPECS

__all__ = ["GOLD_TABLES"]

GOLD_TABLES: tuple[GoldTable, ...] = tuple(
    importlib.import_module(f"lakehouse.tables.{spec.name}.spark").TABLE for spec in GOLD_SPECS
)
