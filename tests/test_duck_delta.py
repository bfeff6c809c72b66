"""delta-rs commits on tables Spark wrote: what ``lakehouse.duck.delta`` promises Spark's readers.

A key's rows replaced (replaceWhere) or a key's tail MERGEd leave exactly the rows the contract
names; after ten commits the table has a checkpoint (Spark's interval) that Spark reads, and
``lakehouse.delta_log`` finds nothing wrong with the log.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from lakehouse.duck.delta import register, replace_keys, replace_scope
from lakehouse.duck.engine import keys_filter
from lakehouse.sql_quote import duck_value as quote


def _rows(spark, path) -> set[tuple]:  # noqa: ANN001 - SparkSession
    return {tuple(r) for r in spark.read.format("delta").load(str(path)).select("k", "p", "d", "v").collect()}


def _spark_table(spark, path, rows: list[tuple]) -> None:  # noqa: ANN001
    spark.createDataFrame(rows, "k string, p int, d long, v string").write.format("delta").save(str(path))


def _arrow(rows: list[tuple]) -> pa.Table:
    k, p, d, v = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {"k": pa.array(k, pa.string()), "p": pa.array(p, pa.int32()), "d": pa.array(d, pa.int64()), "v": v},
        schema=pa.schema([("k", pa.string()), ("p", pa.int32()), ("d", pa.int64()), ("v", pa.string())]),
    )


@pytest.mark.spark
def test_replaced_keys_and_a_checkpoint_spark_reads(spark, tmp_path):
    from lakehouse.delta_log import delta_log_problem

    path = tmp_path / "t"
    _spark_table(spark, path, [("a", 0, 1, "x"), ("a", 1, 1, "y"), ("b", 0, 1, "z")])
    for n in range(12):  # versions 1..12
        new = [("a", 1, 2, f"y{n}")] + ([("a", 1, 3, "extra")] if n % 2 else [])
        replace_keys(path, _arrow(new), keys_filter(pa.table({"k": ["a"], "p": pa.array([1], pa.int32())})))
    assert _rows(spark, path) == {("a", 0, 1, "x"), ("a", 1, 2, "y11"), ("a", 1, 3, "extra"), ("b", 0, 1, "z")}
    assert (path / "_delta_log" / "00000000000000000010.checkpoint.parquet").exists()
    assert delta_log_problem(path) is None


@pytest.mark.spark
def test_a_tail_merge_keeps_rows_before_the_tail_start(spark, tmp_path):
    path = tmp_path / "t"
    _spark_table(spark, path, [("a", 0, d, f"old{d}") for d in (1, 2, 3, 4)] + [("b", 0, 1, "other")])
    scope = pa.table({"k": ["a"], "p": pa.array([0], pa.int32()), "_tail_d": pa.array([3], pa.int64())})
    # from d = 3 on: 3 is rewritten, 4 is gone, 5 is new; 1 and 2 are kept, and b is untouched
    computed = _arrow([("a", 0, 3, "new3"), ("a", 0, 5, "new5")])
    replace_scope(path, computed, scope, key=("k", "p"), row_id=("k", "p", "d"), tail_order=("d",))
    kept = {("a", 0, 1, "old1"), ("a", 0, 2, "old2"), ("b", 0, 1, "other")}
    expected = kept | {("a", 0, 3, "new3"), ("a", 0, 5, "new5")}
    assert _rows(spark, path) == expected
    con = duckdb.connect()
    register(con, "t", path)  # DuckDB's parquet reader over the files of the version delta-rs wrote
    assert {tuple(r) for r in con.sql("SELECT k, p, d, v FROM t").fetchall()} == expected


def test_many_key_alternatives_nest_in_halves_and_select_exactly_their_rows():
    keys = pa.table({"flow": [f"f{i}" for i in range(5)], "partition": pa.array(range(5), pa.int32())})
    text = keys_filter(keys)
    assert text.count("(") == text.count(")") and text.startswith("(((")  # nested halves, not a chain
    con = duckdb.connect()
    con.sql("CREATE TABLE t AS SELECT 'f' || i AS flow, j::INT AS partition FROM range(6) a(i), range(6) b(j)")
    assert sorted(con.sql(f"SELECT flow, partition FROM t WHERE {text}").fetchall()) == [(f"f{i}", i) for i in range(5)]
    wide = pa.table({"flow": [f"f{i}" for i in range(4000)], "partition": pa.array([0] * 4000, pa.int32())})
    depth = max_depth = 0
    for ch in keys_filter(wide):
        depth += (ch == "(") - (ch == ")")
        max_depth = max(max_depth, depth)
    assert max_depth <= 2 * 13 + 3  # about log2(4000) levels of halves, not 4000


def test_key_filters_are_literals_and_refuse_other_types():
    keys = pa.table({"flow": ["A->B", "A->B", "it's"], "partition": pa.array([1, 2, 0], pa.int32())})
    assert keys_filter(keys) == (
        """(("flow" = 'A->B' AND "partition" IN (1, 2)) OR ("flow" = 'it''s' AND "partition" IN (0)))"""
    )
    assert keys_filter(keys.slice(0, 0)) == "(false)"
    repeated = pa.table({"flow": ["A->B"] * 50_000})  # a scope of one row per event, keyed by flow alone
    assert keys_filter(repeated) == """(("flow" IN ('A->B')))"""
    with pytest.raises(TypeError, match="a key value must be a string or an integer"):
        quote(1.5)
    with pytest.raises(TypeError):
        quote(None)


@pytest.mark.spark
def test_an_increment_too_large_for_memory_is_refused_before_it_is_read_whole(spark, tmp_path):
    from lakehouse.duck.delta import TooManyRows, inserted

    path = tmp_path / "t"
    frame = spark.createDataFrame([("a", 0, 1, "x")], "k string, p int, d long, v string")
    frame.write.format("delta").option("delta.enableChangeDataFeed", "true").save(str(path))
    more = spark.createDataFrame([("a", 0, d, "y") for d in range(2, 7)], "k string, p int, d long, v string")
    more.write.format("delta").mode("append").save(str(path))  # version 1: five rows
    assert sorted(inserted(path, 0, 1, most=5)["d"].to_pylist()) == [2, 3, 4, 5, 6]
    assert inserted(path, 0, 1, most=5).column_names == ["k", "p", "d", "v"]  # no change feed columns
    with pytest.raises(TooManyRows, match="more than 4 rows after version 0"):
        inserted(path, 0, 1, most=4)
    assert inserted(path, None, 1, most=6).num_rows == 6  # never consumed: the whole table
    with pytest.raises(TooManyRows, match="holds more than 5 rows"):
        inserted(path, None, 1, most=5)


def test_a_view_within_a_range_reads_only_the_files_that_may_hold_it_and_every_row_of_it(tmp_path):
    from deltalake import write_deltalake

    from lakehouse.duck.delta import _files_within, open_table

    def table(name: str, configuration: dict[str, str | None] | None = None):  # noqa: ANN202
        path = tmp_path / name
        for low in (0, 100, 200):  # three files of ten rows each: t in 0-9, 100-109, 200-209
            rows = pa.table({"t": pa.array(range(low, low + 10), pa.int64()), "n": pa.array([low] * 10, pa.int64())})
            write_deltalake(str(path), rows, mode="append", configuration=configuration)
        return open_table(path)

    everything = [*range(0, 10), *range(100, 110), *range(200, 210)]
    con = duckdb.connect()
    with_stats = table("stats")
    for low, high, files in ((105, 107, 1), (8, 104, 2), (0, 300, 3), (300, 400, 0), (10, 99, 0)):
        assert len(_files_within(with_stats, "t", low, high)) == files, (low, high)
        register(con, "v", with_stats, within=("t", low, high))
        got = sorted(r[0] for r in con.sql(f"SELECT t FROM v WHERE t BETWEEN {low} AND {high}").fetchall())
        assert got == [t for t in everything if low <= t <= high], (low, high)
    # files without statistics on the column are kept: they may hold anything
    no_stats = table("nostats", {"delta.dataSkippingNumIndexedCols": "0"})
    assert len(_files_within(no_stats, "t", 300, 400)) == 3
    register(con, "w", no_stats, within=("t", 105, 107))
    assert sorted(r[0] for r in con.sql("SELECT t FROM w WHERE t BETWEEN 105 AND 107").fetchall()) == [105, 106, 107]
