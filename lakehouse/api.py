"""The lakehouse as a Python library: read a table (optionally as of a version or time), run SQL.

``Lakehouse(config)`` (or ``Lakehouse.at(path)``) reads through DuckDB's delta extension, so it
needs no Spark: ``table(name, as_of=...)`` returns a ``pyarrow.Table``, ``query(sql, as_of=...)``
a ``pandas.DataFrame``; the SQL sees a view per table and the named macros of ``lakehouse.sql``.
Spark reads the same tables with ``spark.read.format("delta").load(lakehouse.path(name))``
(``versionAsOf`` / ``timestampAsOf`` for time travel).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.paths import LakehousePaths
from ingest.storage import as_root
from lakehouse.catalog import table_paths
from lakehouse.sql import (
    LakehouseSQL,
    TableNotFoundError,
    commit_times,
    is_delta_table,
    parse_as_of,
)
from replicator.config import MirrorlakeConfig

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["Lakehouse"]

AsOf = int | str | datetime | None


class Lakehouse:
    """Read access to one lakehouse; every call opens (and closes) its own DuckDB connection."""

    def __init__(self, config: MirrorlakeConfig) -> None:
        self.paths = LakehousePaths.of(config.lakehouse)

    @classmethod
    def at(cls, root: Path | str) -> Lakehouse:
        self = cls.__new__(cls)
        self.paths = LakehousePaths(as_root(root))
        return self

    def tables(self) -> list[str]:
        """Names of the tables that exist now (views of ``query``)."""
        return [name for name, path in table_paths(self.paths).items() if is_delta_table(path)]

    def history(self) -> dict[str, list[tuple[int, int]]]:
        """Per existing table: (version, commit epoch ms) of each commit still in its Delta log, oldest first."""
        return {name: commit_times(path) for name, path in table_paths(self.paths).items() if is_delta_table(path)}

    def path(self, name: str) -> str:
        """The Delta table path of ``name`` (for Spark); ``TableNotFoundError`` if there is none."""
        path = table_paths(self.paths).get(name)
        if path is None or not is_delta_table(path):
            raise TableNotFoundError(
                f"no table {name!r} in {self.paths.root} (tables: {', '.join(self.tables()) or 'none'})"
            )
        return str(path)

    def table(self, name: str, *, as_of: AsOf = None) -> pa.Table:
        """The whole table ``name`` as it is (or was ``as_of`` a version or timestamp)."""
        self.path(name)
        sql = self._open(as_of)
        try:
            if name not in sql.views:
                raise TableNotFoundError(f"table {name!r} did not exist at --as-of {as_of}")
            return sql.arrow(f"SELECT * FROM {name}")
        finally:
            sql.close()

    def query(self, sql_text: str, params: Sequence[object] = (), *, as_of: AsOf = None) -> pd.DataFrame:
        """Run one DuckDB ``SELECT`` over the views and macros, ``params`` filling its ``?``
        placeholders (never splice a value into the text); ``SQLError`` with DuckDB's message on failure."""
        sql = self._open(as_of)
        try:
            return sql.arrow(sql_text, list(params) or None).to_pandas()
        finally:
            sql.close()

    def _open(self, as_of: AsOf) -> LakehouseSQL:
        moment = parse_as_of(as_of) if isinstance(as_of, str) else as_of
        return LakehouseSQL(self.paths.root, as_of=moment)
