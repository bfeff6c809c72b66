"""The compacted state snapshot on real clusters: readers that start from it see what a full replay sees."""

from __future__ import annotations

from dataclasses import replace

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import mapping_from_events, state_events, syncs_for
from mirrorlake.traffic import ensure_topic
from replicator.client.state_reader import read_state_log
from replicator.client.state_snapshot import _key, load_snapshot, snapshot_topic
from replicator.client.translation import latest_checkpoints, translate_offsets
from replicator.events import Checkpoint, Failover, FailoverOffset, Lifecycle, RecordsLostBeforeCopy, Watermark
from replicator.failover.plan import build_plan, select_groups
from replicator.failover.state import EVENT_TYPES_READ, FlowState, read_flow_state
from replicator.failover.target import group_activity, positions_at
from replicator.flow.runtime import Replicator
from replicator.kafka.admin import admin_client
from replicator.kafka.state_log import StateLog
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


def _unaudited_flow(kafka_clusters, unique_topic, partitions: int):
    """A fresh topic on A with its own state topic and a flow A->B of it without audits."""
    topic, state_topic = unique_topic("snap"), unique_topic("mirrorlake.events")
    ensure_topic(kafka_clusters.bootstrap("A"), topic, partitions)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False}],
        heartbeats_topic=_hb(),
        state_topic=state_topic,
    )
    return topic, state_topic, config


def test_a_damaged_snapshot_is_ignored_and_the_log_still_answers(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, state_topic, config = _unaudited_flow(kafka_clusters, unique_topic, 1)
    _produce(a, topic, [(0, f"k{i}".encode(), b"v") for i in range(100)])
    _commit(a, "g", [(topic, 0, 60)])
    Replicator(config, status_port=None).run_until_caught_up()
    producer = Producer({"bootstrap.servers": b})
    garbage = [
        (_key("latest", "A->B", "checkpoint", "g", "x", 0), b"garbage"),
        (_key("mapping", "A->B", "t", "z"), b"{"),
    ]
    for key, value in garbage:
        producer.produce(snapshot_topic(state_topic), key=key, value=value, partition=0)
    producer.flush(30)
    expected = latest_checkpoints(state_events(b, state_topic), "A->B", "g")
    assert expected and translate_offsets(config, "A->B", "g") == expected


def _tail_events(topic: str, now: int) -> list:
    """What arrives after the last snapshot: a newer checkpoint, watermarks, a stop request, a failover."""
    base = {"flow": "A->B", "replicator_id": "tail-writer", "emitted_at_ms": now}
    ends = {"source_cluster": "A", "target_cluster": "B", "source_topic": topic, "target_topic": f"A.{topic}"}
    return [
        Checkpoint(**base, **ends, group="g", partition=0, upstream_offset=120, downstream_offset=120, method="exact"),
        Watermark(**base, cluster="B", side="target", topic=f"A.{topic}", source_topic=topic, partition=1,
                  log_start_offset=30, log_end_offset=200, observed_at_ms=now),
        Watermark(**base, cluster="A", side="source", topic=topic, source_topic=topic, partition=0,
                  log_start_offset=0, log_end_offset=260, observed_at_ms=now, read_position=250,
                  position_source="flow", unreplicated_records=10, unreplicated_bytes=10, 
                  oldest_unreplicated_timestamp_ms=now - 5),
        Lifecycle(**base, state="stop_requested", reason="test"),
        Failover(**base, source_cluster="A", target_cluster="B", mode="unplanned", groups=("other",),
                 offsets=(FailoverOffset("other", topic, f"A.{topic}", 0, 3, 3, 0, 0),), records_lost=0,
                 records_reread=0, host="h", user="u"),
    ]  # fmt: skip


def _comparable(state: FlowState) -> tuple:
    flow = state.flow.name
    segments = {key: state.index.segments(*key) for key in state.index.partitions(flow)}
    return (
        state.checkpoints, state.source_marks, state.target_marks, state.lifecycle, state.last_seen_ms,
        state.failovers, state.failbacks, state.last_copy(), segments, state.losses,
    )  # fmt: skip


def test_a_failover_plan_from_snapshot_and_tail_equals_one_from_a_full_replay(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, state_topic, config = _unaudited_flow(kafka_clusters, unique_topic, 2)
    conf = config.cluster("B").client_config()
    for run in range(2):  # the second run writes its snapshot on top of the first one's
        _produce(a, topic, [(i % 2, f"k{run}-{i}".encode(), b"v") for i in range(200)])
        _commit(a, "g", [(topic, 0, 40 + 60 * run), (topic, 1, 77 + 10 * run)])
        Replicator(config, status_port=None).run_until_caught_up()
        if run == 0:  # a loss said between the runs: before the second run's snapshot
            early = StateLog(Producer({"bootstrap.servers": b}), state_topic)
            early.emit(RecordsLostBeforeCopy(flow="A->B", replicator_id="r", source_cluster="A", target_cluster="B",
                                             source_topic=topic, partition=1, from_offset=5, to_offset=9, records=4,
                                             noticed="start"))  # fmt: skip
            assert early.producer.flush(30) == 0 and early.failed is None
    snap = load_snapshot(conf, state_topic, "A->B")
    assert snap is not None
    kinds = {key[0] for key in snap.latest}
    assert {"checkpoint", "watermark", "lifecycle"} <= kinds and snap.seen
    log = StateLog(Producer({"bootstrap.servers": b, "enable.idempotence": True}), state_topic)
    tail = _tail_events(topic, max(snap.seen.values()) + 1)
    for event in tail:
        log.emit(event)
    assert log.producer.flush(30) == 0

    after = read_state_log(conf, state_topic, event_types=EVENT_TYPES_READ, start_offsets=snap.positions).events
    assert {e.event_id for e in tail} <= {e.event_id for e in after}
    assert len(after) < len(state_events(b, state_topic))  # the snapshot spared most of the log

    fast, full = read_flow_state(config, "A->B"), read_flow_state(config, "A->B", use_snapshot=False)
    fast = replace(fast, read_at_ms=full.read_at_ms)
    assert _comparable(fast) == _comparable(full)
    assert fast.checkpoints[("g", topic, 0)].upstream_offset == 120  # from the tail
    assert [f.groups for f in fast.failovers] == [("other",)]
    assert [(e.from_offset, e.to_offset) for e in fast.losses[(topic, 1)].values()] == [(5, 9)]  # kept by the snapshot

    groups = select_groups(full, None)
    activity = group_activity(admin_client(conf), groups)

    def plan(state: FlowState):
        return build_plan(state, groups, activity, lambda parts, ts: positions_at(conf, parts, ts), running=("r",))

    reference = plan(full)
    assert reference.groups and reference.partitions and reference.consistent_cut_ms is not None
    assert plan(fast) == reference
