"""Gold ``failbacks``: every failback step applied (``replicator.failover.failback``), one row per step.

From silver ``failback`` events of the failed-over flow (written to its target's state topic):
when (``applied_at_ms``), which ``action`` (``recover``: records the target never received,
re-produced to it; ``groups``: groups moved back to the source), who and where (``user``,
``host``), and its figures: ``records`` re-produced, the source ``ranges`` recovered and their
``bytes``, the ``groups`` moved back and the ``offsets_written`` on the source.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys
from lakehouse.tables.failbacks import KEY, SPEC

__all__ = ["failbacks", "TABLE"]


def failbacks(events: DataFrame) -> DataFrame:
    """The table from silver ``failback`` rows."""
    return events.select(
        "flow",
        F.col("event_id").alias("failback_event_id"),
        F.col("emitted_at_ms").alias("applied_at_ms"),
        "action",
        "source_cluster",
        "target_cluster",
        F.col("records").cast("long").alias("records"),
        F.size("ranges").alias("ranges"),
        F.coalesce(F.aggregate("ranges", F.lit(0).cast("long"), lambda acc, r: acc + r["bytes"]), F.lit(0))
        .cast("long")
        .alias("bytes"),
        F.array_join("groups", ",").alias("groups"),
        F.size("offsets").alias("offsets_written"),
        "user",
        "host",
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return failbacks(inputs.restrict(inputs.silver("failback")))


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(changes, {"failback": KEY}),
    compute=_compute,
)
