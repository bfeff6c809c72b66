"""The compiled produce path (``replicator/flow/copying/_copycore.c`` behind ``NativeCopier``) on a real target.

Its delivery reports are served in C and handed to the ledger as segments; these tests read the
target partitions back and hold every offset sync, and every translation, to where each copy
really landed, with someone else writing to the same partitions between the copies.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from mirrorlake.groundtruth import Rec, read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.mapping import TranslationMethod, translate
from replicator.client.provenance import PROVENANCE_HEADER, Provenance
from replicator.config import FlowConfig, parse_config
from replicator.errors import ConfigError
from replicator.events import OffsetSync, SyncReason
from replicator.flow.copying import copycore
from replicator.flow.copying.copycore import CopyCoreUnavailable, copies_natively, load_copycore
from replicator.flow.copying.native_copier import NativeCopier
from replicator.flow.runtime import Replicator
from replicator.kafka.settings import producer_config
from replicator.metadata.topics import RemoteTopic
from replicator.metrics.stats import FlowStats
from tests.test_flow_units import FakeMessage, FakeState, _mapping_of, ledger

PARTITIONS = 2


def recent_ms() -> int:
    """A base timestamp a minute old. Records stamped years ago would be deleted by the target's time
    retention (7 days; the local brokers check every second) in the middle of the test."""
    return int(time.time() * 1000) - 60_000


class Record(FakeMessage):
    """A consumed record whose value names its source offset (so the target can be read back)."""

    def value(self) -> bytes:
        return f"{self._p}:{self._o}".encode()


def test_the_compiled_path_is_built_and_loads_here():
    """CI builds it (scripts/bootstrap.sh installs gcc's inputs): a missing build must fail here, not
    silently leave every flow on the Python path."""
    assert hasattr(load_copycore(), "CopyCore")


def test_copy_engine_native_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch):
    def missing() -> None:
        raise CopyCoreUnavailable("not built here")

    monkeypatch.setattr(copycore, "load_copycore", missing)
    assert not copies_natively(FlowConfig(source="A", target="B"))  # auto: the Python path, with a warning
    with pytest.raises(ConfigError, match="copy_engine native: not built here"):
        copies_natively(FlowConfig(source="A", target="B", copy_engine="native"))
    assert not copies_natively(FlowConfig(source="A", target="B", exactly_once=True))
    clusters = {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}}
    config = parse_config({"clusters": clusters, "flows": [{"source": "A", "target": "B", "copy_engine": "native"}]})
    with pytest.raises(ConfigError, match="flow A->B: copy_engine native"):
        Replicator(config, status_port=None)  # before any flow starts or any cluster is asked


def test_copy_engine_native_with_exactly_once_is_a_config_error():
    clusters = {"A": {"bootstrap_servers": "x:1"}, "B": {"bootstrap_servers": "y:1"}}
    with pytest.raises(ConfigError, match="copy_engine native does not do exactly-once"):
        parse_config(
            {
                "clusters": clusters,
                "flows": [{"source": "A", "target": "B", "exactly_once": True, "copy_engine": "native"}],
            }
        )


def _read_back(bootstrap: str, topic: str) -> tuple[dict[tuple[int, int], int], list[Rec]]:
    """Where each copy landed ((partition, upstream) -> offset) and every record, from the target."""
    records = [r for p in range(PARTITIONS) for r in read_partition(bootstrap, topic, p)]
    landed = {}
    for r in records:
        if r.value != b"foreign":
            p, u = (int(x) for x in r.value.decode().split(":"))
            landed[(p, u)] = r.offset
    return landed, records


@pytest.mark.kafka
def test_every_sync_and_translation_is_exact_among_foreign_writes(kafka_clusters, unique_topic):
    target = unique_topic("native-copy")
    bootstrap = kafka_clusters.bootstrap("B")
    flow = FlowConfig(source="A", target="B")
    state = FakeState()
    led = ledger(lag_max=100, state=state)
    stats = FlowStats()
    settings = producer_config(flow, {"bootstrap.servers": bootstrap}, "native-copier-test", "main")
    errors: list = []
    copier = NativeCopier("A->B", stats, Provenance("A", "B", enabled=False), settings, errors.append, track_every=100)
    remote = RemoteTopic("orders", target, PARTITIONS)
    consumer_errors: list = []
    copier.connect(None, led, lambda _t, _p: remote, consumer_errors.append)
    foreign = Producer({"bootstrap.servers": bootstrap})
    offsets = [u for u in range(1200) if u != 500]  # a transaction marker at 500 on the source
    base = recent_ms()
    try:
        ensure_topic(bootstrap, target, PARTITIONS)
        copier.list_topics(target)
        for i in range(0, len(offsets), 400):
            batch = [Record("orders", p, u, ts=base + u) for u in offsets[i : i + 400] for p in (0, 1)]
            copier.copy_batch(batch)  # type: ignore[arg-type]
            assert copier.flush(30) == 0
            for p in range(PARTITIONS):  # someone else writes to the same partitions between the copies
                foreign.produce(target, b"foreign", partition=p)
            assert foreign.flush(30) == 0
        # headers, a timestamp-less record and one that would close a cycle (it came from B)
        copier.copy_batch(
            [
                Record("orders", 0, 1200, ts=base + 1200, headers=[("app", b"1"), ("null", None)]),
                Record("orders", 0, 1201),
                Record("orders", 0, 1202, headers=[(PROVENANCE_HEADER, b"B")]),
            ]  # type: ignore[list-item]
        )
        assert copier.flush(30) == 0
    finally:
        foreign.flush(10)
        copier.close()
    assert copier.in_flight == 0 and copier.delivery_error is None and not consumer_errors
    # a record that came from B is never copied back there, provenance stamping on or off
    assert stats.records == 2 * len(offsets) + 2 and stats.skipped_cycle == 1 and stats.batches == 4
    led.flush()
    led.publish()
    landed, records = _read_back(bootstrap, target)
    assert len(landed) == stats.records
    syncs = [s for s in state.emitted if isinstance(s, OffsetSync)]
    for s in syncs:  # every sync and its predecessor name a real copy
        assert landed[(s.partition, s.upstream_offset)] == s.downstream_offset
        if s.previous_upstream_offset is not None:
            assert landed[(s.partition, s.previous_upstream_offset)] == s.previous_downstream_offset
    assert sum(1 for s in syncs if s.reason == SyncReason.DELTA_CHANGE) >= 2 * 3  # the foreign writes
    for p in range(PARTITIONS):  # every delivery is known: the mapping is exact, foreign writes or not
        segments = _mapping_of([s for s in syncs if s.partition == p])
        for u in [*offsets, 1200, 1201] if p == 0 else offsets:
            got = translate(segments, u)
            assert got is not None and got.method == TranslationMethod.EXACT and got.downstream == landed[(p, u)], u
    by_upstream = {(r.partition, r.value): r for r in records}
    with_headers = by_upstream[(0, b"0:1200")]
    assert with_headers.headers == (("app", b"1"), ("null", None))
    assert with_headers.timestamp == base + 1200
    assert by_upstream[(0, b"0:1201")].timestamp > base + 1200  # none at the source: the target's
    assert (0, b"0:1202") not in by_upstream
    assert stats.mm2.partition(target, 0).record_count == len(offsets) + 2  # MM2's per-partition metrics


def test_reports_of_copies_in_flight_when_a_partition_is_given_up_are_dropped(kafka_clusters, unique_topic):
    """As ``test_flow_units``' test of the same name, on the compiled path and a real target: the copies
    land, their reports of the partition given up are not handed to the ledger."""
    target = unique_topic("native-forget")
    bootstrap = kafka_clusters.bootstrap("B")
    state = FakeState()
    led = ledger(lag_max=100, state=state)
    settings = producer_config(FlowConfig(source="A", target="B"), {"bootstrap.servers": bootstrap}, "forget", "main")
    copier = NativeCopier("A->B", FlowStats(), Provenance("A", "B", enabled=False), settings, list().append)
    remote = RemoteTopic("orders", target, PARTITIONS)
    copier.connect(None, led, lambda _t, _p: remote, list().append)
    try:
        ensure_topic(bootstrap, target, PARTITIONS)
        copier.list_topics(target)
        copier.copy_batch([Record("orders", p, u, ts=recent_ms()) for p in (0, 1) for u in range(50)])  # type: ignore[arg-type]
        copier.forget({("orders", 0)})  # before any report was served
        led.forget([("orders", 0)])
        assert copier.flush(30) == 0
    finally:
        copier.close()
    led.flush()
    led.publish()
    synced = {s.partition for s in state.emitted if isinstance(s, OffsetSync)}
    assert synced == {1}
    landed, _records = _read_back(bootstrap, target)
    assert len(landed) == 100  # the copies themselves are on the target


def test_a_setting_the_compiled_producer_refuses_is_a_config_error_with_values_scrubbed():
    flow = FlowConfig(source="A", target="B")
    target = {"bootstrap.servers": "127.0.0.1:1", "sasl.password": "pw-secret-1", "security.protocol": "pw-secret-1"}
    settings = producer_config(flow, target, "native-copier-refused", "main")
    with pytest.raises(ConfigError, match="compiled copy producer refuses it") as info:
        NativeCopier("A->B", FlowStats(), Provenance("A", "B", enabled=False), settings, pytest.fail)
    assert "security.protocol" in str(info.value) and "pw-secret-1" not in str(info.value), info.value


def test_provenance_on_skips_what_came_from_the_target_before_producing():
    """Stamping runs in Python (``Provenance.stamp``) for each record; a skipped one is never produced,
    so nothing is in flight and no broker is needed to see it."""
    flow = FlowConfig(source="A", target="B")
    settings = producer_config(flow, {"bootstrap.servers": "127.0.0.1:1"}, "native-copier-skip", "main")
    stats = FlowStats()
    copier = NativeCopier("A->B", stats, Provenance("A", "B", enabled=True), settings, lambda _e: None)
    copier.connect(None, ledger(), lambda _t, _p: RemoteTopic("orders", "A.orders", 1), pytest.fail)
    try:
        copier.copy_batch([Record("orders", 0, 0, headers=[(PROVENANCE_HEADER, b"B")])])  # type: ignore[list-item]
        assert stats.skipped_cycle == 1 and stats.records == 0 and copier.in_flight == 0
    finally:
        copier.close()


@pytest.mark.kafka
def test_records_consumed_from_a_real_source_are_read_directly_and_copied_whole(kafka_clusters, unique_topic):
    """confluent_kafka's own messages: their fields are read from the struct (the layout check passed
    on this confluent-kafka), and what lands on the target is the source record, field for field."""
    source, target = unique_topic("native-src"), unique_topic("native-dst")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, source, 1)
    ensure_topic(b, target, 1)
    producer = Producer({"bootstrap.servers": a})
    base = recent_ms()
    for i in range(300):
        headers = [("i", str(i).encode()), ("none", None)] if i % 3 == 0 else None
        producer.produce(source, value=None if i == 7 else f"v{i}".encode(), key=None if i % 2 else f"k{i}".encode(),
                         headers=headers, timestamp=base + i)  # fmt: skip
    assert producer.flush(30) == 0
    consumed = _consume_all(a, source)
    assert len(consumed) == 300
    stats = FlowStats()
    settings = producer_config(FlowConfig(source="A", target="B"), {"bootstrap.servers": b}, "native-direct", "main")
    copier = NativeCopier("A->B", stats, Provenance("A", "B", enabled=False), settings, pytest.fail)
    copier.connect(None, ledger(), lambda _t, _p: RemoteTopic(source, target, 1), pytest.fail)
    try:
        copier.list_topics(target)
        copier.copy_batch(consumed)
        assert copier.flush(30) == 0 and copier.delivery_error is None
    finally:
        copier.close()
    assert copier.direct_reads == 300 and stats.records == 300
    fields = [(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) for m in consumed]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in read_partition(b, target, 0)] == fields


def _consume_all(bootstrap: str, topic: str) -> list:
    """Every record of partition 0 as confluent_kafka's own ``Message`` objects (what a flow consumes)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "native-read", "enable.auto.commit": False,
         "enable.partition.eof": True}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list = []
        while True:
            for m in consumer.consume(1000, 1.0):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    return out
                out.append(m)
    finally:
        consumer.close()
