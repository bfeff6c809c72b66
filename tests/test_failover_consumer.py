"""A consumer that moves itself (issue 37 item 3): an application consuming through a planned
failover A->B and a failback, with no restart and no reconfiguration, judged by content: every
record of the source read once, none lost, none twice.

The application is a ``FailoverConsumer`` in a thread that commits what it processed after each
batch; the operator runs ``apply_failover(..., move_consumers=True)`` and ``failback_groups(...,
move_consumers=True)`` while it runs. Records keep arriving on A before the failover (the app reads
them live) and after the failback.
"""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.failover_consumer import FailoverConsumer, Move
from replicator.config import parse_config
from replicator.errors import ConfigError
from replicator.failover import apply_failover, failback_groups
from replicator.flow.runtime import Replicator
from replicator.tasks.observe import observe_once
from tests.consuming_app import App, checkpointed
from tests.killable_source import Source, source_cluster  # noqa: F401 (the fixture ``source``: cluster X)
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
PARTITIONS = 2


def _load(bootstrap: str, topic: str, prefix: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"v", f"{prefix}-{i}".encode(), i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(30) == 0


def test_an_app_consumes_through_a_failover_and_a_failback_losing_and_rereading_nothing(kafka_clusters, unique_topic):
    a = kafka_clusters.bootstrap("A")
    topic, group = unique_topic("moving"), unique_topic("moving-app")
    ensure_topic(a, topic, PARTITIONS)
    flows = [
        {
            "source": "A",
            "target": "B",
            "topics": [topic],
            "audit": False,
            "emit_checkpoints_interval_seconds": 1,
            "watermarks_interval_seconds": 1,
        },
        {"source": "B", "target": "A", "topics": [topic], "audit": False, "enabled": False},  # failback's reverse
    ]
    data = {
        "clusters": {alias: {"bootstrap_servers": kafka_clusters.bootstrap(alias)} for alias in ("A", "B")},
        "flows": flows,
        "heartbeats_topic": f"heartbeats-{topic[-12:]}",
    }
    config = parse_config(data, source="test_failover_consumer")
    _load(a, topic, "before", 300)
    moves: list[Move] = []
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    # ~17 records/s: the 600 records outlast the failover, which must find the app mid-stream
    app = App(FailoverConsumer(config, "A->B", conf, [topic], on_move=moves.append, check_every_s=0.5), 0.3)
    replicator = Replicator(config, flows=["A->B"], status_port=None)
    replicator.start()
    try:
        wait_for(lambda: len(app.read) >= 100 or app.error is not None, "the app read the first records on A")
        _load(a, topic, "live", 300)  # read live on A while the flow copies them

        wait_for(lambda: checkpointed(config, "A->B", group), f"a checkpoint of {group}")
        result = apply_failover(
            config, "A->B", groups=group, planned=True, stop_replication=True, move_consumers=True, timeout_s=90
        )
        replicator.wait(timeout=30)
    finally:
        if replicator.alive:
            replicator.stop()
            replicator.wait(timeout=60)
    app.pause_s = 0.02  # the failover found the app mid-stream (asserted below): the rest at full speed
    assert [g.outcome for g in result.groups] == ["moved"], result.groups
    assert result.event is not None and result.event.mode == "planned"  # (test_failover_e2e's planned case, here)
    assert (result.event.records_lost, result.event.records_reread) == (0, 0)
    on_a = {r.key for p in range(PARTITIONS) for r in read_partition(a, topic, p)}
    assert len(on_a) == 600
    wait_for(lambda: app.keys() >= on_a or app.error is not None, "the app read every record, on A then B")
    assert app.error is None, app.error
    assert [(m.reason, m.from_cluster, m.to_cluster, m.topics) for m in moves] == [
        ("failover", "A", "B", (f"A.{topic}",))
    ]
    assert (moves[0].records_lost, moves[0].records_reread, moves[0].records_unreplicated) == (0, 0, 0)

    refused = failback_groups(config, "A->B", groups=group)  # the app is a member on B: not without the release
    assert [g.outcome for g in refused.groups] == ["skipped_active_on_B"], refused.groups
    back = failback_groups(config, "A->B", groups=group, move_consumers=True, timeout_s=60)
    # "unchanged" when A already holds those offsets: nothing new was read on B since the failover
    assert [g.outcome for g in back.groups] in (["moved"], ["unchanged"]), back.groups
    assert back.event is not None and back.event.groups == (group,)
    wait_for(lambda: len(moves) == 2 or app.error is not None, "the app moved back to A")
    _load(a, topic, "after", 200)
    on_a = {r.key for p in range(PARTITIONS) for r in read_partition(a, topic, p)}
    wait_for(lambda: app.keys() >= on_a or app.error is not None, "the app read the records written after failback")
    app.stop()
    assert app.error is None, app.error
    assert [(m.reason, m.from_cluster, m.to_cluster) for m in moves][1] == ("failback", "B", "A")
    counts = Counter(k for _c, k in app.read)
    assert set(counts) == on_a  # nothing lost, nothing foreign
    assert [k for k, n in counts.items() if n > 1] == []  # nothing read twice
    clusters = Counter(c for c, _k in app.read)
    assert clusters["B"] > 0 and clusters["A"] > 200, clusters  # the failover found the app mid-stream


def test_a_consumer_config_that_cannot_move_is_refused_naming_the_setting(kafka_clusters):
    data = {
        "clusters": {alias: {"bootstrap_servers": kafka_clusters.bootstrap(alias)} for alias in ("A", "B")},
        "flows": [{"source": "A", "target": "B", "topics": ["t"]}],
    }
    config = parse_config(data, source="test_failover_consumer")
    with pytest.raises(ConfigError, match="group.id"):
        FailoverConsumer(config, "A->B", {"auto.offset.reset": "earliest"}, ["t"])
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        FailoverConsumer(config, "A->B", {"group.id": "g", "bootstrap.servers": "x:1"}, ["t"])
    with pytest.raises(ConfigError, match="unknown flow"):
        FailoverConsumer(config, "A->C", {"group.id": "g"}, ["t"])


def test_with_the_source_killed_the_app_moves_and_is_told_what_it_never_gets(
    source: Source, kafka_clusters, unique_topic
):
    """A disaster: X dies with 50 records the flow never copied. The app, stopped between two
    batches (its commits checkpointed), moves to B on the failover event alone, reads the rest of
    what was copied, and ``on_move`` says how many records are not on B: the ones it never gets.
    Read twice: only records the app got from its consumer's prefetch after X died, whose commit
    failed (a move without a release starts at the group's last commit)."""
    source.restart()  # no-op when it runs
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic, group = unique_topic("moving-dr"), unique_topic("moving-dr-app")
    ensure_topic(x, topic, PARTITIONS)
    data = {
        "clusters": {"X": {"bootstrap_servers": x}, "B": {"bootstrap_servers": b}},
        "flows": [{"source": "X", "target": "B", "topics": [topic], "audit": False}],
        "heartbeats_topic": f"heartbeats-{topic[-12:]}",
        # a state topic of its own: other modules' X->B flows (each with its own X) share B, and their
        # failovers would read this test's topic in the flow's mapping and ask their X for it
        "state_topic": unique_topic("mirrorlake.moving-dr"),
    }
    config = parse_config(data, source="test_failover_consumer")
    _load(x, topic, "copied", 400)
    Replicator(config, status_port=None).run_until_caught_up()
    moves: list[Move] = []
    conf = {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    app = App(FailoverConsumer(config, "X->B", conf, [topic], on_move=moves.append, check_every_s=0.5))
    try:

        def both_partitions() -> bool:  # a group with a commit on each: the plan counts both partitions' tails
            return len({int(k.split(b"-")[1]) % PARTITIONS for _c, k in app.read}) == PARTITIONS

        wait_for(lambda: both_partitions() or app.error is not None, "the app read records of each partition on X")
        app.hold.set()
        wait_for(app.idle.is_set, "the app between two batches")
        Replicator(config, status_port=None).run_until_caught_up()  # checkpoints the app's last commit
        _load(x, topic, "never", 50)
        assert observe_once(config) == {"X->B": {}}  # X's log end, measured before it dies
        on_x = {r.key for p in range(PARTITIONS) for r in read_partition(x, topic, p)}
        source.kill()
        result = apply_failover(config, "X->B", groups=group, stale_after_s=0)
        assert [g.outcome for g in result.groups] == ["moved"], result.groups
        app.hold.clear()
        copied = {r.key for p in range(PARTITIONS) for r in read_partition(b, f"X.{topic}", p)}
        assert len(copied) == 400 and len(on_x) == 450
        wait_for(lambda: app.keys() >= copied or app.error is not None, "the app read every copy, on X then B")
    finally:
        app.stop()
        source.restart()
    assert app.error is None, app.error
    counts = Counter(k for _c, k in app.read)
    # read twice: only what the app read from X's prefetched records after X died (their commit failed)
    assert {k for k, n in counts.items() if n > 1} == app.uncommitted
    assert set(counts) == copied  # nothing copied lost
    assert [(m.reason, m.from_cluster, m.to_cluster) for m in moves] == [("failover", "X", "B")]
    never = on_x - set(counts)
    assert (moves[0].records_unreplicated, moves[0].records_lost, moves[0].records_reread) == (len(never), 0, 0)
    assert len(never) == 50
