"""Gold ``failovers``: every failover applied (``replicator.failover``), one row per offset written.

From silver ``failover`` events: when (``applied_at_ms``), how (``mode``: unplanned | planned |
at_time, ``at_ms``), who and where (``user``, ``host``), and per group and partition the committed
source offset, the target offset written and what the plan said it costs (``records_lost``,
``records_reread``, ``records_unreplicated``); the flow-wide figures of the plan beside each row
(``flow_records_unreplicated``, ``flow_bytes_unreplicated``, ``flow_seconds_unreplicated``,
``consistent_cut_ms``). Delta time travel gives the lakehouse as it was when it was applied.

The measured outcome: what each group actually did on the target afterwards. Nothing observes a
group's offsets on the target but a flow whose *source* is that target: the reverse flow (``B->A``
for a failover of ``A->B``, set up by failback step 3) checkpoints the group's committed offsets
on B. From its checkpoints of the group's target topic and partition emitted after the failover:

* ``outcome_first_offset`` / ``outcome_first_at_ms``: the group's first committed offset on the
  target seen after the failover, and when; ``outcome_offset`` / ``outcome_at_ms``: the latest;
* ``outcome_records_reread``: ``target_offset - outcome_first_offset`` when the group committed
  below the offset written (its consumers were reset or rewound: they read again what the plan
  said they had read), else 0;
* ``outcome_records_consumed``: ``outcome_offset - target_offset``, the records it went on to
  commit past the written offset (negative when it was moved back);
* ``outcome``: ``not_observed`` (no reverse checkpoint yet: the outcome columns are null),
  ``resumed`` (first commit at or past the written offset) or ``rewound``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys
from lakehouse.tables.failovers import KEY, SPEC

__all__ = ["failovers", "forward_flow", "TABLE"]


def failovers(events: DataFrame, checkpoints: DataFrame) -> DataFrame:
    """The table from silver ``failover`` rows and (for the outcome) silver ``checkpoint`` rows."""
    rows = events.select("*", F.explode("offsets").alias("o"))
    applied = rows.select(
        "flow",
        F.col("event_id").alias("failover_event_id"),
        F.col("emitted_at_ms").alias("applied_at_ms"),
        "mode",
        "at_ms",
        "source_cluster",
        "target_cluster",
        F.col("o.group").alias("group"),
        F.col("o.source_topic").alias("source_topic"),
        F.col("o.target_topic").alias("target_topic"),
        F.col("o.partition").alias("partition"),
        F.col("o.committed_offset").alias("committed_offset"),
        F.col("o.offset").alias("target_offset"),
        F.col("o.records_lost").alias("records_lost"),
        F.col("o.records_reread").alias("records_reread"),
        F.col("o.records_unreplicated").alias("records_unreplicated"),
        F.col("records_unreplicated").alias("flow_records_unreplicated"),
        F.col("bytes_unreplicated").alias("flow_bytes_unreplicated"),
        F.col("seconds_unreplicated").alias("flow_seconds_unreplicated"),
        "consistent_cut_ms",
        "user",
        "host",
    )
    return _with_outcome(applied, checkpoints)


def _with_outcome(applied: DataFrame, checkpoints: DataFrame) -> DataFrame:
    """``applied`` plus the outcome columns from the reverse flow's checkpoints (see the module)."""
    seen = checkpoints.select(
        forward_flow(F.col("source_cluster"), F.col("target_cluster")).alias("_forward"),
        F.col("flow").alias("_reverse"),
        F.col("group").alias("_group"),
        F.col("source_topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.struct(F.col("emitted_at_ms").alias("t"), F.col("upstream_offset").alias("c")).alias("_seen"),
    )
    cond = (
        (F.col("_forward") == F.col("flow"))
        & (F.col("_reverse") == F.concat(F.col("target_cluster"), F.lit("->"), F.col("source_cluster")))
        & (F.col("_group") == F.col("group"))
        & (F.col("_topic") == F.col("target_topic"))
        & (F.col("_partition") == F.col("partition"))
        & (F.col("_seen.t") > F.col("applied_at_ms"))
    )
    row_id = ["failover_event_id", "group", "source_topic", "partition"]
    observed = (
        applied.select(*row_id, "flow", "target_cluster", "source_cluster", "target_topic", "applied_at_ms")
        .join(seen, cond, "inner")
        .groupBy(*row_id)
        .agg(F.min("_seen").alias("_first"), F.max("_seen").alias("_last"))
    )
    out = applied.join(observed, row_id, "left")
    written = F.col("target_offset")
    first, last = F.col("_first.c"), F.col("_last.c")
    return out.select(
        *applied.columns,
        first.alias("outcome_first_offset"),
        F.col("_first.t").alias("outcome_first_at_ms"),
        last.alias("outcome_offset"),
        F.col("_last.t").alias("outcome_at_ms"),
        F.when(first.isNotNull(), F.greatest(F.lit(0), written - first)).cast("long").alias("outcome_records_reread"),
        (last - written).cast("long").alias("outcome_records_consumed"),
        F.when(first.isNull(), F.lit("not_observed"))
        .when(first >= written, F.lit("resumed"))
        .otherwise(F.lit("rewound"))
        .alias("outcome"),
    )


def forward_flow(source_cluster: Column, target_cluster: Column) -> Column:
    """The flow a reverse flow's event belongs back to: ``B->A``'s (source B, target A) is ``A->B``."""
    return F.concat(target_cluster, F.lit("->"), source_cluster)


def _compute(inputs: GoldInputs) -> DataFrame:
    checkpoints = inputs.silver("checkpoint")
    checkpoints = inputs.restrict(
        checkpoints.withColumn("_forward_flow", forward_flow(F.col("source_cluster"), F.col("target_cluster"))),
        ["_forward_flow"],
    ).drop("_forward_flow")
    return failovers(inputs.restrict(inputs.silver("failover")), checkpoints)


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(
        changes,
        {"failover": KEY, "checkpoint": [forward_flow(F.col("source_cluster"), F.col("target_cluster")).alias("flow")]},
    ),
    compute=_compute,
)
