"""What a gold table is, independent of the engine that builds it.

A ``GoldSpec`` is the table's contract, declared once (in ``lakehouse.tables.<name>``) and read by
the Spark builder (``lakehouse.gold.GoldTable``), the DuckDB twin (``lakehouse.duck.engine.Twin``),
the SQL catalogue (``lakehouse.catalog``) and the harness that holds the engines equal. It imports
no engine, so a reader of the lakehouse (SQL, the dashboard) never loads pyspark for a key name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GoldSpec", "HasSpec"]


@dataclass(frozen=True)
class GoldSpec:
    """One gold table's contract.

    ``key``: rows are grouped by it, and all rows of one key depend only on the silver rows of that
    key (what makes an incremental build of the touched keys equal a full build). ``row_id``: unique
    per row across the whole table (the key's columns, or an event id), what a MERGE matches on
    (null-safe). ``tail_order``: the columns that order a key's rows when an incremental build
    recomputes only a key's tail (from some position on); empty when a touched key is always
    recomputed whole. ``sources``: the silver
    event types it reads; ``depends_on``: the gold tables it reads, built before it.
    """

    name: str
    key: tuple[str, ...]
    row_id: tuple[str, ...]
    sources: tuple[str, ...]
    depends_on: tuple[str, ...] = ()
    tail_order: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.key or not self.row_id:
            raise ValueError(f"gold {self.name}: a key and a row_id are required")
        if not self.sources:
            raise ValueError(f"gold {self.name}: reads no silver table")


class HasSpec:
    """An engine's table (Spark ``GoldTable``, DuckDB ``Twin``): the spec's fields, read through."""

    spec: GoldSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def key(self) -> tuple[str, ...]:
        return self.spec.key

    @property
    def row_id(self) -> tuple[str, ...]:
        return self.spec.row_id

    @property
    def sources(self) -> tuple[str, ...]:
        return self.spec.sources

    @property
    def depends_on(self) -> tuple[str, ...]:
        return self.spec.depends_on

    @property
    def tail_order(self) -> tuple[str, ...]:
        return self.spec.tail_order
