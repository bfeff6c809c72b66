"""Lakehouse build time vs event count, incremental vs full gold, mapping rows per sync, SQL latency.

Not a test: prints numbers measured side by side in one run (same Spark session, same machine).

    .venv/bin/python -m bench.lakehouse_scale                          # 1e5, 1e6, 1e7 events
    .venv/bin/python -m bench.lakehouse_scale --sizes 100000,1000000   # what fits in a few minutes

Synthetic events (90% offset_sync, 5% checkpoint, 5% watermark over ``--partitions`` partitions of
one flow; each sync stands for 10 copied records, the delta changes every 50 syncs) are encoded
with the replicator's codec inside Spark tasks (``mapInArrow``) and appended directly as bronze
rows (the Kafka ingest is exercised by the tests; here it would only measure the local broker).
For each size, on a fresh lakehouse: the build time of silver + gold (decode, MERGE by event id,
every gold table in full). On the largest size, ``--incremental`` more events are appended,
decoded into silver by delta-rs (``lakehouse.duck.silver``, as a serve refresh does) and gold is
updated incrementally (MERGE of the touched keys); as many more are then decoded by Spark's silver
(side by side with delta-rs's), and gold is recomputed in full; the times side by side.
Finally: offset_mapping rows per offset_sync received, and DuckDB's latency to translate one
group over all partitions (``translate_group``).
The last line is ``events_per_second_1e7=<value>`` (``not_run`` when 1e7 was not among the sizes).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.measure import load_average
from ingest.kafka_bronze import BRONZE_SCHEMA as _BRONZE

_log = logging.getLogger("bench.lakehouse_scale")
T0 = 1_700_000_000_000
STATE_TOPIC = "mirrorlake.events"


def _event(i: int, partitions: int, base: int, touched: int):  # -> replicator.events.Event
    """Event ``i``: the first ``base`` spread over ``partitions``, later ones over the first ``touched``."""
    from replicator.events import Checkpoint, OffsetSync, SyncReason, Watermark

    if i < base:
        p, seq = i % partitions, i // partitions
    else:
        p, seq = (i - base) % touched, base // partitions + (i - base) // touched
    u = seq * 10
    d = u + seq // 50  # the delta grows by one every 50 syncs (a foreign record on the target)
    common: dict[str, Any] = {
        "flow": "A->B",
        "replicator_id": "bench",
        "event_id": f"bench-{i}",
        "emitted_at_ms": T0 + seq * 10,
    }
    kind = seq % 20
    if kind == 0:
        return Watermark(
            **common,
            cluster="A",
            side="source",
            topic="orders",
            source_topic="orders",
            partition=p,
            log_start_offset=0,
            log_end_offset=u + 15,
            observed_at_ms=T0 + seq * 10,
            max_timestamp_ms=T0 + u + 14,
        )
    if kind == 1:
        return Checkpoint(
            **common,
            source_cluster="A",
            target_cluster="B",
            group=f"g{seq % 3}",
            source_topic="orders",
            target_topic="A.orders",
            partition=p,
            upstream_offset=u - 5,
            downstream_offset=d - 5,
            method="exact",
        )
    return OffsetSync(
        **common,
        source_cluster="A",
        target_cluster="B",
        source_topic="orders",
        target_topic="A.orders",
        partition=p,
        upstream_offset=u,
        downstream_offset=d,
        upstream_timestamp_ms=T0 + u,
        reason=SyncReason.LAG_MAX,
        previous_upstream_offset=u - 1 if seq else None,
        previous_downstream_offset=d - 1 if seq else None,
    )


def _encode_batches(partitions: int, base: int, touched: int):
    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from replicator.events import encode as encode_event

        now = int(time.time() * 1_000_000)
        for batch in batches:
            ids = batch.column("id").to_pylist()
            values = [encode_event(_event(i, partitions, base, touched)) for i in ids]
            n = len(ids)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(["B"] * n),
                    pa.array([STATE_TOPIC] * n),
                    pa.array([0] * n, pa.int32()),
                    pa.array(ids, pa.int64()),
                    pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                    pa.array([b"A->B"] * n, pa.binary()),
                    pa.array(values, pa.binary()),
                    pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                ],
                schema=_BRONZE,
            )

    return encode


def append_bronze(spark, paths, start: int, count: int, partitions: int, touched: int) -> float:  # noqa: ANN001
    """Append events ``start .. start+count-1`` to bronze; returns the seconds it took.

    Events from ``start`` on (when ``start`` > 0) fall on the first ``touched`` partitions only.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    began = time.monotonic()
    ids = spark.range(start, start + count, numPartitions=max(2, count // 250_000))
    rows = ids.mapInArrow(_encode_batches(partitions, start or count, touched), from_arrow_schema(_BRONZE))
    rows.write.format("delta").mode("append").save(str(paths.bronze))
    return time.monotonic() - began


def _tables(updates: list[Any]) -> str:
    """Each gold table's own wall time and what the build did to it (they overlap in time)."""
    return ", ".join(f"{u.table} {u.seconds:.1f} s {u.mode}{' on duckdb' * (u.engine == 'duckdb')}" for u in updates)


def lakehouse_config(root: Path):  # noqa: ANN201 (replicator.config is imported late: Spark first)
    """A config whose lakehouse is at ``root`` (its one cluster is never contacted: bronze is written here)."""
    from replicator.config import parse_config

    return parse_config(
        {"clusters": {"B": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"path": str(root)}}, source="bench"
    )


def critical_path(seconds: Mapping[str, float], depends_on: Mapping[str, Sequence[str]]) -> tuple[list[str], float]:
    """The chain of gold tables, each read by the next, whose own times add up to the most.

    A table starts only after the tables it reads, so however many run at once a build takes at
    least this long: it is where shortening a table shortens the build."""
    best: dict[str, tuple[float, list[str]]] = {}

    def longest(name: str) -> tuple[float, list[str]]:
        if name not in best:
            before = max((longest(d) for d in depends_on.get(name, ())), default=(0.0, []))
            best[name] = (before[0] + seconds.get(name, 0.0), [*before[1], name])
        return best[name]

    total, chain = max((longest(name) for name in seconds), default=(0.0, []))
    return chain, total


def _chain(updates: list[Any]) -> str:
    from lakehouse.gold_tables import GOLD_TABLES

    seconds = {u.table: u.seconds for u in updates}
    chain, total = critical_path(seconds, {t.name: t.depends_on for t in GOLD_TABLES})
    return " -> ".join(f"{name} {seconds[name]:.1f} s" for name in chain) + f" = {total:.1f} s"


class StageClock:
    """An ``on_stage`` hook that records how long each stage of a build took."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._current: tuple[str, float] | None = None

    def stage(self, name: str) -> None:
        # gold tables run side by side (lakehouse.gold_schedule): one stage for all of them
        key = "gold" if name.startswith("gold ") else name.split(":")[0]
        if self._current is not None and self._current[0] == key:
            return
        now = time.monotonic()
        if self._current is not None:
            self.seconds[self._current[0]] = now - self._current[1]
        self._current = (key, now) if name else None

    def __str__(self) -> str:
        return ", ".join(f"{name} {took:.1f} s" for name, took in self.seconds.items())


def _sql_latency(root: Path, runs: int = 7) -> float:
    from lakehouse.sql import LakehouseSQL

    sql = LakehouseSQL(root)
    try:
        times = []
        for _ in range(runs):
            began = time.monotonic()
            rows = sql.query("SELECT * FROM translate_group('A->B', 'g0')").rows
            times.append(time.monotonic() - began)
        _log.info("translate_group returned %d partitions", len(rows))
        return statistics.median(times)
    finally:
        sql.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000", help="event counts, comma separated")
    parser.add_argument("--incremental", type=int, default=100_000, help="new events for incremental vs full")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--touched-partitions", type=int, default=10, help="partitions the incremental events fall on")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--driver-memory", default=None, help="Spark driver heap (local mode: all of Spark's); default: mirrorlake's"
    )
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from ingest.paths import LakehousePaths
    from ingest.spark import LOCAL_TUNING, spark_session
    from lakehouse.build import refresh
    from lakehouse.duck.silver import update_silver_increment
    from lakehouse.duck.silver_decode import DecodePool
    from lakehouse.incremental import update_gold
    from lakehouse.silver import update_silver
    from replicator.config import SparkConfig

    sizes = [int(float(s)) for s in args.sizes.split(",")]
    args.driver_memory = args.driver_memory or LOCAL_TUNING["spark.driver.memory"]
    conf = {"spark.driver.memory": args.driver_memory}
    spark = spark_session(SparkConfig(master=args.master, conf=conf), app_name="bench-lakehouse")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="lakehouse-scale-"))
    print(
        f"# lakehouse_scale: sizes {sizes}, {args.partitions} partitions, master {args.master}, "
        f"driver memory {args.driver_memory}, work dir {work}, load average {load_average()}"
    )
    per_second: dict[int, float] = {}
    last = None
    for n in sizes:
        root = work / f"lake-{n}"
        config = lakehouse_config(root)
        paths = LakehousePaths(root.resolve())
        gen = append_bronze(spark, paths, 0, n, args.partitions, args.partitions)
        stages = StageClock()
        began = time.monotonic()
        report = refresh(spark, config, paths, on_stage=stages.stage)
        took = time.monotonic() - began
        stages.stage("")
        per_second[n] = n / took
        print(
            f"build n={n:>10}  bronze write {gen:7.1f} s  silver+gold {took:7.1f} s  "
            f"{per_second[n]:>9.0f} events/s  syncs {report.offset_syncs}  mapping rows {report.mapping_segments}"
        )
        print(f"  stages: {stages}")
        print(f"  gold tables (side by side, each its own time): {_tables(report.gold_updates)}")
        last = (n, config, paths, report)
    assert last is not None
    n, config, paths, report = last
    print(f"mapping_rows_per_sync={report.mapping_segments / max(1, report.offset_syncs):.4f}")
    # two increments of the same size: the first decoded by delta-rs (serve's way: in its decoding
    # processes, started with the service, so before the rows arrive), the second by Spark
    decoder = DecodePool()
    append_bronze(spark, paths, n, args.incremental, args.partitions, args.touched_partitions)
    began = time.monotonic()
    increment = update_silver_increment(paths, decoder=decoder)
    silver_rs = time.monotonic() - began
    decoder.close()
    assert increment is not None, "silver's increment fell back to Spark (see the log)"
    began = time.monotonic()
    inc_updates = update_gold(spark, paths, config=config)
    incremental = time.monotonic() - began
    append_bronze(spark, paths, n + args.incremental, args.incremental, args.partitions, args.touched_partitions)
    began = time.monotonic()
    update_silver(spark, paths)
    silver = time.monotonic() - began
    print(
        f"+{args.incremental} events on {n}: silver on delta-rs {silver_rs:.1f} s, the next +{args.incremental} "
        f"on Spark {silver:.1f} s: spark/delta-rs={silver / silver_rs:.2f}; silver on delta-rs + gold incremental "
        f"{silver_rs + incremental:.1f} s"
    )
    update_gold(spark, paths, config=config)  # the second increment's gold, before the full rebuild
    began = time.monotonic()
    full_updates = update_gold(spark, paths, config=config, full=True)
    full = time.monotonic() - began
    print(
        f"+{args.incremental} events on {n} ({args.touched_partitions} of {args.partitions} partitions): "
        f"gold incremental (touched keys only) "
        f"{incremental:.1f} s vs gold full rebuild {full:.1f} s: full/incremental={full / incremental:.2f}"
    )
    print(f"  incremental gold tables: {_tables(inc_updates)}")
    print(f"  incremental critical path (tables each reading the one before): {_chain(inc_updates)}")
    print(f"  full gold tables: {_tables(full_updates)}")
    latency = _sql_latency(paths.root)
    print(f"duckdb translate_group over {args.partitions} partitions: {latency * 1000:.1f} ms (median of 7)")
    for size, rate in per_second.items():
        print(f"events_per_second_{size:.0e}={rate:.0f}".replace("e+0", "e"))
    print(f"# load average at the end {load_average()}")
    value = f"{per_second[10_000_000]:.0f}" if 10_000_000 in per_second else "not_run"
    print(f"events_per_second_1e7={value}")
    spark.stop()


if __name__ == "__main__":
    main()
