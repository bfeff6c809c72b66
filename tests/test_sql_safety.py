"""SQL that cannot be bent (issue 33, items 4 and 5).

No value is spliced into SQL: one quoting rule per dialect, held to the engine.
Every string Hypothesis makes (quotes, backslashes, newlines, semicolons, unicode) comes back from
DuckDB equal to itself, as a literal and as an identifier; a NUL is refused by name. Then the
issue's case: a lakehouse in a directory named ``a'); COPY (SELECT 'injected') TO 'inj.csv';
SELECT ('`` is read by ``mirrorlake sql`` like any other, and nothing is written. Spark's
``delta.`path``` quoting is held to a real Spark in ``tests/test_lakehouse_decode.py``.

``mirrorlake sql`` reads the lakehouse and nothing else (issue 59, item 1): its DuckDB connection
has no file system at all (the tables reach it as Arrow data delta-rs resolves), so no statement
can write, even inside the lakehouse and even one the statement check lets through
(``EXPLAIN ANALYZE COPY`` once emptied gold ``offset_mapping``); no extension installed or loaded,
its configuration locked; ``--unrestricted`` lifts it, said so in its help. The same statements are
held to the lakehouse the session builds with Spark in ``tests/test_lakehouse_sql.py``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given
from hypothesis import strategies as st

from lakehouse.sql import LakehouseSQL, SQLError
from lakehouse.sql_quote import duck_ident, duck_string, duck_value
from mirrorlake.cli import main

HOSTILE = ["a'); COPY (SELECT 'injected') TO 'inj.csv'; SELECT ('", "it's", "''", "\\'", 'a"b', "x\ny", "é'", ";--"]
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=60)


@given(value=texts | st.sampled_from(HOSTILE))
def test_a_string_comes_back_from_duckdb_as_it_went_in(value: str):
    assert duckdb.sql(f"SELECT {duck_string(value)}").fetchone() == (value,)


@given(name=texts.filter(bool) | st.sampled_from(HOSTILE))
def test_an_identifier_comes_back_from_duckdb_as_it_went_in(name: str):
    assert duckdb.sql(f"SELECT 1 AS {duck_ident(name)}").columns == [name]


def test_a_nul_and_a_key_of_another_type_are_refused_by_name():
    for quote in (duck_string, duck_ident):
        with pytest.raises(ValueError, match="NUL"):
            quote("a\x00b")
    assert duck_value(7) == "7" and duck_value("it's") == "'it''s'"
    for wrong in (1.5, None, True):
        with pytest.raises(TypeError, match="string or an integer"):
            duck_value(wrong)


def _lakehouse(root: Path) -> Path:
    write_deltalake(str(root / "tables" / "silver" / "lifecycle"), pa.table({"flow": ["A->B"], "state": ["started"]}))
    return root


def _sql(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["mirrorlake", "sql", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_lakehouse_in_a_directory_named_like_sql_is_read_and_nothing_is_written(tmp_path: Path, monkeypatch, capsys):
    root = _lakehouse(tmp_path / HOSTILE[0])
    monkeypatch.chdir(tmp_path)
    code, out, err = _sql(monkeypatch, capsys, "SELECT flow, state FROM lifecycle", "--lakehouse", str(root))
    assert code == 0 and "A->B" in out and "(1 row)" in out, err
    assert sorted(p.name for p in tmp_path.rglob("*.csv")) == []  # the COPY in the name never ran


OUTSIDE = "/etc/hostname"  # a readable file outside every lakehouse


@pytest.mark.parametrize(
    ("query", "why"),
    [
        (f"SELECT * FROM read_text('{OUTSIDE}')", "Cannot access file"),
        ("COPY (SELECT 1) TO '{root}/x.csv'", "a COPY statement"),  # not even inside the lakehouse
        ("COPY (SELECT 1) TO 'x.csv'", "a COPY statement"),
        ("ATTACH 'other.duckdb'", "a ATTACH statement"),
        ("INSTALL httpfs", "statement: mirrorlake sql reads the lakehouse and nothing else"),
        ("LOAD httpfs", "statement: mirrorlake sql reads the lakehouse and nothing else"),
        ("SET enable_external_access = true", "a SET statement"),
        ("CREATE TABLE t AS SELECT 1", "a CREATE statement"),
        ("SELECT 1; SELECT 2", "one statement at a time: 2 given"),
        ("", "no SQL statement given"),
        (";;;", "no SQL statement given"),
        ("/* only a comment */", "no SQL statement given"),
    ],
    ids=[
        "read-outside",
        "copy-inside",
        "copy",
        "attach",
        "install",
        "load",
        "set",
        "create",
        "two",
        "empty",
        "semicolons",
        "comment",
    ],
)
def test_mirrorlake_sql_reads_the_lakehouse_and_nothing_else(query: str, why: str, tmp_path: Path, monkeypatch, capsys):
    root = _lakehouse(tmp_path / "lh")
    monkeypatch.chdir(tmp_path)
    code, _out, err = _sql(monkeypatch, capsys, query.format(root=root), "--lakehouse", str(root))
    assert code == SQLError.exit_code and err.startswith("error: ") and why in err, err
    assert "Traceback" not in err
    assert not list(tmp_path.rglob("*.csv")) and not (tmp_path / "other.duckdb").exists()


def test_unrestricted_gives_duckdb_s_full_access(tmp_path: Path, monkeypatch, capsys):
    root = _lakehouse(tmp_path / "lh")
    monkeypatch.chdir(tmp_path)
    code, out, err = _sql(monkeypatch, capsys, f"SELECT content FROM read_text('{OUTSIDE}')", "--lakehouse",
                          str(root), "--unrestricted")  # fmt: skip
    assert code == 0 and Path(OUTSIDE).read_text().strip() in out, err
    code, _out, err = _sql(monkeypatch, capsys, "SELECT 1; SELECT 2", "--lakehouse", str(root), "--unrestricted")
    assert code == SQLError.exit_code and "one statement at a time" in err


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` by relative path, with the SHA-256 of its bytes."""
    files = (p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def writing_statements(root: Path, table: Path) -> list[str]:
    """Statements that would change ``root`` (the lakehouse) given a connection that can write.
    ``table`` is one of its Delta tables: its next commit file is a target."""
    log = table / "_delta_log"
    next_commit = log / f"{max(int(p.stem) for p in log.glob('*.json')) + 1:020d}.json"
    return [
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{next_commit}' (FORMAT json)",  # the one that wiped gold
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{root}/x.parquet' (FORMAT parquet)",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{table}/part-0.parquet' (FORMAT parquet)",
        f"COPY (SELECT 1 AS a) TO '{next_commit}'",
        f"ATTACH '{root}/attached.duckdb'",
        f"EXPORT DATABASE '{root}/exported'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
        "SET enable_external_access = true",
        f"SET temp_directory = '{root}/tmp'",
        f"SELECT * FROM glob('{root}/**')",
        f"SELECT * FROM read_text('{next_commit.parent}/*.json')",
        "PRAGMA enable_profiling = 'json'",
        f"PRAGMA profiling_output = '{root}/profile.json'",
        f"CALL pragma_storage_info('{table}')",
    ]


def test_no_statement_writes_a_byte_of_the_lakehouse(tmp_path: Path, monkeypatch, capsys):
    """Each writing statement exits with one clear error, through the CLI (statement check included)
    and straight on the connection (no check): the lakehouse is unchanged byte for byte and still reads."""
    root = _lakehouse(tmp_path / "lh")
    monkeypatch.chdir(tmp_path)
    table = root / "tables" / "silver" / "lifecycle"
    before = tree_digest(tmp_path)
    for statement in writing_statements(root, table):
        code, _out, err = _sql(monkeypatch, capsys, statement, "--lakehouse", str(root))
        assert code == SQLError.exit_code and err.startswith("error: ") and "Traceback" not in err, (statement, err)
    sql = LakehouseSQL(root)
    try:
        for statement in writing_statements(root, table):
            with pytest.raises(duckdb.Error):
                sql.con.execute(statement)  # past the statement check: only the connection stands in the way
        assert sql.query("SELECT flow, state FROM lifecycle").rows == [("A->B", "started")]
    finally:
        sql.close()
    assert tree_digest(tmp_path) == before
