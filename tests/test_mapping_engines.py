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
from pyspark.sql import functions as F

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
    "previous_upstream_offset long, previous_downstream_offset long, source_topic_id string, target_topic_id string"
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
            None,
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
            "source_topic_id VARCHAR, target_topic_id VARCHAR, first_synced_ms BIGINT)"
        )
        rows = [
            (
                FLOW,
                TOPIC,
                p,
                s.upstream_start,
                s.upstream_end,
                s.downstream_start,
                s.downstream_end,
                s.delta,
                None,
                None,
                0,
            )
            for p, segs in segments.items()
            for s in segs
        ]
        if rows:
            con.executemany("INSERT INTO offset_mapping VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
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


def _life_syncs(
    partition: int,
    copies: list[tuple[int, int]],
    topic_id: str | None,
    first_ms: int,
    *,
    topic: str = TOPIC,
    remote_id: str | None = None,
) -> list[OffsetSync]:
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
                source_topic=topic,
                target_topic=f"A.{topic}",
                partition=partition,
                upstream_offset=u,
                downstream_offset=d,
                upstream_timestamp_ms=0,
                reason="first" if not i else "flush",
                previous_upstream_offset=prev[0],
                previous_downstream_offset=prev[1],
                source_topic_id=topic_id,
                target_topic_id=remote_id,
                emitted_at_ms=first_ms + i,
            )  # fmt: skip
        )
    return out


def _recreated(topic: str, side: str, topic_id: str, previous: str | None, partitions: int, ms: int) -> TopicRecreated:
    return TopicRecreated(
        flow=FLOW, replicator_id="peer", source_cluster="A", target_cluster="B", side=side,
        topic=topic if side == "source" else f"A.{topic}", source_topic=topic, topic_id=topic_id,
        previous_topic_id=previous, partitions=partitions, log_start_offsets=(0,) * partitions,
        log_end_offsets=(0,) * partitions, policy="continue" if side == "source" else "recopy", noticed="running",
        emitted_at_ms=ms,
    )  # fmt: skip


def _joined(segments: list[Segment]) -> list[Segment]:
    """``segments`` (sorted) with each one that continues its predecessor (the next copy, +1 on both
    sides) joined to it: the lakehouse keeps copies from before the remote topic's id was stamped
    (offset_sync v2) in segments of their own, ``MappingIndex`` joins them to the first id's."""
    out: list[Segment] = []
    for s in segments:
        last = out[-1] if out else None
        if last and (s.upstream_start, s.downstream_start) == (last.upstream_end + 1, last.downstream_end + 1):
            out[-1] = Segment(last.downstream_start, last.upstream_start, s.upstream_end, s.downstream_end)
        else:
            out.append(s)
    return out


def _engines_hold_to_the_index(spark, syncs: list[OffsetSync], said: list[TopicRecreated], upto: int) -> dict:
    """Spark's gold mapping and current life, the DuckDB tail rule and the ``translate_offset`` macro,
    each against ``MappingIndex`` fed the same events: the current life's segments and every
    translation of offsets ``[0, upto)``. Returns Spark's segments by (topic, partition, life)."""
    index = MappingIndex()
    index.add(sorted([*syncs, *said], key=lambda e: e.emitted_at_ms))  # the state log's order
    keys = sorted({(s.source_topic, s.partition) for s in syncs} | {(e.source_topic, p) for e in said
                                                                    for p in range(e.partitions)})  # fmt: skip
    rows = [
        (s.flow, s.source_cluster, s.target_cluster, s.source_topic, s.target_topic, s.partition, s.emitted_at_ms,
         s.upstream_offset, s.downstream_offset, s.reason, s.previous_upstream_offset, s.previous_downstream_offset,
         s.source_topic_id, s.target_topic_id)
        for s in syncs
    ]  # fmt: skip
    columns = _SYNC_COLUMNS
    mapping = offset_mapping(spark.createDataFrame(rows, columns)).cache()
    recreated = spark.createDataFrame([e.to_record() for e in said])
    current = current_life(mapping, said_lives(recreated)).cache()
    for topic, p in keys:
        got = sorted(_seg(r) for r in current.where(f"source_topic = '{topic}' AND partition = {p}").collect())
        assert _joined(got) == sorted(index.segments(FLOW, topic, p)), (topic, p)
    queries = [(t, p, c) for t, p in keys for c in range(upto)]
    con = duckdb.connect()
    try:  # the DuckDB tail rule builds the same segments from the same syncs
        con.register("syncs", spark.createDataFrame(rows, columns).toArrow())
        con.execute("CREATE TABLE scope (flow VARCHAR, source_topic VARCHAR, partition INTEGER, "
                    "_tail_downstream_start BIGINT, _tail_upstream_start BIGINT)")  # fmt: skip
        con.executemany("INSERT INTO scope VALUES (?, ?, ?, NULL, NULL)", [(FLOW, t, p) for t, p in keys])
        found = con.sql(segments_sql("SELECT * FROM syncs", "scope"))
        names = [d[0] for d in found.description]
        duck_rows = [dict(zip(names, v, strict=True)) for v in found.fetchall()]
        con.register("offset_mapping", mapping.toArrow())
        con.register("topic_recreated", recreated.toArrow())
        install_macros(con, ["offset_mapping", "topic_recreated"])
        duck = {(t, p, c): con.sql(f"SELECT translate_offset('{FLOW}', '{t}', {p}, {c})").fetchone()[0]
                for t, p, c in queries}  # fmt: skip
    finally:
        con.close()
    by_life = sorted(
        ((r.source_topic, r.partition, r.source_topic_id, r.target_topic_id, _seg(r)) for r in mapping.collect()),
        key=repr,
    )
    duck_by_life = sorted(
        (
            (r["source_topic"], r["partition"], r["source_topic_id"], r["target_topic_id"], _seg_of(r))
            for r in duck_rows
        ),
        key=repr,
    )
    assert duck_by_life == by_life
    q = spark.createDataFrame(queries, "source_topic string, partition int, c long").withColumn("flow", F.lit(FLOW))
    translated = translate_offsets(q, current, id_cols=("flow", "source_topic", "partition", "c"), offset_col="c")
    spark_answers = {(r.source_topic, r.partition, r.c): r.exact_offset for r in translated.collect()}
    mapping.unpersist()
    current.unpersist()
    for t, p, c in queries:
        answer = index.translate(FLOW, t, p, c)
        assert spark_answers[(t, p, c)] == duck[(t, p, c)] == (answer.downstream if answer else None), (t, p, c)
    out: dict = {}
    for topic, p, source_id, target_id, seg in by_life:
        out.setdefault((topic, p, source_id, target_id), []).append(seg)
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
    by_life = _engines_hold_to_the_index(spark, syncs, [_recreated(TOPIC, "source", "new", "old", 2, 500)], 16)
    assert by_life == {
        (TOPIC, 0, "old", None): [Segment(0, 0, 9, 9)],
        (TOPIC, 0, "new", None): [Segment(10, 10, 14, 14), Segment(15, 0, 9, 24)],  # old's delta, yet apart
        (TOPIC, 1, "old", None): [Segment(30, 0, 9, 39)],
        (TOPIC, 2, "x", None): [Segment(0, 0, 9, 9)],  # the id-less syncs joined the first id's life
    }


def test_a_recreated_remote_topic_s_lives_never_share_a_segment_and_only_the_current_one_translates(spark):
    """The target side: a remote topic deleted and created again (``target_topic_id``, offset_sync v3).
    ``r0``: 0..9 copied into T1; T1 re-created as T2; 10..14 copied into T2 (0..4) under the old id
    before the flow noticed; then the recopy from the log start (0..14 at 5..19). ``r1``: an upgrade
    (v2 syncs, then v3 ones: one life). ``r2``: v2 syncs, then a re-creation found by the log end (no
    previous id), nothing recopied yet. ``r3``: the same, recopy begun. ``r4``: the source topic
    re-created (new life S2 in T1), then the remote topic (S2 in T2)."""
    syncs = (
        _life_syncs(0, [(u, u) for u in range(10)], "S", 100, topic="r0", remote_id="T1")
        + _life_syncs(0, [(u, u - 10) for u in range(10, 15)], "S", 450, topic="r0", remote_id="T1")
        + _life_syncs(0, [(u, u + 5) for u in range(15)], "S", 600, topic="r0", remote_id="T2")
        + _life_syncs(0, [(u, u) for u in range(5)], "S", 100, topic="r1")
        + _life_syncs(0, [(u, u) for u in range(5, 10)], "S", 200, topic="r1", remote_id="T1")
        + _life_syncs(0, [(u, u) for u in range(10)], "S", 100, topic="r2")
        + _life_syncs(0, [(u, u) for u in range(10)], "S", 100, topic="r3")
        + _life_syncs(0, [(u, u) for u in range(5)], "S", 600, topic="r3", remote_id="T2")
        + _life_syncs(0, [(u, u) for u in range(10)], "S1", 100, topic="r4", remote_id="T1")
        + _life_syncs(0, [(u, u + 10) for u in range(4)], "S2", 400, topic="r4", remote_id="T1")
        + _life_syncs(0, [(u, u) for u in range(6)], "S2", 800, topic="r4", remote_id="T2")
    )
    said = [
        _recreated("r0", "target", "T2", "T1", 1, 500),
        _recreated("r2", "target", "T2", None, 1, 500),
        _recreated("r3", "target", "T2", None, 1, 500),
        _recreated("r4", "source", "S2", "S1", 1, 300),
        _recreated("r4", "target", "T2", "T1", 1, 700),
    ]
    by_life = _engines_hold_to_the_index(spark, syncs, said, 22)
    assert by_life[("r0", 0, "S", "T2")] == [Segment(5, 0, 14, 19)]  # the recopy, apart from T1's copies
    assert (by_life[("r1", 0, "S", None)], by_life[("r1", 0, "S", "T1")]) == (
        [Segment(0, 0, 4, 4)],
        [Segment(5, 5, 9, 9)],
    )
    index = MappingIndex()
    index.add(sorted([*syncs, *said], key=lambda e: e.emitted_at_ms))  # the state log's order
    assert index.translate(FLOW, "r0", 0, 3).downstream == 8  # through the recopy, not T1's copy at 3
    assert index.translate(FLOW, "r1", 0, 3).downstream == 3  # the upgrade kept its copies
    assert index.translate(FLOW, "r2", 0, 3) is None  # the lost copies translate nothing
    assert index.translate(FLOW, "r4", 0, 3).downstream == 3  # S2 in T2
    assert index.translate(FLOW, "r4", 0, 8).downstream == 6  # past T2's last copy (5 at 5)


def _seg_of(row: dict) -> Segment:
    return Segment(row["downstream_start"], row["upstream_start"], row["upstream_end"], row["downstream_end"])
