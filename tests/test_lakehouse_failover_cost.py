"""``lakehouse.tables.rpo_groups.spark.failover_cost_column`` (Spark expressions) equals the Python rule
``failover_cost`` on every row: random segments (overlapping replays, gaps, negative and positive
deltas, empty and null lists), committed offsets and resume offsets, with nulls where the columns
allow them; no Kafka needed."""

from __future__ import annotations

import random

import pytest

from replicator.client.failover_cost import failover_cost
from tests.lakehouse_support import random_segments

pytestmark = pytest.mark.spark


def test_failover_cost_column_equals_the_python_rule_on_every_row(spark):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lakehouse.tables.rpo_groups.spark import failover_cost_column
    from lakehouse.target_deletions import segments_type

    rng = random.Random(7)
    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("_segments", segments_type()),
            T.StructField("committed", T.LongType()),
            T.StructField("resume", T.LongType()),
        ]
    )
    rows, cases = [], {}
    for i in range(500):
        segs = random_segments(rng, 6)
        committed = None if i % 23 == 0 else rng.randint(0, 270)
        resume = None if i % 19 == 0 else rng.randint(-5, 300)
        null_list = i % 31 == 0
        if null_list:
            segs = []
        tuples = [(s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end) for s in segs]
        rows.append((i, None if null_list else tuples, committed, resume))
        if committed is None or resume is None:
            cases[i] = None
        else:
            cost = failover_cost(segs, committed, resume)
            cases[i] = (cost.lost, cost.reread, cost.duplicated)
    got = (
        spark.createDataFrame(rows, schema)
        .select("id", failover_cost_column(F.col("_segments"), F.col("committed"), F.col("resume")).alias("c"))
        .collect()
    )
    assert len(got) == len(cases)
    for row in got:
        c = row["c"]
        assert (None if c is None else (c["lost"], c["reread"], c["duplicated"])) == cases[row["id"]], row["id"]
    # every part of the rule is exercised, not only zeros
    values = [v for v in cases.values() if v is not None]
    assert sum(v[0] > 0 for v in values) > 30
    assert sum(v[1] > 0 for v in values) > 30
    assert sum(v[2] > 0 for v in values) > 30
