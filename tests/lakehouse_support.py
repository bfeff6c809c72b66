"""Helpers for the lakehouse tests: hand-made state events on a real state topic, table comparison.

The events are built with the replicator's own dataclasses and codec, so the lakehouse reads
exactly what a replicator would publish; rounds of them exercise gaps, at-least-once replays,
duplicate events, late (out-of-order) events and changes that must delete gold rows.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from replicator.client.mapping import Segment
from replicator.config import MirrorlakeConfig
from replicator.events import (
    AuditWindow,
    Checkpoint,
    ConfigSnapshot,
    ConsumerRelease,
    Cutover,
    Event,
    Failback,
    FailbackRange,
    Failover,
    FailoverOffset,
    Heartbeat,
    MetadataChange,
    OffsetSync,
    RecordsLostBeforeCopy,
    TopicRecreated,
    Watermark,
    encode,
)

# The tests' Spark settings: their tables hold tens of rows, and on 2 cores a build was bound by
# the JVM compiling code rather than running it (JIT compiler threads used about 40% of the
# driver's CPU). Interpreted expressions instead of generated classes made the four builds of
# ``built`` 25% faster (214 s -> 160 s). Builds of real sizes keep Spark's default (codegen).
# The serial collector instead of G1 (no concurrent GC threads on 2 busy cores) cut the driver's
# CPU in the same builds by about 10% (bench/results/test_suite_cpu-2026-11-26.txt).
SMALL_DATA_SPARK_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
}

FLOW = "A->B"
TOPIC = "orders"
REMOTE = "A.orders"
T0 = 1_700_000_000_000


def engine_config(engine: str) -> MirrorlakeConfig:
    """A config that only names the engine of incremental gold builds (``lakehouse.incremental_engine``)."""
    return MirrorlakeConfig.model_validate(
        {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"incremental_engine": engine}}
    )


def write_config(
    path: Path,
    bootstraps: Mapping[str, str],
    state_topic: str,
    root: Path | Mapping[str, Any],
    spark: Mapping[str, Any] | None = None,
) -> Path:
    """A YAML config at ``path`` for a ``mirrorlake lakehouse`` process: the flow A->B of ``orders``,
    ``state_topic`` on B, the lakehouse at ``root`` (a directory, or a whole ``lakehouse`` block),
    Spark local[2] unless ``spark`` says otherwise (with ``SMALL_DATA_SPARK_CONF`` either way)."""
    section = dict(spark or {"master": "local[2]"})
    section["conf"] = {**SMALL_DATA_SPARK_CONF, **section.get("conf", {})}
    config = {
        "clusters": {alias: {"bootstrap_servers": bootstraps[alias]} for alias in ("A", "B")},
        "flows": [{"source": "A", "target": "B", "topics": [TOPIC]}],
        "state_topic": state_topic,
        "lakehouse": dict(root) if isinstance(root, Mapping) else {"path": str(root)},
        "spark": section,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def produce(bootstrap: str, state_topic: str, events: Iterable[Event]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for event in events:
        producer.produce(state_topic, key=FLOW.encode(), value=encode(event))
    producer.flush(30)


def append_bronze(spark, bronze: str, start: int, bodies: Sequence[bytes]) -> None:  # noqa: ANN001 - SparkSession
    """Append ``bodies`` to the bronze table at ``bronze`` as state-topic records B/mirrorlake.events/0
    at offsets ``start``, ``start + 1``, ... (no Kafka: silver's input written directly)."""
    from datetime import UTC, datetime

    from pyspark.sql import types as T

    now = datetime.now(UTC)
    schema = T.StructType(
        [
            T.StructField("cluster", T.StringType()),
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            T.StructField("kafka_timestamp", T.TimestampType()),
            T.StructField("key", T.BinaryType()),
            T.StructField("value", T.BinaryType()),
            T.StructField("ingested_at", T.TimestampType()),
        ]
    )
    rows = [("B", "mirrorlake.events", 0, start + i, now, b"k", body, now) for i, body in enumerate(bodies)]
    spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(bronze)


class EngineLakehouses:
    """Two lakehouses sharing one silver (the DuckDB one's): gold built incrementally by the DuckDB
    twins in one and by Spark in the other, from the same rounds of state events."""

    ENGINES = ("duckdb", "spark")

    def __init__(self, root: Path) -> None:
        from ingest.paths import LakehousePaths

        self.paths = {engine: LakehousePaths(root / engine) for engine in self.ENGINES}
        (self.paths["spark"].root / "tables").mkdir(parents=True)
        (self.paths["spark"].root / "tables" / "silver").symlink_to(self.paths["duckdb"].root / "tables" / "silver")
        self._offset = 0
        self._new = True  # no gold table yet in either lakehouse
        self._held_equal: dict[str, tuple] = {}  # per gold table, the versions last held equal to a full compute

    def round(self, spark, bodies: Sequence[bytes]) -> dict[str, list]:  # noqa: ANN001 - SparkSession
        """Append ``bodies`` to bronze, update silver, then gold on each engine; each engine's updates.

        Silver as ``lakehouse build`` makes it by default: delta-rs appends an increment, Spark
        decodes where it declines (a catch-up too large to hold, a schema to evolve). That the two silvers
        are equal is ``test_silver_engines``'s; a Spark streaming run per round was a quarter of
        the twins' time.

        The first round builds every table of a new lakehouse in full on Spark whatever the engine
        (the engine only decides who does an incremental build; ``GoldUpdate`` says so and it is
        asserted here): over the one silver both lakehouses read, the two would write the same
        tables and build states. So it is built once, in the Spark lakehouse, and its gold tables
        and build states are copied to the DuckDB one (Delta tables name their files relative to
        the table): only ``spark``'s updates are returned for that round."""
        from lakehouse.duck.silver import update_silver_increment
        from lakehouse.incremental import update_gold
        from lakehouse.silver import update_silver

        if bodies:
            append_bronze(spark, str(self.paths["duckdb"].bronze), self._offset, bodies)
            self._offset += len(bodies)
        if update_silver_increment(self.paths["duckdb"]) is None:
            update_silver(spark, self.paths["duckdb"])
        if self._new:
            self._new = False
            updates = update_gold(spark, self.paths["spark"], config=engine_config("spark"))
            assert {(u.mode, u.engine) for u in updates} == {("full", "spark")}, updates
            self._copy_gold("spark", "duckdb")
            return {"spark": updates}
        return {e: update_gold(spark, self.paths[e], config=engine_config(e)) for e in self.ENGINES}

    def _copy_gold(self, source: str, target: str) -> None:
        import shutil

        for part in (("tables", "gold"), ("checkpoints", "gold")):
            shutil.copytree(self.paths[source].root.joinpath(*part), self.paths[target].root.joinpath(*part))

    def assert_equal_to_full_builds(self, spark, what: str) -> None:  # noqa: ANN001 - SparkSession
        """Every gold table of both lakehouses equals Spark's full compute over the shared silver.

        A Delta version never changes once written, and the full compute is a function of the
        silver versions of the table's sources and of the gold tables it reads (the DuckDB
        lakehouse's): a table whose inputs and whose two built tables are all at the versions last
        held equal here is equal still, and is not computed and read again (a round that touches
        none of its sources leaves it so)."""
        from lakehouse.gold import GoldInputs
        from lakehouse.gold_tables import GOLD_TABLES
        from lakehouse.incremental import silver_versions

        silver = self.paths["duckdb"]
        versions = silver_versions(spark, silver)
        for table in GOLD_TABLES:
            held = (
                tuple(versions[t] for t in table.spec.sources),
                tuple(delta_version(silver.gold(name)) for name in table.spec.depends_on),
                tuple(delta_version(self.paths[engine].gold(table.name)) for engine in self.ENGINES),
            )
            if self._held_equal.get(table.name) == held:
                continue
            full = table.compute(GoldInputs(spark, silver, versions, None, None))
            columns = full.columns
            expected = _row_counts(full, columns)  # collected once, for both engines
            for engine in self.ENGINES:
                built = spark.read.format("delta").load(str(self.paths[engine].gold(table.name)))
                said = f"{engine} incremental against Spark full, {what}: {table.name}"
                assert sorted(built.columns) == sorted(columns), f"{said}: columns {built.columns} against {columns}"
                _assert_same_counts(_row_counts(built, columns), expected, said)
            self._held_equal[table.name] = held


def delta_version(table: Path) -> int | None:
    """A local Delta table's latest version: its newest commit file (None: no commit yet)."""
    return max((int(f.stem) for f in (table / "_delta_log").glob("*.json")), default=None)


def sync(p: int, u: int, d: int, t: int, reason: str, prev: tuple[int, int] | None = None) -> OffsetSync:
    return OffsetSync(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        source_cluster="A",
        target_cluster="B",
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        upstream_offset=u,
        downstream_offset=d,
        upstream_timestamp_ms=T0 + u,
        reason=reason,
        previous_upstream_offset=prev[0] if prev else None,
        previous_downstream_offset=prev[1] if prev else None,
    )


def checkpoint(group: str, p: int, c: int, d: int, t: int, method: str) -> Checkpoint:
    return Checkpoint(
        flow=FLOW,
        replicator_id="r1" if method != "mm2" else "mm2-import",
        emitted_at_ms=T0 + t,
        source_cluster="A",
        target_cluster="B",
        group=group,
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        upstream_offset=c,
        downstream_offset=d,
        method=method,
    )


def watermark(p: int, start: int, end: int, t: int, side: str = "source") -> Watermark:
    return Watermark(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        cluster="A" if side == "source" else "B",
        side=side,
        topic=TOPIC if side == "source" else REMOTE,
        source_topic=TOPIC,
        partition=p,
        log_start_offset=start,
        log_end_offset=end,
        observed_at_ms=T0 + t,
        max_timestamp_ms=T0 + end - 1 if end > start else None,
    )


def snapshot(side: str, t: int, partitions: int, configs: dict[str, str], acls: Sequence[str]) -> ConfigSnapshot:
    return ConfigSnapshot(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        cluster="A" if side == "source" else "B",
        side=side,
        topic=TOPIC if side == "source" else REMOTE,
        source_topic=TOPIC,
        exists=True,
        partitions=partitions,
        configs=configs,
        config_sources={k: "DYNAMIC_TOPIC_CONFIG" for k in configs},
        acls=tuple(sorted(acls)),
        digest=f"d{t}",
        reason="changed",
    )


def audit(side: str, p: int, start: int, end: int, count: int, checksum: int, t: int) -> AuditWindow:
    return AuditWindow(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        side=side,
        cluster="A" if side == "source" else "B",
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        window_start=start,
        window_end=end,
        record_count=count,
        checksum=checksum,
    )


def heartbeat(path: Sequence[str], origin_t: int, received_t: int | None) -> Heartbeat:
    return Heartbeat(
        flow=f"{path[-2]}->{path[-1]}" if len(path) > 1 else FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + (received_t or origin_t),
        origin_cluster=path[0],
        hop_path=tuple(path),
        origin_timestamp_ms=T0 + origin_t,
        received_at_ms=None if received_t is None else T0 + received_t,
        topic="heartbeats",
    )


def failover(t: int, group: str, offsets: Sequence[tuple[int, int, int]]) -> Failover:
    """A failover event moving ``group``: (partition, committed, target offset) per partition."""
    return Failover(
        flow=FLOW,
        replicator_id="failover@h",
        emitted_at_ms=T0 + t,
        source_cluster="A",
        target_cluster="B",
        mode="unplanned",
        groups=(group,),
        offsets=tuple(FailoverOffset(group, TOPIC, REMOTE, p, c, d, 0, 0, 5) for p, c, d in offsets),
        records_lost=0,
        records_reread=0,
        records_unreplicated=5,
        host="h",
        user="u",
    )


def random_segments(rng: random.Random, most: int) -> list[Segment]:
    """Up to ``most`` random mapping segments: overlapping replays, gaps, negative and positive deltas."""
    out = []
    for _ in range(rng.randint(0, most)):
        us = rng.randint(0, 200)
        ue = us + rng.randint(0, 60)
        ds = max(0, us + rng.randint(-30, 30))
        out.append(Segment(ds, us, ue, ds + (ue - us)))
    return out


def assert_same_rows(left, right, what: str) -> None:  # noqa: ANN001 - pyspark DataFrames
    """Equal as multisets of rows (column order by name), with a readable difference otherwise.

    Both sides are collected once and compared in Python: the tests' tables hold at most a few
    thousand rows, and two ``exceptAll`` queries and two counts cost twice the Spark jobs."""
    columns = left.columns
    assert sorted(columns) == sorted(right.columns), f"{what}: columns {columns} against {right.columns}"
    _assert_same_counts(_row_counts(left, columns), _row_counts(right, columns), what)


def _row_counts(df, columns: Sequence[str]) -> Counter:  # noqa: ANN001 - a pyspark DataFrame
    """``df``'s rows, ``columns`` in that order, as a multiset (one collect)."""
    return Counter(_hashable(r) for r in df.select(*columns).collect())


def _assert_same_counts(left_rows: Counter, right_rows: Counter, what: str) -> None:
    only_left = sorted((left_rows - right_rows).elements(), key=repr)
    only_right = sorted((right_rows - left_rows).elements(), key=repr)
    assert not only_left and not only_right, f"{what}: only incremental {only_left[:5]}, only full {only_right[:5]}"


def _hashable(value: Any) -> Any:
    """A row (or a value in it) as nested tuples, so that equal rows are equal keys of a Counter."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):  # a Row is a tuple
        return tuple(_hashable(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # Spark's grouping takes NaN as equal to itself; Python does not
    return value


ALICE = "User:alice|*|READ|ALLOW|LITERAL|{}"
BOB_WRITE = "User:bob|*|WRITE|ALLOW|LITERAL|{}"
CAROL_ALL = "User:carol|*|ALL|ALLOW|LITERAL|{}"
DAVE = "User:dave|*|READ|ALLOW|LITERAL|{}"


def rounds() -> list[list]:
    r1 = [
        sync(0, 0, 0, 100, "first"),
        sync(0, 99, 99, 200, "lag_max", (98, 98)),
        sync(0, 102, 100, 300, "upstream_gap", (99, 99)),
        sync(0, 150, 148, 400, "flush", (149, 147)),
        sync(1, 0, 0, 100, "first"),
        sync(1, 49, 49, 400, "flush", (48, 48)),
        checkpoint("g1", 0, 101, 100, 450, "after_last_copy"),
        checkpoint("g2", 0, 120, 99, 450, "mm2"),
        watermark(0, 0, 200, 500),
        watermark(1, 0, 60, 500),
        watermark(0, 0, 149, 500, side="target"),
    ]
    r2 = [
        sync(0, 140, 149, 600, "first"),  # a restart replays 140..150 at larger downstream offsets
        sync(0, 180, 189, 700, "flush", (179, 188)),
        sync(1, 80, 80, 700, "flush", (79, 79)),
        *r1[4:6],  # the same events again (at-least-once in the state topic)
        checkpoint("g1", 0, 170, 179, 750, "exact"),
        watermark(0, 0, 200, 800),
        watermark(1, 0, 100, 800),
        snapshot(
            "source",
            800,
            2,
            {"retention.ms": "100", "min.insync.replicas": "1", "cleanup.policy": "delete"},
            [a.format(TOPIC) for a in (ALICE, BOB_WRITE, CAROL_ALL)],
        ),
        snapshot(
            "target",
            800,
            3,
            {"retention.ms": "200", "min.insync.replicas": "2", "cleanup.policy": "delete"},
            [a.format(REMOTE) for a in (ALICE, DAVE)],
        ),
        heartbeat(["A"], 1000, None),
        heartbeat(["A", "B"], 1000, 1030),
        heartbeat(["A", "B", "C"], 1000, 1075),
        failover(850, "g1", [(0, 170, 179)]),
    ]
    r3 = [
        sync(1, 90, 90, 750, "flush", (89, 89)),  # late: emitted before round 2's watermark
        snapshot(
            "target",
            900,
            2,  # partitions fixed: the partition_count row must go
            {"retention.ms": "200", "min.insync.replicas": "2", "cleanup.policy": "delete"},
            [a.format(REMOTE) for a in (ALICE, DAVE)],
        ),
        audit("source", 0, 0, 100, 98, 5, 900),
        audit("target", 0, 0, 100, 98, 5, 910),
        audit("source", 0, 100, 200, 98, 7, 900),
        audit("target", 0, 100, 200, 97, 6, 910),
        watermark(1, 95, 120, 950),  # retention deleted 91..94 before they were copied
        RecordsLostBeforeCopy(
            flow=FLOW,
            replicator_id="r1",
            emitted_at_ms=T0 + 950,
            source_cluster="A",
            target_cluster="B",
            source_topic=TOPIC,
            partition=1,
            from_offset=91,
            to_offset=95,
            records=4,
            noticed="running",
        ),
        # another topic of the flow, deleted and created again (no copies: the mapping of orders is untouched)
        TopicRecreated(
            flow=FLOW,
            replicator_id="r1",
            emitted_at_ms=T0 + 960,
            source_cluster="A",
            target_cluster="B",
            side="source",
            topic="payments",
            source_topic="payments",
            previous_topic_id="old-id",
            topic_id="new-id",
            partitions=2,
            log_start_offsets=(0, 0),
            log_end_offsets=(7, 9),
            policy="continue",
            noticed="running",
        ),
        MetadataChange(
            flow=FLOW,
            replicator_id="r1",
            emitted_at_ms=T0 + 970,
            source_cluster="A",
            target_cluster="B",
            kind="acl",
            action="created",
            topic=REMOTE,
            source_topic=TOPIC,
            acl="LITERAL|User:alice|*|READ|ALLOW",
            source_acl="LITERAL|User:alice|*|ALL|ALLOW",
        ),
        heartbeat(["A", "B"], 2000, 2040),
        heartbeat(["A", "C"], 2000, 2020),
        heartbeat(["A", "B", "C"], 2000, 2090),
        failover(2100, "g2", [(0, 120, 99), (1, 80, 80)]),
        Failback(
            flow=FLOW,
            replicator_id="failback@h",
            emitted_at_ms=T0 + 2200,
            source_cluster="A",
            target_cluster="B",
            action="recover",
            ranges=(FailbackRange(TOPIC, REMOTE, 1, 90, 95, 4, 40, 120, 124),),
            records=4,
            host="h",
            user="u",
        ),
        ConsumerRelease(
            flow=FLOW,
            replicator_id="failback@h",
            emitted_at_ms=T0 + 2190,
            source_cluster="A",
            target_cluster="B",
            cluster="B",
            groups=("g2",),
            reason="failback",
            host="h",
            user="u",
        ),
        Cutover(
            flow=FLOW,
            replicator_id="failback@h",
            emitted_at_ms=T0 + 2195,
            source_cluster="A",
            target_cluster="B",
            step="unfenced",
            topics=(TOPIC,),
            acls=(f"TOPIC|LITERAL|{TOPIC}|User:*|*|WRITE|DENY",),
            host="h",
            user="u",
        ),
    ]
    return [r1, r2, r3, r3[:4]]  # round 4: only events seen before


@dataclass
class Built:
    config: MirrorlakeConfig
    fresh: MirrorlakeConfig
    rounds: list[list] = field(default_factory=list)  # the events as produced, round by round
    modes: list[dict[str, str]] = field(default_factory=list)
    reasons: list[dict[str, str]] = field(default_factory=list)  # why a table was rebuilt in full
    engines: list[dict[str, str]] = field(default_factory=list)  # spark, or duckdb (a twin)

    @property
    def events(self) -> list:
        """Every event produced, in order (the fourth round repeats event ids of the third)."""
        return [e for r in self.rounds for e in r]


@pytest.fixture(scope="session")
def built(kafka_clusters, unique_topic, tmp_path_factory, spark) -> Built:
    from lakehouse.build import build_lakehouse
    from mirrorlake.traffic import ensure_topic

    state_topic = unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    ensure_topic(b, state_topic, 2)

    def config(name: str) -> MirrorlakeConfig:
        return kafka_clusters.config(
            flows=[{"source": "A", "target": "B", "topics": ["orders"]}],
            state_topic=state_topic,
            lakehouse={"path": str(tmp_path_factory.mktemp(name))},
        )

    # Round 1 is a full build. Round 2's incremental tables are held to Spark's full compute by
    # test_lakehouse_twins, on the same events and both engines (DuckDB, this config's, among them);
    # round 3's result, unchanged by round 4 (events seen before), to a clean build of every round
    # by test_lakehouse_incremental (``built_fresh``).
    result = Built(config("incremental"), config("fresh"))
    for events in rounds():
        produce(b, state_topic, events)
        result.rounds.append(events)
        report = build_lakehouse(spark, result.config)
        result.modes.append({u.table: u.mode for u in report.gold_updates})
        result.reasons.append({u.table: u.reason for u in report.gold_updates})
        result.engines.append({u.table: u.engine for u in report.gold_updates})
    return result


@pytest.fixture(scope="session")
def built_fresh(built: Built, spark) -> MirrorlakeConfig:  # noqa: ANN001 - SparkSession
    """A second lakehouse built in one go from ``built``'s state topic (every round at once).

    Its gold tables are what a clean build of those events gives: the reference for the
    incremental builds of ``built`` and for a build that was killed and rerun."""
    from lakehouse.build import build_lakehouse

    build_lakehouse(spark, built.fresh)
    return built.fresh
