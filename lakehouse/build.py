"""``mirrorlake lakehouse build``: state topics -> bronze -> silver -> gold, as one batch run.

Each stage is incremental through its own checkpoint (bronze: Kafka offsets, silver: the bronze
Delta version), so a build that dies midway is simply run again. Gold tables are derived from
silver in full on every build for now (exactly reproducible; incremental MERGE comes later).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from ingest.bronze import start_bronze_ingest
from ingest.paths import LakehousePaths
from lakehouse.offset_mapping import offset_mapping
from lakehouse.silver import update_silver
from replicator.config import MirrorlakeConfig
from replicator.errors import MirrorlakeError

__all__ = ["BuildReport", "build_lakehouse", "LakehouseBuildError"]

_log = logging.getLogger(__name__)


class LakehouseBuildError(MirrorlakeError):
    """A stage of the lakehouse build failed; rerunning resumes from the last checkpoint."""

    exit_code = 10


@dataclass(frozen=True)
class BuildReport:
    bronze_rows: int
    quarantined: int
    offset_syncs: int
    mapping_segments: int


def build_lakehouse(spark: SparkSession, config: MirrorlakeConfig) -> BuildReport:
    paths = LakehousePaths(config.lakehouse.path.resolve())
    for query in start_bronze_ingest(spark, config, paths, available_now=True):
        query.awaitTermination()
        if query.exception() is not None:
            raise LakehouseBuildError(f"bronze ingest {query.name} failed: {query.exception()}")
    try:
        update_silver(spark, paths)
    except RuntimeError as exc:
        raise LakehouseBuildError(str(exc)) from exc
    syncs_path = str(paths.silver("offset_sync"))
    segments = 0
    syncs = 0
    if DeltaTable.isDeltaTable(spark, syncs_path):
        silver_syncs = spark.read.format("delta").load(syncs_path)
        syncs = silver_syncs.count()
        mapping = offset_mapping(silver_syncs)
        (
            mapping.write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(str(paths.gold("offset_mapping")))
        )
        segments = _count(spark, str(paths.gold("offset_mapping")))
    return BuildReport(
        bronze_rows=_count(spark, str(paths.bronze)),
        quarantined=_count(spark, str(paths.quarantine)),
        offset_syncs=syncs,
        mapping_segments=segments,
    )


def _count(spark: SparkSession, path: str) -> int:
    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    return spark.read.format("delta").load(path).count()
