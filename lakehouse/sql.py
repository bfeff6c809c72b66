"""SQL over the lakehouse with DuckDB: every Delta table as a view, on a connection that cannot write.

Reading a Delta table's parquet files directly gives wrong answers (removed files, deletion
vectors), so each view is the table's version as delta-rs resolves it (``lakehouse.sql_views``:
an Arrow dataset of that version's files, or, for deletion vectors and column mapping, the rows read
through DuckDB's delta extension on a connection of its own).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import duckdb
from deltalake.exceptions import DeltaError

from ingest.paths import LakehousePaths
from ingest.storage import as_root, describe_store_error, s3_access, store_problem
from lakehouse.catalog import table_paths
from lakehouse.delta_log import REPAIR_HINT, delta_log_problem
from lakehouse.sql_quote import duck_string
from lakehouse.sql_views import open_without_files, register_table
from lakehouse.store_access import extension_path, reach_from_duckdb
from lakehouse.tables.macros import install_macros
from replicator.errors import ExitCode, MirrorlakeError
from replicator.text import printable

__all__ = [
    "LakehouseSQL",
    "SQLError",
    "TableNotFoundError",
    "AsOfError",
    "QueryResult",
    "is_delta_table",
    "parse_as_of",
    "format_result",
    "commit_times",
]

_log = logging.getLogger(__name__)
_READS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class SQLError(MirrorlakeError):
    """The query did not parse or failed; the message is DuckDB's."""

    exit_code = ExitCode.SQL


class TableNotFoundError(MirrorlakeError):
    """The lakehouse path, or a table in it, is not a Delta table."""

    exit_code = ExitCode.TABLE_NOT_FOUND


class AsOfError(MirrorlakeError):
    """An ``--as-of`` value is neither a table version nor a timestamp, or predates the tables."""

    exit_code = ExitCode.AS_OF


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]

    def to_records(self) -> list[dict]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def parse_as_of(value: str) -> int | datetime:
    """A table version (non-negative integer) or an ISO-8601 timestamp (UTC when no zone is given)."""
    text = value.strip()
    if re.fullmatch(r"[0-9]{1,18}", text, re.ASCII):  # not str.isdigit: "²" is a digit to it
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise AsOfError(
            f"--as-of {value!r} is neither a table version (0, 1, ...) nor an ISO timestamp (e.g. 2026-11-22T15:04:05Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _reason(exc: BaseException) -> str:
    """DuckDB's message without the Rust backtrace the delta extension appends (``   0: <...>``)."""
    return re.split(r"\n\s*0: ", str(exc), maxsplit=1)[0].rstrip()


def is_delta_table(path: Path) -> bool:
    """Whether ``path`` holds a Delta table with at least one commit (a log directory alone is not one)."""
    log = path / "_delta_log"
    return log.is_dir() and any(True for _ in log.glob("*.json"))


def commit_times(table: Path) -> list[tuple[int, int]]:
    """(version, commit timestamp ms) of every commit still in the Delta log (its JSON files)."""
    out = []
    for entry in sorted((table / "_delta_log").glob("*.json")):
        if not entry.stem.isdigit():
            continue
        with entry.open(encoding="utf-8") as fh:
            for line in fh:
                action = json.loads(line)
                if "commitInfo" in action:
                    out.append((int(entry.stem), int(action["commitInfo"]["timestamp"])))
                    break
    return out


def _version_at(table: Path, as_of: int | datetime) -> int | None:
    """The table version ``as_of`` names (None: the table did not exist yet / has no such version)."""
    commits = commit_times(table)
    if isinstance(as_of, int):
        return as_of if any(v == as_of for v, _ in commits) else None
    ms = int(as_of.timestamp() * 1000)
    before = [v for v, t in commits if t <= ms]
    return max(before) if before else None


class LakehouseSQL:
    """A DuckDB connection with a view per existing lakehouse table and the named macros.

    ``as_of`` (a version or a timestamp) reads every table as it was then; a timestamp picks, per
    table, the last version committed at or before it (commit times from the Delta log), so the
    tables agree with each other. A table that did not exist then (or has no such version) has no view.

    Read-only by construction unless ``unrestricted``: the connection is opened with external access
    off and no allowed directory (``lakehouse.sql_views``), and its configuration is locked once the
    views and macros exist. It cannot open, write or list any file, the lakehouse's included, load
    or install an extension, or attach a database, whatever the statement (``EXPLAIN ANALYZE COPY``,
    ``PRAGMA``, ``CALL``, ``EXPORT``...): the tables reach it as Arrow data that delta-rs resolves.
    ``query`` and ``arrow`` also take one statement only, a ``SELECT`` (or ``EXPLAIN``), for a clear
    message: the guarantee is the connection, not that check. ``unrestricted`` gives DuckDB's full
    access beside the same views (files, network, extensions; the delta extension and the store's
    credentials loaded), for a person who means it.
    """

    def __init__(
        self, lakehouse_root: Path | str, *, as_of: int | datetime | None = None, unrestricted: bool = False
    ) -> None:
        self.unrestricted = unrestricted
        self.paths = LakehousePaths(as_root(lakehouse_root))
        try:
            found = (self.paths.root / "tables").is_dir()
        except OSError as exc:  # a name too long, a loop of links: no lakehouse there either
            if s3_access(self.paths.root) is not None:
                raise TableNotFoundError(describe_store_error(str(self.paths.root), exc)) from None
            raise TableNotFoundError(f"{self.paths.root}: {exc.strerror}") from None
        except Exception as exc:  # noqa: BLE001 - botocore's errors (no answer) are not OSErrors
            if s3_access(self.paths.root) is None:
                raise
            raise TableNotFoundError(describe_store_error(str(self.paths.root), exc)) from None
        if not found and (problem := store_problem(self.paths.root)) is not None:
            raise TableNotFoundError(problem)
        if not found:
            raise TableNotFoundError(
                f"{self.paths.root} is not a mirrorlake lakehouse (no tables/ directory): "
                "run `mirrorlake lakehouse build` first or check lakehouse.path"
            )
        if unrestricted:
            self.con = duckdb.connect()
            self.con.execute(f"LOAD {duck_string(str(extension_path('delta')))}")
            reach_from_duckdb(self.con, self.paths.root)
        else:
            self.con = open_without_files()
        try:
            self._views(as_of)
        except BaseException:
            self.con.close()
            raise
        if not unrestricted:
            self.con.execute("SET lock_configuration = true")

    def _views(self, as_of: int | datetime | None) -> None:
        """A view per table there is (at ``as_of``), then the macros over them."""
        self.views: list[str] = []
        for view, path in table_paths(self.paths).items():
            if not is_delta_table(path):
                continue
            if (problem := delta_log_problem(path)) is not None:
                raise TableNotFoundError(f"{path} is not a readable Delta table: {problem}{REPAIR_HINT}")
            version = None if as_of is None else _version_at(path, as_of)
            if as_of is not None and version is None:
                continue
            try:
                register_table(self.con, view, path, version)
            except (DeltaError, duckdb.Error, OSError) as exc:
                raise TableNotFoundError(f"{path} is not a readable Delta table: {_reason(exc)}") from None
            self.views.append(view)
        if as_of is not None and not self.views:
            raise AsOfError(f"no table of {self.paths.root} existed at --as-of {as_of}")
        try:
            install_macros(self.con, self.views)
        except duckdb.Error as exc:  # a table without the columns this mirrorlake's macros read
            raise TableNotFoundError(
                f"{self.paths.root} is not a lakehouse of this mirrorlake: {_reason(exc)}{REPAIR_HINT}"
            ) from None

    def _one_read(self, sql: str) -> None:
        """Refuse, in the sandbox, anything but one ``SELECT``/``EXPLAIN`` statement, naming what was given
        (a clear message; what holds the lakehouse safe is the connection, see the class doc)."""
        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as exc:
            raise SQLError(_reason(exc)) from None
        if not statements:
            raise SQLError("no SQL statement given (an empty query, or only semicolons and comments)")
        if self.unrestricted:
            if len(statements) > 1:
                raise SQLError(f"one statement at a time: {len(statements)} given")
            return
        if len(statements) > 1:
            raise SQLError(f"one statement at a time: {len(statements)} given (mirrorlake sql runs one read)")
        kind = statements[0].type
        if kind not in _READS:
            raise SQLError(
                f"a {kind.name} statement: mirrorlake sql reads the lakehouse and nothing else, so only SELECT "
                "(or EXPLAIN) runs here; --unrestricted gives DuckDB's full access, files and network included"
            )

    @contextmanager
    def _sql_errors(self) -> Iterator[None]:
        """DuckDB's errors as ``SQLError``; an unknown table names the ones there are."""
        try:
            yield
        except duckdb.CatalogException as exc:
            raise SQLError(f"{exc} (tables available: {', '.join(self.views) or 'none'})") from None
        except duckdb.PermissionException as exc:  # the connection has no file system (``sql_views``)
            raise SQLError(
                f"{_reason(exc)}: mirrorlake sql reads the lakehouse's tables and no file, the lakehouse's own "
                "included; --unrestricted gives DuckDB's full access"
            ) from None
        except duckdb.Error as exc:
            raise SQLError(_reason(exc)) from None

    def _execute(self, sql: str, params: Sequence[object] | None) -> duckdb.DuckDBPyConnection:
        return self.con.execute(sql, params) if params else self.con.execute(sql)

    def query(self, sql: str, params: Sequence[object] | None = None) -> QueryResult:
        """Run one statement; ``params`` fill its ``?`` placeholders."""
        self._one_read(sql)
        with self._sql_errors():
            rel = self._execute(sql, params)
            columns = [d[0] for d in rel.description] if rel.description else []
            return QueryResult(columns, rel.fetchall() if columns else [])

    def arrow(self, sql: str, params: Sequence[object] | None = None):  # -> pyarrow.Table
        self._one_read(sql)
        with self._sql_errors():
            return self._execute(sql, params).to_arrow_table()

    def close(self) -> None:
        self.con.close()


def format_result(result: QueryResult, fmt: Literal["table", "json", "csv"]) -> str:
    import csv
    import io

    if fmt == "json":
        return json.dumps(result.to_records(), default=str, indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")  # the csv module's default is RFC 4180's CRLF
        writer.writerow(result.columns)
        writer.writerows(result.rows)
        return buf.getvalue()
    widths = [len(c) for c in result.columns]
    cells = [[("NULL" if v is None else printable(str(v))) for v in row] for row in result.rows]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [" | ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)), line]
    out += [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    out.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(out)
