"""How each lakehouse table reaches a SQL connection that has no file system.

``mirrorlake sql`` runs what a person types; DuckDB executes SQL with the rights of the process
(its own security page says to treat SQL like a shell script), and a statement check only knows the
statements someone thought of: ``EXPLAIN ANALYZE COPY ... TO '<lakehouse>/...'`` passed one and
wrote a Delta commit that emptied gold ``offset_mapping``. So the connection that runs the query is
opened with external access off and no allowed directory: it cannot open, list or write any file,
install or load an extension, or attach a database, whatever the statement.

The tables come to it as Arrow datasets that delta-rs resolves (the version's files, read by
pyarrow, which opens them read-only): lazy, with projections and filters pushed down. A table
whose protocol a dataset cannot honour (deletion vectors, column mapping: a plain read of its files
gives wrong rows) is read whole through DuckDB's delta extension on a private connection the query
never sees, and handed over as an Arrow table.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake import DeltaTable

from lakehouse.sql_quote import duck_string
from lakehouse.store_access import delta_options, extension_path, reach_from_duckdb

__all__ = ["NO_FILES", "open_without_files", "register_table"]

_log = logging.getLogger(__name__)

# settings of a connection that never had a file system: given at connect, before any statement
NO_FILES: dict[str, str | bool] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
# reader features a pyarrow dataset of the files cannot honour
_WHOLE_READ_FEATURES = frozenset({"deletionVectors", "columnMapping"})


def open_without_files() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that can reach no file, network or extension (lock it with
    ``SET lock_configuration = true`` once its views exist)."""
    return duckdb.connect(config=dict(NO_FILES))


def register_table(con: duckdb.DuckDBPyConnection, view: str, path: Path, version: int | None) -> None:
    """View ``view`` on ``con``: the Delta table at ``path``, at ``version`` (latest when None).

    Raises ``deltalake`` errors for a table delta-rs cannot open, and ``duckdb.Error`` for one the
    delta extension cannot read; the caller names the table."""
    table = DeltaTable(str(path), version=version, storage_options=delta_options(path))
    features = set(table.protocol().reader_features or ())
    if "delta.columnMapping.mode" in table.metadata().configuration:
        features.add("columnMapping")
    if features & _WHOLE_READ_FEATURES:
        _log.info("%s: read whole through the delta extension (%s)", path, ", ".join(sorted(features)))
        con.register(view, _read_whole(path, int(table.version())))
    else:
        con.register(view, table.to_pyarrow_dataset())


def _read_whole(path: Path, version: int) -> pa.Table:
    """The table's rows at ``version`` through DuckDB's delta extension (deletion vectors and column
    mapping honoured), on a connection of its own."""
    reader = duckdb.connect()
    try:
        reader.execute(f"LOAD {duck_string(str(extension_path('delta')))}")
        reach_from_duckdb(reader, path)
        scan = f"SELECT * FROM delta_scan({duck_string(str(path))}, version := {int(version)})"
        return reader.execute(scan).to_arrow_table()
    finally:
        reader.close()
