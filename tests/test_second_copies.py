"""Second copies no sync names: a killed writer's batch that reaches the target late.

The soak (seed 91040) froze the target, SIGKILLed a replicator with a batch on the way, and the
batch was appended after the flow had copied those records again: the mapping kept the earlier
copies, 37 offsets translated 38 too low against the brief's "latest copy". Here the late batch is
written by hand, byte for byte the copies the flow made (key, value, headers with the provenance
header, timestamp), at the two moments it can land: between two of a running flow's copies (a gap
the gap task reads) and past the last copy before a restart (the start's tail recovery). Judged
against the target's contents (``mirrorlake.groundtruth``), never against the flow's own figures.
"""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import GroundTruth, copies_by_content, read_partition, state_events
from mirrorlake.traffic import ensure_topic
from replicator.client.mapping_index import MappingIndex
from replicator.events import OffsetSync, SyncReason
from tests.test_delivery import start_replicator, write_config
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, first: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _write_as_copies(read: tuple[str, str], bootstrap: str, remote: str, first: int, n: int) -> None:
    """Append to ``remote`` the records at offsets ``first`` .. ``first + n - 1`` of ``read`` (a
    bootstrap and a topic), as the flow copies them: key, value, headers, timestamp (a copy's
    provenance header is no part of its content)."""
    records = [r for r in read_partition(*read, 0) if first <= r.offset < first + n]
    assert len(records) == n
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for r in records:
        producer.produce(remote, key=r.key, value=r.value, headers=list(r.headers), timestamp=r.timestamp, partition=0)
    assert producer.flush(30) == 0


def _late_batch(bootstrap: str, remote: str, first: int, n: int) -> None:
    """Append again, as they are, the target's copies at offsets ``first`` .. ``first + n - 1``."""
    _write_as_copies((bootstrap, remote), bootstrap, remote, first, n)


def _count(bootstrap: str, topic: str) -> int:
    try:
        return len(read_partition(bootstrap, topic, 0))
    except Exception:  # noqa: BLE001 - the remote topic does not exist before the first copy
        return 0


def _assert_mapping_is_the_truth(kafka_clusters, topic: str) -> list[OffsetSync]:
    """Every committed offset translates to its latest copy; every copy reverse-translates to its record."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    source, target = read_partition(a, topic, 0), read_partition(b, f"A.{topic}", 0)
    copies = copies_by_content(source, target)
    assert {u for u, _d in copies} == {r.offset for r in source}  # nothing lost
    syncs = [e for e in state_events(b, "mirrorlake.events") if isinstance(e, OffsetSync) and e.source_topic == topic]
    index = MappingIndex()
    index.add(syncs)
    truth = GroundTruth(copies)
    said = {c: index.translate("A->B", topic, 0, c) for c in range(source[-1].offset + 2)}
    off = [(c, t.downstream if t else None, truth.translate(c)) for c, t in said.items()]
    off = [row for row in off if row[1] != row[2]]
    assert off == [], off[:5]
    for u, d in copies:
        back = index.reverse("A->B", topic, 0, d)
        assert back is not None and (back.upstream, back.method) == (u, "exact"), (u, d, back)
    return syncs


def test_a_late_batch_between_a_running_flows_copies_gets_its_syncs(kafka_clusters, unique_topic, tmp_path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("late-gap")
    ensure_topic(a, topic, partitions=1)
    config = write_config(kafka_clusters, tmp_path, topic)
    proc = start_replicator(config)
    try:
        _produce(a, topic, 0, 100)
        wait_for(lambda: _count(b, f"A.{topic}") >= 100, timeout_s=120, what="the first 100 copies")
        _late_batch(b, f"A.{topic}", 30, 20)  # target 100..119: second copies of 30..49
        _produce(a, topic, 100, 100)
        wait_for(lambda: _count(b, f"A.{topic}") >= 220, timeout_s=120, what="the next 100 copies after the batch")
        time.sleep(1)  # the copies' syncs (sync_interval 0.5 s)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    syncs = _assert_mapping_is_the_truth(kafka_clusters, topic)
    recovered = sorted((s.upstream_offset, s.downstream_offset) for s in syncs if s.reason == SyncReason.RECOVERED)
    assert recovered == [(30, 100), (49, 119)], recovered  # one run: a sync at each end
    assert "are copies of 30..49: offset syncs published" in err


def test_a_late_batch_past_the_last_copy_is_recovered_at_the_next_start(kafka_clusters, unique_topic, tmp_path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("late-tail")
    ensure_topic(a, topic, partitions=1)
    config = write_config(kafka_clusters, tmp_path, topic)
    _produce(a, topic, 0, 100)
    first = start_replicator(config, "--until-caught-up")
    _out, err = first.communicate(timeout=180)
    assert first.returncode == 0, err[-3000:]
    _late_batch(b, f"A.{topic}", 60, 25)  # target 100..124: second copies of 60..84, past the last sync
    _produce(a, topic, 100, 50)
    second = start_replicator(config, "--until-caught-up")
    _out, err = second.communicate(timeout=180)
    assert second.returncode == 0, err[-3000:]
    assert _count(b, f"A.{topic}") == 175  # the restart copied 100..149 once
    syncs = _assert_mapping_is_the_truth(kafka_clusters, topic)
    recovered = sorted((s.upstream_offset, s.downstream_offset) for s in syncs if s.reason == SyncReason.RECOVERED)
    assert recovered == [(60, 100), (84, 124)], recovered
