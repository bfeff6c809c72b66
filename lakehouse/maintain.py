"""``mirrorlake lakehouse maintain``: OPTIMIZE (compact small files) and VACUUM every table.

Each build and each streaming micro-batch adds small files; OPTIMIZE rewrites them into few large
ones (a new version, same rows). VACUUM then deletes the files no version within the retention
needs. Delta's safe minimum is 168 hours (7 days): a shorter retention can delete files that a
running reader or writer (a ``lakehouse serve``, a long query, a stream's next batch) still
needs, and it also cuts time travel (``--as-of``) and the silver change data feed that
incremental gold reads (a build then falls back to a full rebuild). Below 168 h it refuses unless
``force_unsafe_retention`` is set.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from ingest.paths import LakehousePaths
from ingest.spark import reach_from_spark
from lakehouse.catalog import table_paths
from lakehouse.lease import writer_lease
from replicator.errors import ExitCode, MirrorlakeError

__all__ = ["MaintenanceReport", "maintain", "UnsafeRetentionError", "SAFE_RETENTION_HOURS"]

_log = logging.getLogger(__name__)
SAFE_RETENTION_HOURS = 168
# Tables maintained side by side: each is a handful of small jobs, listings and a commit, whose
# waits overlap on Spark's threads; every table is its own Delta log, so they do not conflict.
_TABLES_AT_ONCE = 3


class UnsafeRetentionError(MirrorlakeError):
    """A VACUUM retention below Delta's safe 168 hours was asked for without the explicit override."""

    exit_code = ExitCode.UNSAFE_RETENTION


@dataclass(frozen=True)
class TableMaintenance:
    table: str
    files_before: int
    files_after: int
    version: int


@dataclass(frozen=True)
class MaintenanceReport:
    retention_hours: float
    tables: list[TableMaintenance]


def check_retention(retention_hours: float, *, force_unsafe_retention: bool) -> None:
    """Raise ``UnsafeRetentionError`` for a retention below 168 h unless forced, or not a number of hours."""
    if not math.isfinite(retention_hours) or retention_hours < 0:  # nan passes every comparison below
        raise UnsafeRetentionError(f"--retention-hours must be a number of hours >= 0, got {retention_hours}")
    if retention_hours < SAFE_RETENTION_HOURS and not force_unsafe_retention:
        raise UnsafeRetentionError(
            f"--retention-hours {retention_hours:g} is below Delta's safe minimum of {SAFE_RETENTION_HOURS} h: "
            "VACUUM could delete files that a running `lakehouse serve`, a query or a stream still reads, and "
            "time travel (--as-of) and the change feed incremental builds read would end there. "
            "Pass --force-unsafe-retention if nothing else uses the lakehouse now."
        )


def maintain(
    spark: SparkSession,
    paths: LakehousePaths,
    *,
    retention_hours: float = SAFE_RETENTION_HOURS,
    force_unsafe_retention: bool = False,
) -> MaintenanceReport:
    """OPTIMIZE then VACUUM every Delta table of the lakehouse (bronze, quarantine, silver, gold).

    Up to ``_TABLES_AT_ONCE`` tables at a time; the report lists them in ``table_paths`` order."""
    check_retention(retention_hours, force_unsafe_retention=force_unsafe_retention)
    reach_from_spark(spark, paths.root)
    unsafe = retention_hours < SAFE_RETENTION_HOURS
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    previous = spark.conf.get(key, "true")
    try:
        if unsafe:
            spark.conf.set(key, "false")  # the user forced it; Delta's own check would refuse
        tables = [(n, str(p)) for n, p in table_paths(paths).items() if DeltaTable.isDeltaTable(spark, str(p))]
        with (
            writer_lease(paths.root, "lakehouse maintain"),
            ThreadPoolExecutor(max_workers=_TABLES_AT_ONCE, thread_name_prefix="maintain") as pool,
        ):
            results = list(pool.map(lambda t: _maintain_table(spark, t[0], t[1], retention_hours), tables))
    finally:
        spark.conf.set(key, previous or "true")
    return MaintenanceReport(retention_hours, results)


def _maintain_table(spark: SparkSession, name: str, path: str, retention_hours: float) -> TableMaintenance:
    before = _files(spark, path)
    table = DeltaTable.forPath(spark, path)
    table.optimize().executeCompaction()
    table.vacuum(retention_hours)
    after = _files(spark, path)
    version = int(table.history(1).select("version").collect()[0][0])
    _log.info("%s: %d -> %d files (version %d)", name, before, after, version)
    return TableMaintenance(name, before, after, version)


def _files(spark: SparkSession, path: str) -> int:
    return int(DeltaTable.forPath(spark, path).detail().select("numFiles").collect()[0][0])
