"""Gold ``failovers``: every failover applied (``replicator.failover``), one row per offset written.

From silver ``failover`` events: when (``applied_at_ms``), how (``mode``: unplanned | planned |
at_time, ``at_ms``), who and where (``user``, ``host``), and per group and partition the committed
source offset, the target offset written and what the plan said it costs (``records_lost``,
``records_reread``, ``records_unreplicated``); the flow-wide figures of the plan beside each row
(``flow_records_unreplicated``, ``flow_bytes_unreplicated``, ``flow_seconds_unreplicated``,
``consistent_cut_ms``). Delta time travel gives the lakehouse as it was when it was applied.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys

__all__ = ["failovers", "TABLE"]

KEY = ("flow",)


def failovers(events: DataFrame) -> DataFrame:
    """The table from silver ``failover`` rows."""
    rows = events.select("*", F.explode("offsets").alias("o"))
    return rows.select(
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


def _compute(inputs: GoldInputs) -> DataFrame:
    return failovers(inputs.restrict(inputs.silver("failover")))


TABLE = GoldTable(
    name="failovers",
    key=KEY,
    row_id=("failover_event_id", "group", "source_topic", "partition"),
    sources=("failover",),
    touched=lambda changes: touched_keys(changes, {"failover": KEY}),
    compute=_compute,
)
