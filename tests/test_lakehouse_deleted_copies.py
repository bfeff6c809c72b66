"""``lakehouse.target_deletions.deleted_copies`` (Spark expressions, evaluated only where a segment
starts below the log start) equals the Python rule ``deleted_on_target`` on every row, skipped ones
included.

Random segments (overlapping replays, gaps, negative and positive deltas), log starts and
``since`` values, with nulls where the columns allow them; no Kafka needed.
"""

from __future__ import annotations

import random

import pytest

from replicator.client.failover_cost import deleted_on_target
from tests.lakehouse_support import random_segments

pytestmark = pytest.mark.spark


def test_deleted_copies_equals_the_python_rule_on_every_row(spark):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lakehouse.target_deletions import deleted_copies

    rng = random.Random(13)
    seg_type = T.StructType([T.StructField(n, T.LongType()) for n in ("us", "ue", "ds", "de")])
    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("_segments", T.ArrayType(seg_type)),
            T.StructField("_first_copy", T.LongType()),
            T.StructField("log_start", T.LongType()),
            T.StructField("since", T.LongType()),
        ]
    )
    rows, cases = [], {}
    for i in range(400):
        segs = random_segments(rng, 5)
        log_start = None if i % 17 == 0 else rng.randint(-5, 260)
        since = None if i % 11 == 0 else rng.randint(0, 250)
        if i % 29 == 0:
            segs = []  # and a null array
        tuples = [(s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end) for s in segs]
        first = min((s.downstream_start for s in segs), default=None)
        rows.append((i, None if i % 29 == 0 else tuples, first, log_start, since))
        g = None if log_start is None else deleted_on_target(segs, log_start, since or 0)
        cases[i] = None if g is None else (g.records, g.upstream_first, g.upstream_last, g.downstream_first)
    df = spark.createDataFrame(rows, schema)
    got = df.select(
        "id", deleted_copies(F.col("_segments"), F.col("_first_copy"), F.col("log_start"), F.col("since")).alias("g")
    ).collect()
    assert len(got) == len(cases)
    deleted = 0
    for row in got:
        g = row["g"]
        value = None if g is None else (g["records"], g["upstream_first"], g["upstream_last"], g["downstream_first"])
        assert value == cases[row["id"]], row["id"]
        deleted += bool(value and value[0])
    assert deleted > 20  # the rule is exercised, not only the skipped rows
