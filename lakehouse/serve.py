"""``mirrorlake lakehouse serve``: ingest continuously, rebuild silver and gold every N seconds.

Each refresh first brings bronze up to date from the state topics (``ingest.kafka_bronze``: a
librdkafka consumer per state cluster and one delta-rs append, no Spark job), then silver and gold
from bronze (incrementally), every ``interval_seconds``, start to start: one that takes longer is
followed at once by the next (a pause after each would add the whole interval to how old gold is,
``bench/freshness.py``). ``bronze="spark"``: Spark's bronze streams instead, each with a
processing-time trigger and checkpointed, as in a build. ``stop`` (called from a SIGTERM/SIGINT
handler) ends the loop after the current refresh; streams are then stopped, which waits for their
running micro-batch, so no batch is left half-committed beyond what the checkpoints already make
safe to rerun; the Kafka ingest commits whole pulls only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ingest.bronze import start_bronze_ingest, state_clusters
from ingest.kafka_bronze import KafkaBronzeIngest
from ingest.paths import LakehousePaths
from ingest.spark import reach_from_spark
from lakehouse.build import BuildReport, SilverEngine, check_bronze, refresh
from lakehouse.duck.silver_decode import DecodePool
from lakehouse.lease import writer_lease
from replicator.config import MirrorlakeConfig

__all__ = ["LakehouseService", "ServeSettings"]

_log = logging.getLogger(__name__)

BronzeEngine = Literal["kafka", "spark"]


@dataclass(frozen=True)
class ServeSettings:
    interval_seconds: float = 30.0  # from the start of one silver+gold refresh to the next
    trigger_seconds: float = 5.0  # the bronze streams' processing-time trigger
    silver: SilverEngine = "auto"  # spark: never the delta-rs increment (bench.freshness compares them)
    bronze: BronzeEngine = "kafka"  # spark: Spark's stream (``ingest.bronze``), as a build ingests
    decode_workers: int | None = None  # processes decoding a large silver increment (None: one per core, up to 4)


class LakehouseService:
    """Runs until ``stop()``; ``on_refresh`` sees every refresh's report (tests, logging), ``on_stage``
    the name of each stage of a refresh as it starts (``lakehouse.build.refresh``)."""

    def __init__(
        self,
        spark: SparkSession,
        config: MirrorlakeConfig,
        settings: ServeSettings,
        on_refresh: Callable[[BuildReport], None] | None = None,
        on_stage: Callable[[str], None] | None = None,
    ) -> None:
        self._spark = spark
        self._config = config
        self._settings = settings
        self._paths = LakehousePaths.of(config.lakehouse)
        reach_from_spark(spark, self._paths.root)
        self._stop = threading.Event()
        self._on_refresh = on_refresh
        self._on_stage = on_stage  # each refresh's stages as they start (bench.freshness times them)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        """Serve until stopped, holding the lakehouse's writer lease; returns the number of refreshes done."""
        with writer_lease(self._paths.root, "lakehouse serve") as still_held:
            return self._serve(still_held)

    def _serve(self, still_held: Callable[[], None]) -> int:
        queries: list[StreamingQuery] = []
        ingest: KafkaBronzeIngest | None = None
        decoder = DecodePool(self._settings.decode_workers)
        refreshes = 0
        try:
            if self._settings.bronze == "spark":
                queries = start_bronze_ingest(
                    self._spark,
                    self._config,
                    self._paths,
                    available_now=False,
                    trigger_seconds=self._settings.trigger_seconds,
                )
            else:
                ingest = KafkaBronzeIngest(self._config, self._paths, state_clusters(self._config))
            while not self._stop.is_set():
                started = time.monotonic()
                for query in queries:
                    check_bronze(query)
                still_held()
                if ingest is not None:
                    if self._on_stage is not None:
                        self._on_stage("bronze: read the state topics")
                    rows = ingest.pull()
                    _log.debug("bronze: %d state-topic records ingested", rows)
                report = refresh(
                    self._spark,
                    self._config,
                    self._paths,
                    on_stage=self._on_stage,
                    silver=self._settings.silver,
                    decoder=decoder,
                )
                refreshes += 1
                _log.info("refresh %d: %d bronze rows, gold %s", refreshes, report.bronze_rows, report.gold_rows)
                if self._on_refresh is not None:
                    self._on_refresh(report)
                self._stop.wait(max(0.0, started + self._settings.interval_seconds - time.monotonic()))
        finally:
            for query in queries:
                query.stop()
            if ingest is not None:
                ingest.close()
            decoder.close()
            _log.info("lakehouse serve stopped after %d refreshes", refreshes)
        return refreshes
