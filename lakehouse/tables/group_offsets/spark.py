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

from lakehouse.gold import GoldInputs, GoldTable, Tail, latest, touched_keys
from lakehouse.tables.group_offsets import FROM_CHECKPOINT, GROUP_KEY, SPEC
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.offset_mapping.spark import current_mapping, recreated_key
from lakehouse.translate import translate_offsets

__all__ = ["group_offsets", "TABLE"]


def group_offsets(checkpoints: DataFrame, mapping: DataFrame) -> DataFrame:
    """The table from silver ``checkpoint`` rows and gold ``offset_mapping`` (same keys)."""
    last = latest(checkpoints, GROUP_KEY, ["emitted_at_ms"]).select(
        *[F.col(field).alias(column) for field, column in FROM_CHECKPOINT]
    )
    out = translate_offsets(last, mapping, id_cols=GROUP_KEY, offset_col="committed_offset")
    return out.withColumn("translation_error", F.col("translated_offset") - F.col("exact_offset"))


def _compute(inputs: GoldInputs) -> DataFrame:
    return group_offsets(inputs.restrict(inputs.silver("checkpoint")), current_mapping(inputs))


def _tail(inputs: GoldInputs) -> Tail:
    """The touched partitions' rows from the table itself and the new checkpoints, without silver.

    A row keeps the latest checkpoint of its group with every field ``group_offsets`` reads from
    it, so the latest of (the row, the new checkpoints) is the latest of the whole history; the
    translation is redone through the mapping as it is now.
    """
    held = inputs.restrict(inputs.gold("group_offsets")).select(
        *[F.col(column).alias(field) for field, column in FROM_CHECKPOINT]
    )
    candidates = held
    if "checkpoint" in inputs.changes:
        candidates = held.unionByName(inputs.restrict(inputs.changes["checkpoint"]).select(*held.columns))
    assert inputs.keys is not None
    scope = inputs.keys  # whole partitions: the spec has no tail order
    return Tail(group_offsets(candidates, current_mapping(inputs)), scope)


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(
        changes, {"checkpoint": MAPPING_KEY, "offset_sync": MAPPING_KEY, "topic_recreated": recreated_key()}
    ),
    compute=_compute,
    tail=_tail,
)
