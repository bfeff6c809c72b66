"""SQL over the gold tables: views, macros, time travel (DuckDB and Spark agree), Python API, errors.

Reads the lakehouse built by the session fixture ``built`` (tests/lakehouse_support.py), whose
gold tables have one version per build round.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import duckdb
import pytest

from tests import lakehouse_support as ev
from tests.lakehouse_support import Built

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorlake.cli", *args], capture_output=True, text=True, timeout=300)


def test_every_gold_table_has_a_view_and_the_macros_answer(built: Built):
    from lakehouse.gold_tables import GOLD_TABLES
    from lakehouse.sql import LakehouseSQL

    sql = LakehouseSQL(built.config.lakehouse.path)
    try:
        assert {t.name for t in GOLD_TABLES} <= set(sql.views)
        rows = sql.query(
            "SELECT t.committed_offset, t.target_offset, g.exact_offset FROM translate_group('A->B', 'g2') t "
            "JOIN group_offsets g USING (source_topic, partition) WHERE g.\"group\" = 'g2'"
        ).rows
        assert [(c, t) for c, t, _ in rows] == [(c, e) for c, _, e in rows] and rows  # macro == gold exact
        now = sql.query("SELECT partition, observed_at_ms, records_unreplicated FROM rpo_now('A->B')").rows
        assert [(p, t - ev.T0, n) for p, t, n in now] == [(0, 800, 19), (1, 950, 25)]
        failover = sql.query("SELECT \"group\", records_reread FROM failover_now('A->B')").rows
        assert dict(failover)["g2"] == 19
    finally:
        sql.close()


def test_no_statement_of_mirrorlake_sql_changes_a_byte_of_the_built_lakehouse(built: Built, monkeypatch, capsys):
    """Issue 59 item 1 on the lakehouse Spark built: every writing statement, the one that once
    emptied gold offset_mapping first, is refused with an error, and every file is unchanged (the CLI
    in this process: its subprocess is held by the other tests here)."""
    from pathlib import Path

    from lakehouse.sql import LakehouseSQL, SQLError
    from tests.test_sql_safety import _sql, tree_digest, writing_statements

    root = Path(built.config.lakehouse.path)
    before = tree_digest(root)
    statements = writing_statements(root, root / "tables" / "gold" / "offset_mapping")
    for statement in statements:
        code, _out, err = _sql(monkeypatch, capsys, statement, "--lakehouse", str(root))
        assert code == SQLError.exit_code and err.startswith("error: ") and "Traceback" not in err, (statement, err)
    sql = LakehouseSQL(root)
    try:
        for statement in statements:
            with pytest.raises(duckdb.Error):
                sql.con.execute(statement)  # past the statement check: the connection itself refuses
        assert sql.query("SELECT translate_offset('A->B', 'orders', 0, 0)").rows[0][0] is not None
    finally:
        sql.close()
    assert tree_digest(root) == before


def test_time_travel_by_version_and_timestamp_agrees_with_spark(built: Built, spark):
    from delta.tables import DeltaTable

    from lakehouse.api import Lakehouse

    lake = Lakehouse(built.config)
    path = lake.path("offset_mapping")
    history = {r.version: r.timestamp for r in DeltaTable.forPath(spark, path).history().collect()}
    assert len(history) >= 3  # round 1 (full), 2 and 3 (merges)
    for version in (0, 1):
        duck = lake.table("offset_mapping", as_of=version)
        spark_rows = spark.read.format("delta").option("versionAsOf", version).load(path)
        from_duck = sorted(tuple(r[c] for c in spark_rows.columns) for r in duck.to_pylist())
        assert from_duck == sorted(tuple(r) for r in spark_rows.collect()), version
    # a timestamp reads each table at its last commit at or before it
    at = history[0].replace(tzinfo=UTC)
    assert lake.table("offset_mapping", as_of=at.isoformat()).num_rows == (
        spark.read.format("delta").option("timestampAsOf", history[0].isoformat()).load(path).count()
    )
    # Spark SQL reads the same tables, also as of a version
    current = spark.sql(f"SELECT count(*) FROM delta.`{path}`").first()[0]
    assert current == lake.query("SELECT count(*) AS n FROM offset_mapping")["n"][0]
    old = spark.sql(f"SELECT count(*) FROM delta.`{path}` VERSION AS OF 0").first()[0]
    assert old == lake.table("offset_mapping", as_of=0).num_rows


def test_python_api_and_cli_errors(built: Built, tmp_path):
    from lakehouse.api import Lakehouse
    from lakehouse.sql import SQLError, TableNotFoundError

    lake = Lakehouse(built.config)
    assert "group_offsets" in lake.tables()
    assert lake.query("SELECT count(*) AS n FROM topology")["n"][0] == 2
    with pytest.raises(TableNotFoundError, match="no table 'nope'"):
        lake.table("nope")
    with pytest.raises(SQLError, match="tables available"):
        lake.query("SELECT * FROM nope")

    root = str(built.config.lakehouse.path)
    ok = _cli("sql", "SELECT count(*) AS n FROM divergence", "--lakehouse", root, "--as-of", "1", "--format", "csv")
    assert ok.returncode == 0, ok.stderr
    for args, code, needle in [
        (("SELEC 1", "--lakehouse", root), 11, "syntax error"),
        (("SELECT * FROM nope", "--lakehouse", root), 11, "tables available"),
        (("SELECT 1", "--lakehouse", str(tmp_path)), 12, "not a mirrorlake lakehouse"),
        (("SELECT 1", "--lakehouse", root, "--as-of", "yesterday"), 13, "neither a table version"),
        (("SELECT 1", "--lakehouse", root, "--as-of", datetime(2001, 1, 1, tzinfo=UTC).isoformat()), 13, "existed"),
    ]:
        result = _cli("sql", *args)
        assert result.returncode == code, (args, result.stdout, result.stderr)
        assert needle in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_maintain_compacts_and_refuses_an_unsafe_retention(built: Built, spark, tmp_path):
    from ingest.paths import LakehousePaths
    from lakehouse.api import Lakehouse
    from lakehouse.maintain import UnsafeRetentionError, maintain

    conf = tmp_path / "conf.yaml"
    conf.write_text(f"clusters: {{B: {{bootstrap_servers: 127.0.0.1:1}}}}\nlakehouse: {{path: {tmp_path}}}\n")
    refused = _cli("lakehouse", "maintain", "-c", str(conf), "--retention-hours", "1")
    assert refused.returncode == 14 and "168" in refused.stderr and "Traceback" not in refused.stderr

    paths = LakehousePaths.of(built.config.lakehouse)
    lake = Lakehouse(built.config)
    before = {t: lake.table(t).num_rows for t in lake.tables()}
    with pytest.raises(UnsafeRetentionError):
        maintain(spark, paths, retention_hours=0)
    report = maintain(spark, paths)
    assert {t.table for t in report.tables} == set(before)
    mapping = next(t for t in report.tables if t.table == "offset_mapping")
    assert mapping.files_after <= mapping.files_before
    assert {t: lake.table(t).num_rows for t in lake.tables()} == before


def test_dashboard_queries_show_rpo_and_failover(built: Built):
    from dashboards.data import failover_now, rpo_now
    from lakehouse.sql import LakehouseSQL

    sql = LakehouseSQL(built.config.lakehouse.path)
    try:
        now = rpo_now(sql, "A->B")
        assert list(now["records_unreplicated"]) == [19, 25]
        # the Failover page's "replicated up to" (it showed None: the query left the column out);
        # (these hand-made watermarks carry no position)
        assert "read_position" in now.columns and now["read_position"].isna().all()
        assert set(failover_now(sql, "A->B")["group"]) == {"g1", "g2"}
    finally:
        sql.close()
