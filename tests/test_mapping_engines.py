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
from lakehouse.tables.offset_mapping.duck import segments_sql
from lakehouse.tables.offset_mapping.spark import current_life, offset_mapping, said_lives
from lakehouse.translate import translate_offsets
from mirrorlake.groundtruth import expected_translation
from replicator.client.mapping import Segment, build_segments, translate
from replicator.client.mapping_index import MappingIndex
from replicator.events import OffsetSync, TopicRecreated
from tests.test_mapping_properties import points_of, replication_runs

pytestmark = pytest.mark.spark

FLOW, TOPIC = "A->B", "t"
_SYNC_COLUMNS = (
    "flow string, source_cluster string, target_cluster string, source_topic string, target_topic string, "
    "partition int, emitted_at_ms long, upstream_offset long, downstream_offset long, reason string, "
    "previous_upstream_offset long, previous_downstream_offset long, source_topic_id string"
)


def _sync_rows(partition: int, syncs, topic_id: str | None = None, first_ms: int = 0) -> list[tuple]:
    return [
        (
            FLOW,
            "A",
            "B",
            TOPIC,
            f"A.{TOPIC}",
            partition,
            first_ms + i,
            s.upstream_offset,
            s.downstream_offset,
            s.reason,
            s.previous_upstream_offset,
            s.previous_downstream_offset,
            topic_id,
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
            "upstream_start BIGINT, upstream_end BIGINT, downstream_start BIGINT, downstream_end BIGINT, delta BIGINT, "
            "source_topic_id VARCHAR, first_synced_ms BIGINT)"
        )
        rows = [
            (FLOW, TOPIC, p, s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end, s.delta, None, 0)
            for p, segs in segments.items()
            for s in segs
        ]
        if rows:
            con.executemany("INSERT INTO offset_mapping VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
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


def _life_syncs(partition: int, copies: list[tuple[int, int]], topic_id: str | None, first_ms: int) -> list[OffsetSync]:
    """A sync per copy (``(upstream, downstream)``), each naming its predecessor in the same life."""
    out: list[OffsetSync] = []
    for i, (u, d) in enumerate(copies):
        prev = copies[i - 1] if i else (None, None)
        out.append(
            OffsetSync(
                flow=FLOW,
                replicator_id="r",
                source_cluster="A",
                target_cluster="B",
                source_topic=TOPIC,
                target_topic=f"A.{TOPIC}",
                partition=partition,
                upstream_offset=u,
                downstream_offset=d,
                upstream_timestamp_ms=0,
                reason="first" if not i else "flush",
                previous_upstream_offset=prev[0],
                previous_downstream_offset=prev[1],
                source_topic_id=topic_id,
                emitted_at_ms=first_ms + i,
            )  # fmt: skip
        )
    return out


def test_a_recreated_topic_s_lives_never_share_a_segment_and_only_the_current_one_translates(spark):
    """Issue 39 item 2 in the lakehouse: gold ``offset_mapping`` keeps each life's segments apart (named by
    ``source_topic_id``), and what translates reads the current life only, as ``MappingIndex`` does.
    Partition 0: the owner read on from its old position (the new topic's 10..14 copied right after the
    old 0..9, the same delta), then the new topic from its start. Partition 1: a new life said by a
    ``topic_recreated`` event, nothing of it copied yet. Partition 2: syncs before ids existed, then with
    one (an upgrade, one life)."""
    old = [(u, u) for u in range(10)]
    syncs = (
        _life_syncs(0, old, "old", 100)
        + _life_syncs(0, [(u, u) for u in range(10, 15)] + [(u, 15 + u) for u in range(10)], "new", 600)
        + _life_syncs(1, [(u, 30 + u) for u in range(10)], "old", 100)
        + _life_syncs(2, [(u, u) for u in range(5)], None, 100)
        + _life_syncs(2, [(u, u) for u in range(5, 10)], "x", 200)
    )
    recreated = TopicRecreated(
        flow=FLOW, replicator_id="peer", source_cluster="A", target_cluster="B", side="source", topic=TOPIC,
        source_topic=TOPIC, topic_id="new", previous_topic_id="old", partitions=2, log_start_offsets=(0, 0),
        log_end_offsets=(10, 0), policy="continue", noticed="running", emitted_at_ms=500,
    )  # fmt: skip
    index = MappingIndex()
    index.add([*syncs, recreated])
    rows = [
        (s.flow, s.source_cluster, s.target_cluster, s.source_topic, s.target_topic, s.partition, s.emitted_at_ms,
         s.upstream_offset, s.downstream_offset, s.reason, s.previous_upstream_offset, s.previous_downstream_offset,
         s.source_topic_id)
        for s in syncs
    ]  # fmt: skip
    mapping = offset_mapping(spark.createDataFrame(rows, _SYNC_COLUMNS)).cache()
    said = said_lives(spark.createDataFrame([recreated.to_record()]))
    by_life: dict[tuple[int, str | None], list[Segment]] = {}
    for row in mapping.collect():
        by_life.setdefault((row.partition, row.source_topic_id), []).append(_seg(row))
    assert {k: sorted(v) for k, v in by_life.items()} == {
        (0, "old"): [Segment(0, 0, 9, 9)],
        (0, "new"): [Segment(10, 10, 14, 14), Segment(15, 0, 9, 24)],  # the same delta as old's, yet apart
        (1, "old"): [Segment(30, 0, 9, 39)],
        (2, "x"): [Segment(0, 0, 9, 9)],  # the id-less syncs joined the first id's life
    }
    current = current_life(mapping, said).cache()
    for p in range(3):
        got = sorted(_seg(r) for r in current.where(f"partition = {p}").collect())
        assert got == sorted(index.segments(FLOW, TOPIC, p)), p
    # the DuckDB tail rule builds the same segments from the same syncs
    con = duckdb.connect()
    try:
        con.register("syncs", mapping.sparkSession.createDataFrame(rows, _SYNC_COLUMNS).toArrow())
        con.execute("CREATE TABLE scope (flow VARCHAR, source_topic VARCHAR, partition INTEGER, "
                    "_tail_downstream_start BIGINT, _tail_upstream_start BIGINT)")  # fmt: skip
        con.executemany("INSERT INTO scope VALUES (?, ?, ?, NULL, NULL)", [(FLOW, TOPIC, p) for p in range(3)])
        duck_rows = con.sql(segments_sql("SELECT * FROM syncs", "scope")).fetchall()
        columns = [d[0] for d in con.sql(segments_sql("SELECT * FROM syncs", "scope")).description]
        con.register("offset_mapping", mapping.toArrow())
        con.register("topic_recreated", spark.createDataFrame([recreated.to_record()]).toArrow())
        install_macros(con, ["offset_mapping", "topic_recreated"])
        queries = [(p, c) for p in range(3) for c in range(0, 16)]
        duck = {(p, c): con.sql(f"SELECT translate_offset('{FLOW}', '{TOPIC}', {p}, {c})").fetchone()[0]
                for p, c in queries}  # fmt: skip
    finally:
        con.close()
    spark_by_life = sorted((r.partition, r.source_topic_id, _seg(r)) for r in mapping.collect())
    duck_by_life = sorted(
        (r["partition"], r["source_topic_id"], _seg_of(r))
        for r in (dict(zip(columns, v, strict=True)) for v in duck_rows)
    )
    assert duck_by_life == spark_by_life
    q = spark.createDataFrame(
        [(FLOW, TOPIC, p, c) for p, c in queries], "flow string, source_topic string, partition int, c long"
    )
    translated = translate_offsets(q, current, id_cols=("flow", "source_topic", "partition", "c"), offset_col="c")
    spark_answers = {(r.partition, r.c): r.exact_offset for r in translated.collect()}
    mapping.unpersist()
    current.unpersist()
    for p, c in queries:
        t = index.translate(FLOW, TOPIC, p, c)
        assert spark_answers[(p, c)] == duck[(p, c)] == (t.downstream if t else None), (p, c)
    assert index.translate(FLOW, TOPIC, 0, 3).downstream == 18  # the new topic's offset 3, not the old's copy at 3
    assert index.translate(FLOW, TOPIC, 1, 3) is None  # nothing of the new life copied


def _seg_of(row: dict) -> Segment:
    return Segment(row["downstream_start"], row["upstream_start"], row["upstream_end"], row["downstream_end"])
