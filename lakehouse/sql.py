"""SQL over the lakehouse with DuckDB: every Delta table as a view, read through ``delta_scan``.

Reading a Delta table's parquet files directly gives wrong answers (removed files, deletion
vectors), so views always go through DuckDB's delta extension, loaded from the
``duckdb-extension-delta`` package (the extension host is not reachable from here).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from ingest.paths import LakehousePaths
from replicator.errors import MirrorlakeError

__all__ = ["LakehouseSQL", "SQLError", "TableNotFoundError", "QueryResult", "TABLES"]

_log = logging.getLogger(__name__)

# view name -> how to find its table under the lakehouse root
TABLES: dict[str, str] = {
    "bronze_events": "bronze",
    "quarantine": "quarantine",
    "offset_sync": "silver:offset_sync",
    "lifecycle": "silver:lifecycle",
    "offset_mapping": "gold:offset_mapping",
}

# Named macros: translation of a committed source offset through the exact mapping.
_MACROS = """
CREATE OR REPLACE MACRO translate_offset(f, t, p, c) AS (
    SELECT CASE WHEN covering.d IS NOT NULL THEN covering.d
                WHEN before.d IS NOT NULL THEN before.d
                ELSE after_.d END
    FROM (SELECT max_by(c + delta, downstream_start) AS d FROM offset_mapping
          WHERE flow = f AND source_topic = t AND partition = p
            AND upstream_start <= c AND c <= upstream_end) covering,
         (SELECT arg_max(downstream_end + 1, struct_pack(e := upstream_end, d := downstream_end)) AS d
          FROM offset_mapping WHERE flow = f AND source_topic = t AND partition = p AND upstream_end < c) before,
         (SELECT arg_min(downstream_start, struct_pack(s := upstream_start, d := -downstream_start)) AS d
          FROM offset_mapping WHERE flow = f AND source_topic = t AND partition = p AND upstream_start > c) after_
);
"""


class SQLError(MirrorlakeError):
    """The query did not parse or failed; the message is DuckDB's."""

    exit_code = 11


class TableNotFoundError(MirrorlakeError):
    """The lakehouse path, or a table in it, is not a Delta table."""

    exit_code = 12


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]

    def to_records(self) -> list[dict]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _extension_path() -> Path:
    import duckdb_extension_delta

    found = sorted(
        Path(duckdb_extension_delta.__file__).parent.glob(f"**/v{duckdb.__version__}/delta.duckdb_extension")
    )
    if not found:
        raise MirrorlakeError(
            f"duckdb-extension-delta has no build for duckdb {duckdb.__version__}: install matching versions"
        )
    return found[0]


class LakehouseSQL:
    """A DuckDB connection with a view per existing lakehouse table and the translation macros."""

    def __init__(self, lakehouse_root: Path) -> None:
        self.paths = LakehousePaths(Path(lakehouse_root).resolve())
        if not (self.paths.root / "tables").is_dir():
            raise TableNotFoundError(
                f"{self.paths.root} is not a mirrorlake lakehouse (no tables/ directory): "
                "run `mirrorlake lakehouse build` first or check lakehouse.path"
            )
        self.con = duckdb.connect()
        self.con.execute(f"LOAD '{_extension_path()}'")
        self.views: list[str] = []
        for view, where in TABLES.items():
            path = self._path(where)
            if (path / "_delta_log").is_dir():
                self.con.execute(f"CREATE VIEW {view} AS SELECT * FROM delta_scan('{path}')")
                self.views.append(view)
        if "offset_mapping" in self.views:
            self.con.execute(_MACROS)

    def _path(self, where: str) -> Path:
        kind, _, name = where.partition(":")
        if kind == "silver":
            return self.paths.silver(name)
        if kind == "gold":
            return self.paths.gold(name)
        return self.paths.bronze if kind == "bronze" else self.paths.quarantine

    def query(self, sql: str, params: Sequence[object] | None = None) -> QueryResult:
        """Run one statement; ``params`` fill its ``?`` placeholders."""
        try:
            rel = self.con.execute(sql, params) if params else self.con.execute(sql)
            columns = [d[0] for d in rel.description] if rel.description else []
            return QueryResult(columns, rel.fetchall() if columns else [])
        except duckdb.CatalogException as exc:
            raise SQLError(f"{exc} (tables available: {', '.join(self.views) or 'none'})") from None
        except duckdb.Error as exc:
            raise SQLError(str(exc)) from None

    def arrow(self, sql: str, params: Sequence[object] | None = None):  # -> pyarrow.Table
        try:
            return (self.con.execute(sql, params) if params else self.con.execute(sql)).to_arrow_table()
        except duckdb.Error as exc:
            raise SQLError(str(exc)) from None

    def close(self) -> None:
        self.con.close()


def format_result(result: QueryResult, fmt: Literal["table", "json", "csv"]) -> str:
    import csv
    import io
    import json

    if fmt == "json":
        return json.dumps(result.to_records(), default=str, indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        return buf.getvalue()
    widths = [len(c) for c in result.columns]
    cells = [[("NULL" if v is None else str(v)) for v in row] for row in result.rows]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [" | ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)), line]
    out += [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    out.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(out)
