"""How the lakehouse's DuckDB connections and delta-rs calls reach a table on S3 (nothing for a local one).

The store's access rides on the path itself (``ingest.storage``: an S3 ``UPath``), so the functions
that take a table path need no second argument. DuckDB's extensions come from the
``duckdb-extension-*`` packages (no network), as the delta extension does.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ingest.storage import delta_options, s3_access
from lakehouse.sql_quote import duck_string
from replicator.errors import MirrorlakeError

__all__ = ["delta_options", "extension_path", "reach_from_duckdb"]


def extension_path(name: str) -> Path:
    """The ``name`` DuckDB extension the ``duckdb-extension-<name>`` package ships for this duckdb."""
    import importlib

    try:
        package = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise MirrorlakeError(f"duckdb-extension-{name} is not installed (pip install it)") from None
    home = Path(str(package.__file__)).parent
    found = sorted(home.glob(f"**/v{duckdb.__version__}/{name}.duckdb_extension"))
    if not found:
        raise MirrorlakeError(
            f"duckdb-extension-{name} has no build for duckdb {duckdb.__version__}: install matching versions"
        )
    return found[0]


def reach_from_duckdb(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Let ``con`` read ``root``'s bucket: httpfs and aws loaded, a secret scoped to the bucket."""
    access = s3_access(root)
    if access is None:
        return
    for name in ("httpfs", "aws"):
        con.execute(f"LOAD {duck_string(str(extension_path(name)))}")
    bucket = str(root).split("/", 3)[2]
    params = access.duckdb_secret(f"s3://{bucket}")
    if "KEY_ID" not in params:
        params["PROVIDER"] = "credential_chain"
    listed = ", ".join(f"{k} {v if isinstance(v, bool) else duck_string(v)}" for k, v in params.items())
    con.execute(f"CREATE OR REPLACE SECRET mirrorlake_lakehouse (TYPE s3, {listed})")
