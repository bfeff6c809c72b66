"""Reading the state topic: every event back, undecodable records reported and skipped."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorlake.traffic import ensure_topic
from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import StateLogFollower, read_state_log
from replicator.errors import ReplicationError
from replicator.events import Heartbeat, Lifecycle, OffsetSync, encode
from replicator.events.codec import MAGIC
from replicator.kafka.log_bounds import partition_bounds, topic_bounds
from replicator.kafka.position_store import PositionStore


def _sync(u: int, d: int, reason: str = "delta_change", prev: tuple[int, int] | None = None) -> OffsetSync:
    return OffsetSync(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        source_topic="t",
        target_topic="A.t",
        partition=0,
        upstream_offset=u,
        downstream_offset=d,
        upstream_timestamp_ms=0,
        reason=reason,
        previous_upstream_offset=prev[0] if prev else None,
        previous_downstream_offset=prev[1] if prev else None,
    )


@pytest.mark.kafka
def test_bad_records_are_reported_and_skipped_and_the_follower_reads_only_new_events(kafka_clusters, unique_topic):
    bootstrap = kafka_clusters.bootstrap("A")
    topic = unique_topic("state")
    ensure_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    good = [Lifecycle(flow="A->B", replicator_id="r", state="started"), _sync(0, 0, "first")]
    garbage = [b"not avro", MAGIC + bytes(8) + b"x", encode(good[0])[:-2]]
    for i, value in enumerate([encode(good[0]), *garbage, encode(good[1])]):
        producer.produce(topic, value, partition=i % 2)
    producer.flush(10)

    read = read_state_log({"bootstrap.servers": bootstrap}, topic)
    assert sorted(e.event_id for e in read.events) == sorted(e.event_id for e in good)
    reasons = sorted(b.reason for b in read.bad)
    assert len(reasons) == 3
    assert any("not an Avro single-object" in r for r in reasons)
    assert any("unknown schema fingerprint" in r for r in reasons)
    assert any("does not decode" in r for r in reasons)

    follower = StateLogFollower({"bootstrap.servers": bootstrap}, topic, event_types=["heartbeat"])
    try:
        assert follower.poll().events == []  # other types are skipped by fingerprint
        beat = Heartbeat(flow="A->B", replicator_id="r", origin_cluster="A", hop_path=("A",), origin_timestamp_ms=1)
        producer.produce(topic, encode(beat), partition=1)
        producer.flush(10)
        assert follower.poll().events == [beat]
        assert follower.poll().events == []
    finally:
        follower.close()


@pytest.mark.kafka
def test_a_missing_state_topic_reads_as_empty(kafka_clusters, unique_topic):
    read = read_state_log({"bootstrap.servers": kafka_clusters.bootstrap("A")}, unique_topic("never-created"))
    assert read.events == [] and read.bad == []


def test_mapping_index_translates_both_ways():
    index = MappingIndex()
    # copies: u 0..9 -> d 0..9, then u 12..19 -> d 10..17 (a gap of two upstream offsets)
    index.add([_sync(0, 0, "first"), _sync(12, 10, "upstream_gap", (9, 9)), _sync(19, 17, "flush", (18, 16))])
    assert index.translate("A->B", "t", 0, 5).downstream == 5
    gap = index.translate("A->B", "t", 0, 10)
    assert (gap.downstream, gap.method) == (10, "after_last_copy")
    assert index.translate("A->B", "t", 0, 15).downstream == 13
    assert index.reverse("A->B", "t", 0, 13).upstream == 15
    assert index.reverse("A->B", "t", 0, 18).upstream == 20  # past the end: after the last copy
    assert index.translate("A->B", "t", 1, 5) is None
    assert index.target_topic("A->B", "t") == "A.t"


class _ElectingConsumer:
    """Answers get_watermark_offsets as a partition does while its leader is elected: ``moving``
    times NOT_LEADER_FOR_PARTITION (seen in CI when a reader raced the importer's CreateTopics)."""

    def __init__(self, moving: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.moving, self.code, self.calls = moving, code, 0

    def get_watermark_offsets(self, tp, timeout, cached):
        self.calls += 1
        if self.calls <= self.moving:
            raise KafkaException(KafkaError(self.code))
        return (0, 7)


def test_log_bounds_wait_out_a_leader_election_and_report_anything_else():
    electing = _ElectingConsumer(moving=3)
    assert partition_bounds(electing, "t", 0, timeout_s=10) == (0, 7)  # type: ignore[arg-type]
    assert electing.calls == 4
    missing = _ElectingConsumer(moving=1, code=KafkaError.UNKNOWN_TOPIC_OR_PART)
    with pytest.raises(KafkaException):
        partition_bounds(missing, "t", 0, timeout_s=10)  # type: ignore[arg-type]
    assert missing.calls == 1
    forever = _ElectingConsumer(moving=10**6)
    with pytest.raises(KafkaException):
        partition_bounds(forever, "t", 0, timeout_s=0.5)  # type: ignore[arg-type]


class _RestartingBroker(_ElectingConsumer):
    """Answers list_topics as a broker coming back can: ``moving`` times with ``code`` on the
    topic (None: no partitions listed yet), then the topic with one partition."""

    def __init__(self, moving: int, code: int | None) -> None:
        super().__init__(0)
        self.listed, self.moving_topic, self.topic_code = 0, moving, code

    def list_topics(self, topic, timeout):
        self.listed += 1
        moving = self.listed <= self.moving_topic
        error = KafkaError(self.topic_code) if moving and self.topic_code is not None else None
        meta = SimpleNamespace(error=error, partitions={} if moving else {0: object()})
        return SimpleNamespace(topics={topic: meta})


def test_topic_bounds_read_only_unknown_topic_as_missing():
    """ "No topic" is read by callers as "nothing written yet": an exactly-once flow's positions
    reader took a restarting broker's answer for it and copied everything again."""
    for code in (KafkaError.LEADER_NOT_AVAILABLE, None):
        restarting = _RestartingBroker(moving=3, code=code)
        assert topic_bounds(restarting, "t", timeout_s=10) == {0: (0, 7)}  # type: ignore[arg-type]
        assert restarting.listed == 4
    assert topic_bounds(_RestartingBroker(moving=1, code=KafkaError.UNKNOWN_TOPIC_OR_PART), "t") is None  # type: ignore[arg-type]
    refused = _RestartingBroker(moving=1, code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        topic_bounds(refused, "t", timeout_s=10)  # type: ignore[arg-type]
    assert refused.listed == 1  # a refusal is not asked again
    with pytest.raises(KafkaException):
        topic_bounds(_RestartingBroker(moving=10**6, code=KafkaError.LEADER_NOT_AVAILABLE), "t", timeout_s=0.5)  # type: ignore[arg-type]


@pytest.mark.kafka
def test_positions_end_at_the_open_transaction_and_a_missing_topic_the_flow_made_is_an_error(
    kafka_clusters, unique_topic
):
    b = kafka_clusters.bootstrap("B")
    conf = {"bootstrap.servers": b}
    topic = unique_topic("positions")
    ensure_topic(b, topic, 1)
    store = PositionStore(topic, "A->B", conf, topic_exists=True, timeout_s=5)
    wanted = [("orders", 0), ("orders", 1)]
    committed = Producer({**conf, "transactional.id": f"{topic}-committed"})
    committed.init_transactions(30)
    committed.begin_transaction()
    store.write(committed, {("orders", 0): 100, ("orders", 1): 200})
    committed.commit_transaction(30)
    open_txn = Producer({**conf, "transactional.id": f"{topic}-open"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    store.write(open_txn, {("orders", 0): 999})
    assert open_txn.flush(30) == 0  # on the broker, not committed
    try:
        assert store.read(wanted) == {("orders", 0): 100, ("orders", 1): 200}
    finally:
        open_txn.abort_transaction(30)

    gone = unique_topic("positions-gone")  # never created: a broker that lost track of it
    with pytest.raises(ReplicationError, match=f"no positions topic {gone} .* not starting from scratch"):
        PositionStore(gone, "A->B", conf, topic_exists=True, timeout_s=2).read(wanted)
    assert PositionStore(gone, "A->B", conf).read(wanted) == {}  # an observer: nothing committed yet
