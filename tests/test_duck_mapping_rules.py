"""The DuckDB twins' mapping rules against the Python reference, without Spark.

``lakehouse.tables.offset_mapping.duck.segments_sql`` builds a partition's segments from its syncs and
``lakehouse.tables.group_offsets.duck.translated`` translates committed offsets through them; Hypothesis
generates replications with gaps, foreign records on the target, crashes and at-least-once replays
(``tests.test_mapping_properties.replication_runs``), and both must give what
``replicator.client.mapping`` gives (``build_segments``, ``translate``).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.tables.group_offsets.duck import translated
from lakehouse.tables.offset_mapping.duck import segments_sql
from replicator.client.mapping import Segment, build_segments, translate
from tests.test_mapping_properties import points_of, replication_runs

FLOW, TOPIC = "A->B", "t"


def _syncs(runs) -> pa.Table:  # noqa: ANN001 - replication_runs' examples
    rows = [
        {
            "flow": FLOW,
            "source_topic": TOPIC,
            "partition": p,
            "source_cluster": "A",
            "target_cluster": "B",
            "target_topic": f"A.{TOPIC}",
            "emitted_at_ms": i,
            "reason": str(s.reason),
            "upstream_offset": s.upstream_offset,
            "downstream_offset": s.downstream_offset,
            "previous_upstream_offset": s.previous_upstream_offset,
            "previous_downstream_offset": s.previous_downstream_offset,
            "source_topic_id": None,  # one life (the lives are held by test_mapping_engines)
            "target_topic_id": None,
        }
        for p, (_, _, syncs) in enumerate(runs)
        for i, s in enumerate(syncs)
    ]
    types = {"partition": pa.int32(), "emitted_at_ms": pa.int64()}
    types |= {c: pa.int64() for c in rows[0] if c.endswith("_offset")} if rows else {}
    return pa.Table.from_pylist(rows, schema=pa.schema([(c, types.get(c, pa.string())) for c in rows[0]]))


@settings(max_examples=40, deadline=None)
@given(st.lists(replication_runs(), min_size=1, max_size=4))
def test_the_twins_segments_and_translations_equal_the_reference(runs):
    con = duckdb.connect()
    syncs = _syncs(runs)
    if not syncs.num_rows:
        return
    con.register("syncs_in", syncs)
    scope = pa.table(
        {
            "flow": [FLOW] * len(runs),
            "source_topic": [TOPIC] * len(runs),
            "partition": pa.array(range(len(runs)), pa.int32()),
            "_tail_downstream_start": pa.nulls(len(runs), pa.int64()),  # every partition whole
            "_tail_upstream_start": pa.nulls(len(runs), pa.int64()),
        }
    )
    con.register("scope", scope)
    con.execute(f"CREATE TABLE segments AS {segments_sql('SELECT * FROM syncs_in', 'scope')}")
    got: dict[int, list[Segment]] = {p: [] for p in range(len(runs))}
    for p, ds, us, ue, de in con.sql(
        "SELECT partition, downstream_start, upstream_start, upstream_end, downstream_end FROM segments"
    ).fetchall():
        got[p].append(Segment(ds, us, ue, de))
    reference = {p: build_segments(points_of(syncs)) for p, (_, _, syncs) in enumerate(runs)}
    assert {p: sorted(s) for p, s in got.items()} == {p: sorted(s) for p, s in reference.items()}

    queries = [(p, c) for p, (records, _, _) in enumerate(runs) for c in range(0, records[-1] + 3)]
    con.register(
        "q",
        pa.table(
            {
                "flow": [FLOW] * len(queries),
                "source_topic": [TOPIC] * len(queries),
                "partition": pa.array([p for p, _ in queries], pa.int32()),
                "c": pa.array([c for _, c in queries], pa.int64()),
            }
        ),
    )
    answers = {
        (p, c): (d, m)
        for p, c, d, m in con.sql(
            f"SELECT partition, c, exact_offset, exact_method "
            f"FROM ({translated('q', 'segments', ('flow', 'source_topic', 'partition', 'c'), 'c')})"
        ).fetchall()
    }
    for p, c in queries:
        py = translate(reference[p], c)
        assert answers[(p, c)] == ((py.downstream, str(py.method)) if py else (None, None)), (p, c)


def test_touched_keys_are_distinct_also_when_one_type_changed(tmp_path):
    """Two new syncs of one partition and no new watermark: the twin's scope held the partition
    twice and the rpo twin wrote each of its rows twice (the engine harness found it)."""
    import pyarrow as pa

    from ingest.paths import LakehousePaths
    from lakehouse.duck.engine import DuckInputs

    syncs = pa.table({"flow": ["A->B"] * 3, "source_topic": ["t"] * 3, "partition": [0, 0, 1]})
    con = duckdb.connect()
    inputs = DuckInputs(con, LakehousePaths(tmp_path), {}, {"offset_sync": syncs})
    keys = inputs.touched({"offset_sync": ("flow", "source_topic", "partition"), "watermark": ("flow",)})
    assert sorted(keys.to_pylist(), key=lambda k: k["partition"]) == [
        {"flow": "A->B", "source_topic": "t", "partition": 0},
        {"flow": "A->B", "source_topic": "t", "partition": 1},
    ]
