"""A Spark Structured Streaming query fails over with its checkpoint (issue 37 item 2).

A real query (pyspark's Kafka source, the one ingest uses) reads a topic on the source X into a
parquet sink; X dies; ``mirrorlake failover spark-checkpoint`` rewrites the query's checkpoint to the
exact positions on B; the same query restarted against B's remote topic leaves the sink holding
every source record exactly once, by content. B's remote topic holds records of another producer
before the copies, so the positions differ on the two clusters and an untranslated checkpoint would
re-read or skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka import Producer

from mirrorlake.cli import cli
from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.config import parse_config
from replicator.errors import FailoverError
from replicator.failover.spark_checkpoint import rewrite_checkpoint
from replicator.flow.runtime import Replicator
from tests.killable_source import Source, source_cluster  # noqa: F401 (the fixture ``source``: cluster X)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
FLOW, PARTITIONS, PER_PARTITION, OTHERS = "X->B", 2, 100, 7


def _produce(bootstrap: str, topic: str, prefix: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(per_partition * PARTITIONS):
        producer.produce(topic, value=b"v", key=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _run_query(spark, bootstrap: str, topic: str, checkpoint: Path, sink: Path) -> None:
    """Everything available now, from the checkpoint's positions on (the earliest on a first run)."""
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "topic", "partition", "offset")
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def test_a_streaming_query_resumes_on_the_target_from_its_rewritten_checkpoint(
    source: Source, spark, kafka_clusters, unique_topic, tmp_path
):
    source.restart()
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic = unique_topic("spark-app")
    ensure_topic(x, topic, PARTITIONS)
    ensure_topic(b, f"X.{topic}", PARTITIONS)
    _produce(b, f"X.{topic}", "not-a-copy", OTHERS)  # shifts B's offsets: translation is not the identity
    data = {
        "clusters": {"X": {"bootstrap_servers": x}, "B": {"bootstrap_servers": b}},
        "flows": [{"source": "X", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False}],
        "state_topic": unique_topic("mirrorlake.spark-app"),
    }
    config = parse_config(data, source="test_spark_checkpoint_failover")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"

    _produce(x, topic, "first", PER_PARTITION)
    _run_query(spark, x, topic, checkpoint, sink)  # the application read the first records on X
    _produce(x, topic, "second", PER_PARTITION)
    Replicator(config, status_port=None).run_until_caught_up()
    wanted = sorted(r.key.decode() for p in range(PARTITIONS) for r in read_partition(x, topic, p))
    source.kill()

    run = CliRunner().invoke(
        cli, ["failover", "spark-checkpoint", "-c", str(path), "--flow", FLOW, "--checkpoint", str(checkpoint),
              "--format", "json"],
    )  # fmt: skip
    assert run.exit_code == 0, (run.output, run.exception)
    report = json.loads(run.output)
    assert [(r["partition"], r["committed_offset"], r["target_offset"], r["method"]) for r in report["positions"]] == [
        (p, PER_PARTITION, PER_PARTITION + OTHERS, "exact") for p in range(PARTITIONS)
    ]
    assert (checkpoint / "offsets" / f".{report['batch']}.before-failover").is_file()  # the original, kept

    _run_query(spark, b, f"X.{topic}", checkpoint, sink)  # the same query, now on B
    got = sorted(row.key for row in spark.read.parquet(str(sink)).select("key").collect())
    assert got == wanted  # every source record once: none of B's other records, none read twice


def test_a_checkpoint_without_a_committed_batch_rewritten_already_or_mid_batch_is_refused(kafka_clusters, tmp_path):
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": ["t"]}])
    empty = tmp_path / "empty"
    (empty / "offsets").mkdir(parents=True)
    with pytest.raises(FailoverError, match="no committed batch"):
        rewrite_checkpoint(config, "A->B", empty)
    busy = tmp_path / "busy"
    for kind, batches in (("offsets", (0, 1)), ("commits", (0,))):
        (busy / kind).mkdir(parents=True)
        for n in batches:
            (busy / kind / str(n)).write_text('v1\n{"batchWatermarkMs":0}\n{"t":{"0":5}}')
    with pytest.raises(FailoverError, match="batch 1 is not committed"):
        rewrite_checkpoint(config, "A->B", busy)
    (busy / "offsets" / ".0.before-failover").write_text("v1")
    with pytest.raises(FailoverError, match="rewritten already"):
        rewrite_checkpoint(config, "A->B", busy, force=True)
