"""The compacted state snapshot on real clusters: readers that start from it see what a full replay sees."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import mapping_from_events, state_events, syncs_for
from mirrorlake.traffic import ensure_topic
from replicator.client.state_snapshot import load_snapshot, snapshot_topic
from replicator.client.translation import latest_checkpoints, translate_offsets
from replicator.flow.runtime import Replicator
from replicator.tasks.base import StateView
from tests.test_state_events import _commit, _hb, _produce

pytestmark = pytest.mark.kafka


def _furthest(windows) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for w in windows:
        out[(w.side, w.partition)] = max(out.get((w.side, w.partition), -1), w.window_start)
    return out


def test_snapshot_readers_equal_a_full_replay_across_runs(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, state_topic = unique_topic("snap"), unique_topic("mirrorlake.events")
    ensure_topic(a, topic, 2)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": True, "audit_window_records": 50}],
        heartbeats_topic=_hb(),
        state_topic=state_topic,
    )
    conf = config.cluster("B").client_config()
    for run in range(2):  # the second run starts from the snapshot the first one wrote
        _produce(a, topic, [(i % 2, f"k{run}-{i}".encode(), b"v") for i in range(300)])
        _commit(a, f"g{run}", [(topic, 0, 40 + run), (topic, 1, 77 + run)])
        Replicator(config, status_port=None).run_until_caught_up()

        snap = load_snapshot(conf, state_topic, "A->B")
        assert snap is not None
        events = state_events(b, state_topic)
        syncs = syncs_for(events, topic)
        for p in range(2):
            assert snap.segments[(topic, p)] == (f"A.{topic}", mapping_from_events(syncs, p))
        for group in ("g0", "g1")[: run + 1]:
            assert translate_offsets(config, "A->B", group) == latest_checkpoints(events, "A->B", group)

        view = StateView(config, config.flow("A->B"))  # a restarted process's view
        audited: list = []
        view.subscribe("audit_window", audited.append)
        try:
            view.refresh()
            for p in range(2):
                assert view.index.segments("A->B", topic, p) == mapping_from_events(syncs, p)
            windows = [e for e in events if e.event_type == "audit_window" and e.source_topic == topic]
            assert windows
            assert _furthest(audited) == _furthest(windows)  # the audit task resumes where it left off
        finally:
            view.close()


def test_a_damaged_snapshot_is_ignored_and_the_log_still_answers(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, state_topic = unique_topic("snap"), unique_topic("mirrorlake.events")
    ensure_topic(a, topic, 1)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False}],
        heartbeats_topic=_hb(),
        state_topic=state_topic,
    )
    _produce(a, topic, [(0, f"k{i}".encode(), b"v") for i in range(100)])
    _commit(a, "g", [(topic, 0, 60)])
    Replicator(config, status_port=None).run_until_caught_up()
    producer = Producer({"bootstrap.servers": b})
    producer.produce(snapshot_topic(state_topic), key=b"v1|latest|A->B|checkpoint|g|x|0", value=b"garbage", partition=0)
    producer.produce(snapshot_topic(state_topic), key=b"v1|mapping|A->B|t|zero", value=b"{", partition=0)
    producer.flush(30)
    expected = latest_checkpoints(state_events(b, state_topic), "A->B", "g")
    assert expected and translate_offsets(config, "A->B", "g") == expected
