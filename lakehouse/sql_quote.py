"""Every value that goes into SQL text goes through here: one quoting rule per dialect, tested with
hostile strings (``tests/test_sql_quote.py``).

Values are passed as parameters wherever the SQL allows one (``?`` in DuckDB queries). Some places
take no parameter: a table function's path in a ``CREATE VIEW`` (``delta_scan``), ``LOAD``, a
list of files, a key filter pushed into a scan as literals, Spark's ``delta.`path``` identifier.
There the value is quoted here, never spliced raw: a lakehouse in a directory named
``a'); COPY (SELECT 1) TO 'x.csv'; SELECT ('`` is just a strange directory.
"""

from __future__ import annotations

__all__ = ["duck_string", "duck_ident", "duck_value", "spark_path_ident"]


def _no_nul(value: str, what: str) -> str:
    if "\x00" in value:
        raise ValueError(f"{what} {value!r} contains a NUL character, which SQL text cannot carry")
    return value


def duck_string(value: str) -> str:
    """A DuckDB string literal of ``value`` (standard SQL: quotes doubled, backslashes literal)."""
    return "'" + _no_nul(value, "a string").replace("'", "''") + "'"


def duck_ident(name: str) -> str:
    """A DuckDB quoted identifier of ``name`` (double quotes doubled)."""
    return '"' + _no_nul(name, "an identifier").replace('"', '""') + '"'


def duck_value(value: object) -> str:
    """A DuckDB literal of a key value: a string or an integer (never a float, a bool or None)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a key value must be a string or an integer, not {value!r}")
    return str(value) if isinstance(value, int) else duck_string(value)


def spark_path_ident(path: str) -> str:
    """Spark SQL's ``delta.`path``` table name for ``path`` (backticks doubled inside the quotes)."""
    return "delta.`" + _no_nul(path, "a path").replace("`", "``") + "`"
