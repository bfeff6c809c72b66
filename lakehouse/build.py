"""``mirrorlake lakehouse build``: state topics -> bronze -> silver -> gold, as one batch run.

Each stage resumes from its own record of progress (bronze: the Kafka offsets in its stream
checkpoint, silver: the bronze Delta version in its checkpoint, gold: the silver versions each
table consumed, ``lakehouse.incremental``), so a build that dies at any point is simply run
again and gives the tables a clean build gives. ``full=True`` recomputes every gold table from
all of silver instead of MERGEing what new events touch (same result, slower).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ingest.bronze import start_bronze_ingest
from ingest.paths import LakehousePaths
from ingest.spark import reach_from_spark
from lakehouse.catalog import table_paths
from lakehouse.delta_log import REPAIR_HINT, delta_log_problem
from lakehouse.duck.delta import row_count
from lakehouse.duck.silver import update_silver_increment
from lakehouse.duck.silver_decode import DecodePool
from lakehouse.gold_tables import GOLD_TABLES
from lakehouse.incremental import GoldUpdate, update_gold
from lakehouse.lease import writer_lease
from lakehouse.silver import update_silver
from replicator.config import MirrorlakeConfig
from replicator.errors import ExitCode, MirrorlakeError

__all__ = ["BuildReport", "build_lakehouse", "LakehouseBuildError", "run_bronze", "SilverEngine"]

_log = logging.getLogger(__name__)
_COUNTS_AT_ONCE = 4  # a count is a Delta log read and a small job: latency, which overlaps
SilverEngine = Literal["auto", "spark"]  # auto: delta-rs for an increment it can take, else Spark


class LakehouseBuildError(MirrorlakeError):
    """A stage of the lakehouse build failed; rerunning resumes from the last checkpoint."""

    exit_code = ExitCode.LAKEHOUSE_BUILD


@dataclass(frozen=True)
class BuildReport:
    """Row counts after a build (equal for equal contents); ``gold_updates`` says what the build did."""

    bronze_rows: int
    quarantined: int
    offset_syncs: int
    mapping_segments: int
    gold_rows: dict[str, int] = field(default_factory=dict)
    gold_updates: list[GoldUpdate] = field(default_factory=list, compare=False)


def check_delta_logs(paths: LakehousePaths) -> None:
    """``LakehouseBuildError`` naming the table and file if a table's Delta log is cut short or lacks
    its checkpoint (``lakehouse.delta_log``): found before Spark reads it, with how to repair."""
    for name, path in table_paths(paths).items():
        if (problem := delta_log_problem(path)) is not None:
            raise LakehouseBuildError(f"table {name} is not readable: {problem}{REPAIR_HINT}")


def run_bronze(spark: SparkSession, config: MirrorlakeConfig, paths: LakehousePaths) -> None:
    """Ingest everything the state topics hold now into bronze (availableNow) and wait for it."""
    for query in start_bronze_ingest(spark, config, paths, available_now=True):
        query.awaitTermination()
        check_bronze(query)


def check_bronze(query: StreamingQuery) -> None:
    """Raise ``LakehouseBuildError`` if a bronze ingest stream failed."""
    if query.exception() is not None:
        raise LakehouseBuildError(f"bronze ingest {query.name} failed: {query.exception()}")


def build_lakehouse(
    spark: SparkSession,
    config: MirrorlakeConfig,
    *,
    full: bool = False,
    on_stage: Callable[[str], None] | None = None,
    lease: bool = True,
) -> BuildReport:
    """One build: bronze, silver, then every gold table (incremental unless ``full``).

    ``on_stage(name)`` is called as each stage starts (``bronze``, ``silver``, ``gold <table>``,
    ``counting rows``): a progress display's hook (``mirrorlake.progress.Steps.stage``).
    The build holds the lakehouse's writer lease (``lakehouse.lease``) unless ``lease`` is False:
    the caller holds it (the CLI takes it before Spark starts).
    """
    paths = LakehousePaths.of(config.lakehouse)
    reach_from_spark(spark, paths.root)
    held = writer_lease(paths.root, "lakehouse build") if lease else contextlib.nullcontext()
    with held:
        check_delta_logs(paths)
        if on_stage is not None:
            on_stage("bronze: ingest the state topics")
        run_bronze(spark, config, paths)
        return refresh(spark, config, paths, full=full, on_stage=on_stage)


def refresh(
    spark: SparkSession,
    config: MirrorlakeConfig,
    paths: LakehousePaths,
    *,
    full: bool = False,
    on_stage: Callable[[str], None] | None = None,
    silver: SilverEngine = "auto",
    decoder: DecodePool | None = None,
) -> BuildReport:
    """Silver and gold from what bronze holds (the part of a build after ingest): silver's increment
    on delta-rs where it can be (``lakehouse.duck.silver``; ``decoder``'s processes decode a large
    one), else (or with ``silver="spark"``) on Spark."""
    increment = (
        update_silver_increment(paths, on_stage=on_stage, decoder=decoder) if silver == "auto" else None
    )  # names its steps
    if increment is not None:
        _log.info(
            "silver: %d bronze rows of versions %d..%d decoded without Spark in %.2f s (%s, %d quarantined)",
            increment.bronze_rows, increment.after + 1, increment.upto, increment.seconds,
            ", ".join(f"{t} {n}" for t, n in sorted(increment.appended.items())) or "nothing new",
            increment.quarantined,
        )  # fmt: skip
    else:
        if on_stage is not None:
            on_stage("silver: decode and merge on Spark")
        try:
            update_silver(spark, paths)
        except RuntimeError as exc:
            raise LakehouseBuildError(str(exc)) from exc
    updates = update_gold(spark, paths, config=config, full=full, on_stage=on_stage)
    if on_stage is not None:
        on_stage("counting rows")
    tables = {spec.name: paths.gold(spec.name) for spec in GOLD_TABLES}
    tables.update(bronze=paths.bronze, quarantine=paths.quarantine, offset_sync=paths.silver("offset_sync"))
    with ThreadPoolExecutor(max_workers=_COUNTS_AT_ONCE, thread_name_prefix="count") as pool:
        counts = dict(zip(tables, pool.map(lambda p: _count(spark, p), tables.values()), strict=True))
    gold_rows = {spec.name: counts[spec.name] for spec in GOLD_TABLES}
    return BuildReport(
        bronze_rows=counts["bronze"],
        quarantined=counts["quarantine"],
        offset_syncs=counts["offset_sync"],
        mapping_segments=gold_rows["offset_mapping"],
        gold_rows=gold_rows,
        gold_updates=updates,
    )


def _count(spark: SparkSession, table: Path) -> int:
    """A table's rows: from its log's statistics where they say it (``bench.freshness`` measured the
    Spark counts of fourteen tables at 6-8 s of every ``lakehouse serve`` refresh), else counted."""
    path = str(table)
    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    counted = row_count(table)
    return counted if counted is not None else spark.read.format("delta").load(path).count()
