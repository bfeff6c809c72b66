"""Exact translation of committed source offsets through gold ``offset_mapping``, in Spark.

The Spark twin of ``replicator.client.mapping.translate`` (and of the DuckDB ``translate_offset``
macro): the latest copy covering the offset (largest ``downstream_start``); else right after the
latest copy of the last replicated record before it; else the first copy after it; else null.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.tables.offset_mapping import MAPPING_KEY
from replicator.client.mapping import TranslationMethod

__all__ = ["translate_offsets"]


def translate_offsets(
    queries: DataFrame, mapping: DataFrame, *, id_cols: Sequence[str], offset_col: str, prefix: str = "exact"
) -> DataFrame:
    """``queries`` plus ``<prefix>_offset`` and ``<prefix>_method`` (exact | after_last_copy | ...).

    ``queries`` must have the mapping key columns (flow, source_topic, partition), ``offset_col``,
    and ``id_cols`` identifying each row (a superset of the key).
    """
    c = F.col(offset_col)
    seg = mapping.select(
        *MAPPING_KEY,
        F.col("upstream_start").alias("_us"),
        F.col("upstream_end").alias("_ue"),
        F.col("downstream_start").alias("_ds"),
        F.col("downstream_end").alias("_de"),
        F.col("delta").alias("_delta"),
    )
    joined = queries.select(*id_cols, offset_col).join(seg, list(MAPPING_KEY), "left")
    covers = (F.col("_us") <= c) & (c <= F.col("_ue"))
    before = F.col("_ue") < c
    after = F.col("_us") > c
    found = joined.groupBy(*id_cols).agg(
        F.max_by(F.when(covers, c + F.col("_delta")), F.when(covers, F.col("_ds"))).alias("_covering"),
        F.max_by(F.when(before, F.col("_de") + 1), F.when(before, F.struct("_ue", "_de"))).alias("_before"),
        F.min_by(F.when(after, F.col("_ds")), F.when(after, F.struct("_us", -F.col("_ds")))).alias("_after"),
    )
    method = (
        F.when(F.col("_covering").isNotNull(), F.lit(TranslationMethod.EXACT.value))
        .when(F.col("_before").isNotNull(), F.lit(TranslationMethod.AFTER_LAST_COPY.value))
        .when(F.col("_after").isNotNull(), F.lit(TranslationMethod.BEFORE_FIRST_COPY.value))
    )
    result = found.select(
        *id_cols,
        F.coalesce("_covering", "_before", "_after").alias(f"{prefix}_offset"),
        method.alias(f"{prefix}_method"),
    )
    return queries.join(result, list(id_cols), "left")
