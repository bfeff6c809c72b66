"""Gold ``group_offsets``: per (flow, group, source topic, partition), the latest checkpoint.

Columns: the source committed offset, the checkpoint's translated target offset and ``method``
(as the emitter wrote them: ``exact``, ``after_last_copy``, ..., or ``mm2`` for checkpoints
imported from MirrorMaker 2), ``as_of_ms`` (the checkpoint's emission time), and the translation
recomputed now through ``offset_mapping`` (``exact_offset``, ``exact_method``), so a lagging or
lossy checkpoint shows up as ``translated_offset - exact_offset`` (negative: records re-read on a
failover, positive: records skipped). "Latest" = largest ``emitted_at_ms``, ties by event id.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, latest, touched_keys
from lakehouse.offset_mapping import MAPPING_KEY
from lakehouse.translate import translate_offsets

__all__ = ["group_offsets", "TABLE", "GROUP_KEY"]

GROUP_KEY = ("flow", "group", "source_topic", "partition")


def group_offsets(checkpoints: DataFrame, mapping: DataFrame) -> DataFrame:
    """The table from silver ``checkpoint`` rows and gold ``offset_mapping`` (same keys)."""
    last = latest(checkpoints, GROUP_KEY, ["emitted_at_ms"]).select(
        "flow",
        "source_cluster",
        "target_cluster",
        "group",
        "source_topic",
        "target_topic",
        "partition",
        F.col("upstream_offset").alias("committed_offset"),
        F.col("downstream_offset").alias("translated_offset"),
        "method",
        "error_bound",
        F.col("emitted_at_ms").alias("as_of_ms"),
        "replicator_id",
        F.col("event_id").alias("checkpoint_event_id"),
    )
    out = translate_offsets(last, mapping, id_cols=GROUP_KEY, offset_col="committed_offset")
    return out.withColumn("translation_error", F.col("translated_offset") - F.col("exact_offset"))


def _compute(inputs: GoldInputs) -> DataFrame:
    return group_offsets(inputs.restrict(inputs.silver("checkpoint")), inputs.restrict(inputs.gold("offset_mapping")))


TABLE = GoldTable(
    name="group_offsets",
    key=MAPPING_KEY,  # a mapping change re-translates every group of its partition
    row_id=GROUP_KEY,
    sources=("checkpoint", "offset_sync"),
    touched=lambda changes: touched_keys(changes, {"checkpoint": MAPPING_KEY, "offset_sync": MAPPING_KEY}),
    compute=_compute,
    depends_on=("offset_mapping",),
)
