"""The thin path on real clusters and real Spark: A -> B replication, state events, lakehouse, SQL.

One module-scoped replication (10k records with keys, values, headers, timestamps over four
partitions, plus committed and aborted transactions that leave gaps) feeds every test here, and
one module-scoped lakehouse build of it every lakehouse test.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ingest.paths import LakehousePaths
from mirrorlake.groundtruth import (
    GroundTruth,
    Rec,
    copies_by_content,
    mapping_from_events,
    read_partition,
    state_events,
    syncs_for,
)
from mirrorlake.traffic import ensure_topic
from replicator.client.mapping import translate
from replicator.config import MirrorlakeConfig
from replicator.events import Checkpoint, OffsetSync, Watermark
from replicator.events.codec import encode
from replicator.flow.runtime import Replicator

PARTITIONS = 4
RECORDS = 10_000

pytestmark = pytest.mark.kafka


@dataclass
class Replicated:
    config: MirrorlakeConfig
    topic: str
    remote: str
    source: dict[int, list[Rec]]
    target: dict[int, list[Rec]]
    high: dict[int, int]


def _produce(bootstrap: str, topic: str, start: int, count: int, rng: random.Random) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        value = None if i % 997 == 0 else rng.randbytes(rng.randrange(0, 300))
        headers = [("seq", str(i).encode()), ("dup", b"1"), ("dup", b"2")] if i % 3 else [("empty", None)]
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k-{i}".encode(),
                    value=value,
                    headers=headers,
                    partition=rng.randrange(PARTITIONS),
                    timestamp=now - 60_000 + i,
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def _transactions(bootstrap: str, topic: str, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{tag}"})
    producer.init_transactions(30)
    for n in range(6):
        producer.begin_transaction()
        for i in range(7):
            producer.produce(topic, key=f"tx-{tag}-{n}-{i}".encode(), value=b"t", partition=(n + i) % PARTITIONS)
        producer.flush(30)  # an abort of records the broker never saw is refused under transaction.version 2
        (producer.commit_transaction if n % 3 != 1 else producer.abort_transaction)(30)


def _read_all(bootstrap: str, topic: str) -> dict[int, list[Rec]]:
    return {p: read_partition(bootstrap, topic, p) for p in range(PARTITIONS)}


@pytest.fixture(scope="module")
def replicated(kafka_clusters, unique_topic, tmp_path_factory) -> Replicated:
    topic = unique_topic("orders")
    a = kafka_clusters.bootstrap("A")
    ensure_topic(a, topic, PARTITIONS)
    rng = random.Random(7)
    _produce(a, topic, 0, RECORDS // 2, rng)
    _transactions(a, topic, topic[-8:] + "a")
    _produce(a, topic, RECORDS // 2, RECORDS // 2, rng)
    _transactions(a, topic, topic[-8:] + "b")
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "sync_interval_seconds": 0.2}],
        lakehouse={"path": str(tmp_path_factory.mktemp("lakehouse"))},
    )
    stats = Replicator(config).run_until_caught_up()
    source = _read_all(a, topic)
    assert stats["A->B"].records == sum(len(v) for v in source.values())
    target = _read_all(kafka_clusters.bootstrap("B"), f"A.{topic}")
    high = {p: (recs[-1].offset + 1 if recs else 0) for p, recs in source.items()}
    return Replicated(config, topic, f"A.{topic}", source, target, high)


def test_every_record_arrives_identical_in_the_same_partition_and_order(replicated: Replicated):
    total = 0
    for p in range(PARTITIONS):
        src, dst = replicated.source[p], replicated.target[p]
        assert len(dst) == len(src), p
        for s, d in zip(src, dst, strict=True):
            assert (d.key, d.value, d.headers, d.timestamp) == (s.key, s.value, s.headers, s.timestamp)
        total += len(src)
    assert total == RECORDS + 2 * 4 * 7  # plain records plus the committed transactions' records


def test_source_offsets_have_transaction_gaps(replicated: Replicated):
    gaps = sum(
        1
        for recs in replicated.source.values()
        for a, b in zip(recs, recs[1:], strict=False)
        if b.offset - a.offset > 1
    )
    assert gaps > 0  # otherwise the translation tests below would prove little


def test_offset_syncs_translate_every_source_offset_exactly(kafka_clusters, replicated: Replicated):
    syncs = syncs_for(state_events(kafka_clusters.bootstrap("B"), "mirrorlake.events"), replicated.topic)
    assert syncs, "no offset_sync events for the topic"
    for p in range(PARTITIONS):
        truth = GroundTruth(copies_by_content(replicated.source[p], replicated.target[p]))
        segments = mapping_from_events(syncs, p)
        for c in range(0, replicated.high[p] + 2):
            got = translate(segments, c)
            assert (got.downstream if got else None) == truth.translate(c), (p, c)
        # one row per change of delta, not per record
        assert len(segments) < len(replicated.source[p]) / 50


def test_syncs_are_a_superset_of_mm2s_rule(kafka_clusters, replicated: Replicated):
    syncs = syncs_for(state_events(kafka_clusters.bootstrap("B"), "mirrorlake.events"), replicated.topic)
    reasons = {s.reason for s in syncs}
    assert {"first", "lag_max", "delta_change"} <= reasons
    # MM2 emits at least every offset.lag.max (100) downstream records: so do we.
    for p in range(PARTITIONS):
        ds = sorted(s.downstream_offset for s in syncs if s.partition == p)
        assert all(b - a <= 100 for a, b in zip(ds, ds[1:], strict=False))


def test_a_second_run_copies_only_new_records_and_stays_exact(kafka_clusters, replicated: Replicated):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    _produce(a, replicated.topic, RECORDS, 500, random.Random(8))
    stats = Replicator(replicated.config).run_until_caught_up()
    assert stats["A->B"].records == 500
    source, target = _read_all(a, replicated.topic), _read_all(b, replicated.remote)
    syncs = syncs_for(state_events(b, "mirrorlake.events"), replicated.topic)
    for p in range(PARTITIONS):
        assert [r.key for r in target[p]] == [r.key for r in source[p]]
        truth = GroundTruth(copies_by_content(source[p], target[p]))
        segments = mapping_from_events(syncs, p)
        high = source[p][-1].offset + 1
        for c in range(max(0, high - 400), high + 1):
            got = translate(segments, c)
            assert (got.downstream if got else None) == truth.translate(c), (p, c)
    replicated.source, replicated.target = source, target
    replicated.high = {p: recs[-1].offset + 1 for p, recs in source.items()}


@pytest.fixture(scope="module")
def lakehouse_built(replicated: Replicated, spark):  # noqa: ANN201 - lakehouse.build.BuildReport
    """The lakehouse built once from the flow as the tests before left it (the second run's copies
    too); its report is what a rebuild with nothing new must give again."""
    from lakehouse.build import build_lakehouse

    return build_lakehouse(spark, replicated.config)


@pytest.mark.spark
def test_lakehouse_mapping_equals_the_reference_and_sql_translates_exactly(
    kafka_clusters, replicated: Replicated, lakehouse_built
):
    from lakehouse.sql import LakehouseSQL

    assert lakehouse_built.offset_syncs > 0
    syncs = syncs_for(state_events(kafka_clusters.bootstrap("B"), "mirrorlake.events"), replicated.topic)
    sql = LakehouseSQL(replicated.config.lakehouse.path)
    try:
        for p in range(PARTITIONS):
            reference = [
                (s.upstream_start, s.upstream_end, s.downstream_start, s.downstream_end)
                for s in mapping_from_events(syncs, p)
            ]
            rows = sql.query(
                "SELECT upstream_start, upstream_end, downstream_start, downstream_end FROM offset_mapping "
                "WHERE flow = 'A->B' AND source_topic = ? AND partition = ? ORDER BY downstream_start",
                [replicated.topic, p],
            ).rows
            assert [tuple(r) for r in rows] == reference
            truth = GroundTruth(copies_by_content(replicated.source[p], replicated.target[p]))
            offsets = list(range(0, replicated.high[p] + 2, 7)) + [replicated.high[p] - 1, replicated.high[p]]
            got = sql.query(
                "SELECT c, translate_offset('A->B', ?, ?, c) FROM unnest(?::BIGINT[]) AS t(c) ORDER BY c",
                [replicated.topic, p, offsets],
            ).rows
            assert {c: d for c, d in got} == {c: truth.translate(c) for c in offsets}
    finally:
        sql.close()


@pytest.mark.spark
def test_rebuild_is_idempotent_and_bad_records_are_quarantined(
    kafka_clusters, replicated: Replicated, spark, lakehouse_built
):
    from lakehouse.build import build_lakehouse

    first = lakehouse_built
    garbage = Producer({"bootstrap.servers": kafka_clusters.bootstrap("B")})
    garbage.produce("mirrorlake.events", key=b"junk", value=b"this is not an event")
    garbage.produce("mirrorlake.events", key=b"junk", value=b"\xc3\x01" + bytes(8) + b"unknown fingerprint")
    for forged in _forged_events():  # decode cleanly, name nothing real (issue 33, item 2)
        garbage.produce("mirrorlake.events", key=b"forged", value=encode(forged))
    assert garbage.flush(10) == 0
    second = build_lakehouse(spark, replicated.config)
    assert second.bronze_rows == first.bronze_rows + 5
    assert second.quarantined == first.quarantined + 5
    assert second.offset_syncs == first.offset_syncs
    assert second.mapping_segments == first.mapping_segments
    third = build_lakehouse(spark, replicated.config)
    assert third == second  # a rebuild with nothing new changes nothing
    reasons = {
        r["reason"]
        for r in spark.read.format("delta").load(str(LakehousePaths.of(replicated.config.lakehouse).quarantine))
        .where("reason LIKE 'invalid event: %'").collect()
    }  # fmt: skip
    assert reasons == {
        "invalid event: checkpoint.partition -1 is not a partition (0 to 2147483646)",
        "invalid event: offset_sync.target_topic is not a legal Kafka topic name",
        "invalid event: watermark.log_end_offset -7 is negative",
    }


def _forged_events() -> list:
    ends = {"flow": "A->B", "replicator_id": "forger", "source_cluster": "A", "target_cluster": "B"}
    return [
        Checkpoint(**ends, group="g", source_topic="t", target_topic="A.t", partition=-1, upstream_offset=1,
                   downstream_offset=1, method="exact"),
        OffsetSync(**ends, source_topic="t", target_topic="A.t; DROP", partition=0, upstream_offset=0,
                   downstream_offset=0, upstream_timestamp_ms=0, reason="first"),
        Watermark(flow="A->B", replicator_id="forger", cluster="A", side="source", topic="t", source_topic="t",
                  partition=0, log_start_offset=0, log_end_offset=-7, observed_at_ms=1),
    ]  # fmt: skip


@pytest.mark.spark
def test_dashboard_renders_the_flow_and_its_mapping(
    replicated: Replicated, lakehouse_built, tmp_path: Path, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    config_file = tmp_path / "conf.yaml"
    import yaml

    config_file.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    a: {"bootstrap_servers": c.bootstrap_servers} for a, c in replicated.config.clusters.items()
                },
                "lakehouse": {"path": str(replicated.config.lakehouse.path)},
            }
        )
    )
    monkeypatch.setenv("MIRRORLAKE_CONFIG", str(config_file))
    app = AppTest.from_file(os.path.join(os.path.dirname(__file__), "..", "dashboards", "app.py"), default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    assert [t.value for t in app.title] == ["Overview"]
    assert any(m.value.startswith("**A->B**") for m in app.markdown)
    lag = next(m for m in app.metric if m.label == "Lag (records)")
    assert lag.value  # a count, or — when no watermark was built yet
