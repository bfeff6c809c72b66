"""One rule, three engines: Python, Spark and DuckDB build and translate the same offset mapping.

The Python reference (``replicator.client.mapping``), the Spark gold table
(``lakehouse.tables.offset_mapping`` + ``lakehouse.translate``) and the DuckDB macro
(``translate_offset`` in ``lakehouse.sql``) each implement the mapping rule. Hypothesis generates
replications with gaps, foreign records on the target, crashes and at-least-once replays
(``tests.test_mapping_properties.replication_runs``); each example is a batch of partitions, so
Spark runs a handful of jobs per example instead of one per partition.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.tables.macros import install_macros
from lakehouse.tables.offset_mapping.spark import offset_mapping
from lakehouse.translate import translate_offsets
from mirrorlake.groundtruth import expected_translation
from replicator.client.mapping import Segment, build_segments, translate
from tests.test_mapping_properties import points_of, replication_runs

pytestmark = pytest.mark.spark

FLOW, TOPIC = "A->B", "t"
_SYNC_COLUMNS = (
    "flow string, source_cluster string, target_cluster string, source_topic string, target_topic string, "
    "partition int, emitted_at_ms long, upstream_offset long, downstream_offset long, reason string, "
    "previous_upstream_offset long, previous_downstream_offset long"
)


def _sync_rows(partition: int, syncs) -> list[tuple]:
    return [
        (
            FLOW,
            "A",
            "B",
            TOPIC,
            f"A.{TOPIC}",
            partition,
            i,
            s.upstream_offset,
            s.downstream_offset,
            s.reason,
            s.previous_upstream_offset,
            s.previous_downstream_offset,
        )  # fmt: skip
        for i, s in enumerate(syncs)
    ]


def _seg(row) -> Segment:
    return Segment(row.downstream_start, row.upstream_start, row.upstream_end, row.downstream_end)


def _duckdb_translations(segments: dict[int, list[Segment]], queries: list[tuple[int, int]]) -> dict:
    con = duckdb.connect()
    try:
        con.execute(
            "CREATE TABLE offset_mapping (flow VARCHAR, source_topic VARCHAR, partition INTEGER, "
            "upstream_start BIGINT, upstream_end BIGINT, downstream_start BIGINT, downstream_end BIGINT, delta BIGINT)"
        )
        rows = [
            (FLOW, TOPIC, p, s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end, s.delta)
            for p, segs in segments.items()
            for s in segs
        ]
        if rows:
            con.executemany("INSERT INTO offset_mapping VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        install_macros(con, ["offset_mapping"])
        con.execute("CREATE TABLE q (p INTEGER, c BIGINT)")
        con.executemany("INSERT INTO q VALUES (?, ?)", queries)
        got = con.execute(f"SELECT p, c, translate_offset('{FLOW}', '{TOPIC}', p, c) FROM q").fetchall()
    finally:
        con.close()
    return {(p, c): d for p, c, d in got}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(replication_runs(), min_size=6, max_size=6))
def test_python_spark_and_duckdb_agree_on_segments_and_translations(spark, runs):
    sync_rows, queries = [], []
    python_segments: dict[int, list[Segment]] = {}
    truth: dict[tuple[int, int], int | None] = {}
    for p, (records, copies, syncs) in enumerate(runs):
        sync_rows += _sync_rows(p, syncs)
        python_segments[p] = build_segments(points_of(syncs))
        for c in range(0, records[-1] + 3):
            queries.append((p, c))
            truth[(p, c)] = expected_translation(copies, c)

    mapping = offset_mapping(spark.createDataFrame(sync_rows, _SYNC_COLUMNS)).cache()
    spark_segments: dict[int, list[Segment]] = {p: [] for p in python_segments}
    for row in mapping.collect():
        spark_segments[row.partition].append(_seg(row))
    assert {p: sorted(s) for p, s in spark_segments.items()} == {p: sorted(s) for p, s in python_segments.items()}

    q = spark.createDataFrame(
        [(FLOW, TOPIC, p, c) for p, c in queries], "flow string, source_topic string, partition int, c long"
    )
    translated = translate_offsets(q, mapping, id_cols=("flow", "source_topic", "partition", "c"), offset_col="c")
    spark_answers = {(r.partition, r.c): (r.exact_offset, r.exact_method) for r in translated.collect()}
    mapping.unpersist()
    duck_answers = _duckdb_translations(python_segments, queries)

    for p, c in queries:
        py = translate(python_segments[p], c)
        py_answer = (py.downstream, str(py.method)) if py else (None, None)
        assert spark_answers[(p, c)] == py_answer, (p, c)
        assert duck_answers[(p, c)] == py_answer[0], (p, c)
        assert py_answer[0] == truth[(p, c)], (p, c)
