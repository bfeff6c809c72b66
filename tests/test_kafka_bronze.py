"""Bronze from the state topics without Spark (``ingest.kafka_bronze``, ``lakehouse serve``'s default),
alternating with Spark's stream (``lakehouse build``): whichever engine runs, and in whatever order,
bronze holds each committed state-topic record exactly once (its coordinates and bytes equal the
topic's, read_committed from the cluster: aborted records never), and a record bronze never got
that retention deleted stops the Kafka ingest with an error naming the partition."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from ingest.kafka_bronze import IngestError, KafkaBronzeIngest
from ingest.paths import LakehousePaths
from lakehouse.build import run_bronze
from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, tag: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode(), partition=i % 3)
    producer.flush(30)


def _transaction(bootstrap: str, topic: str, tag: str, n: int, *, commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{tag}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=f"{tag}-{i}".encode(), value=b"tx", partition=i % 3)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def _bronze(paths: LakehousePaths) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    rows = DeltaTable(str(paths.bronze)).to_pyarrow_dataset().to_table()
    return sorted(
        zip(
            rows["cluster"].to_pylist(),
            rows["partition"].to_pylist(),
            rows["offset"].to_pylist(),
            rows["key"].to_pylist(),
            rows["value"].to_pylist(),
            strict=True,
        )
    )


def _truth(bootstrap: str, topic: str) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    return sorted(("B", p, r.offset, r.key, r.value) for p in range(3) for r in read_partition(bootstrap, topic, p))


def _lakehouse(kafka_clusters, tmp_path):  # noqa: ANN001, ANN202 - fixtures
    """B's bootstrap, a new state topic of 3 partitions on B, a config naming it, a lakehouse."""
    b = kafka_clusters.bootstrap("B")
    state_topic = f"kafka-bronze-{uuid.uuid4().hex[:8]}"
    ensure_topic(b, state_topic, 3)
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": ["x"]}], state_topic=state_topic)
    return b, state_topic, config, LakehousePaths(tmp_path)


@pytest.mark.spark
def test_either_engine_in_any_order_lands_each_record_once(spark, kafka_clusters, tmp_path):
    b, state_topic, config, paths = _lakehouse(kafka_clusters, tmp_path)

    _produce(b, state_topic, "spark-first", 30)
    _transaction(b, state_topic, "aborted", 6, commit=False)
    run_bronze(spark, config, paths)  # Spark creates bronze and its checkpoint
    assert _bronze(paths) == _truth(b, state_topic)

    _produce(b, state_topic, "kafka", 20)
    _transaction(b, state_topic, "committed", 6, commit=True)
    ingest = KafkaBronzeIngest(config, paths, ["B"])
    try:
        assert ingest.pull() == 26  # from bronze's positions, past Spark's rows, the aborted left out
        assert ingest.pull() == 0
        _produce(b, state_topic, "kafka-again", 9)
        assert ingest.pull() == 9
    finally:
        ingest.close()
    assert _bronze(paths) == _truth(b, state_topic)

    # Spark's checkpoint is behind bronze now: it goes on from bronze, not from its checkpoint
    _produce(b, state_topic, "spark-after", 12)
    run_bronze(spark, config, paths)
    assert _bronze(paths) == _truth(b, state_topic)
    run_bronze(spark, config, paths)  # and its new checkpoint stands
    _produce(b, state_topic, "kafka-last", 5)
    restarted = KafkaBronzeIngest(config, paths, ["B"])
    try:
        assert restarted.pull() == 5
    finally:
        restarted.close()
    assert _bronze(paths) == _truth(b, state_topic)
    assert len(_bronze(paths)) == 30 + 20 + 6 + 9 + 12 + 5


def test_a_new_lakehouse_and_records_deleted_before_bronze_read_them(kafka_clusters, tmp_path):
    b, state_topic, config, paths = _lakehouse(kafka_clusters, tmp_path)
    _produce(b, state_topic, "first", 9)
    ingest = KafkaBronzeIngest(config, paths, ["B"])  # no bronze yet: it creates the table
    try:
        assert ingest.pull() == 9
    finally:
        ingest.close()
    assert _bronze(paths) == _truth(b, state_topic)

    _produce(b, state_topic, "never-read", 30)  # 10 per partition, deleted before bronze reads them
    admin = AdminClient({"bootstrap.servers": b})
    for future in admin.delete_records([TopicPartition(state_topic, 1, 8)]).values():
        future.result(30)
    again = KafkaBronzeIngest(config, paths, ["B"])
    try:
        with pytest.raises(IngestError, match=rf"{state_topic}\[1\] on B starts at offset 8 now.*records 3\.\.7"):
            again.pull()
    finally:
        again.close()
    assert len(_bronze(paths)) == 9  # nothing appended

    # the state topic deleted and created again: its new offsets are not the ones bronze holds
    for future in admin.delete_topics([state_topic]).values():
        future.result(30)
    wait_for(lambda: state_topic not in admin.list_topics(timeout=10).topics, "the state topic deleted")
    ensure_topic(b, state_topic, 3)
    _produce(b, state_topic, "new-life", 3)  # one record per partition: offset 0
    after = KafkaBronzeIngest(config, paths, ["B"])
    try:
        with pytest.raises(IngestError, match=rf"{state_topic}\[0\] on B ends at offset 1 now.*up to 2"):
            after.pull()
    finally:
        after.close()
    assert len(_bronze(paths)) == 9


def test_a_pull_takes_what_is_committed_before_an_open_transaction_and_the_rest_once_it_commits(
    kafka_clusters, tmp_path
):  # fmt: skip
    b, state_topic, config, paths = _lakehouse(kafka_clusters, tmp_path)
    _produce(b, state_topic, "before", 10)
    producer = Producer({"bootstrap.servers": b, "transactional.id": f"open-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(state_topic, key=f"open-{i}".encode(), value=b"tx", partition=i % 3)
    producer.flush(30)  # on the brokers, not committed: read_committed stops before them
    _produce(b, state_topic, "behind-the-open-one", 5)
    ingest = KafkaBronzeIngest(config, paths, ["B"])
    try:
        assert ingest.pull() == 10
        producer.commit_transaction(30)
        assert ingest.pull() == 6 + 5
        assert ingest.pull() == 0  # the commit markers are not records, and a pull is through them
    finally:
        ingest.close()
    assert _bronze(paths) == _truth(b, state_topic)
