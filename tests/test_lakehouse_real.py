"""The lakehouse from the replicator's own events on real clusters, checked against the clusters.

One replicated world: a gapped topic with consumer groups, then the replicator stops and more
records arrive (what it left behind), and the target is damaged on purpose (a deleted topic, a
changed config, an extra partition, an altered record). ``observe`` records the state as it is
now; the build must show group offsets equal to ground truth, the RPO equal to what was left
behind, and every damage in ``divergence``, and nothing else there.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from dashboards.data_health import flow_health
from lakehouse.api import Lakehouse
from lakehouse.build import build_lakehouse
from lakehouse.sql import LakehouseSQL
from mirrorlake.groundtruth import GroundTruth, read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.failover_cost import DELETED_ON_TARGET
from replicator.config import MirrorlakeConfig
from replicator.failover import apply_failover
from replicator.flow.runtime import Replicator
from replicator.tasks.observe import observe_once
from tests.test_exact_rpo import _abort_at_the_end
from tests.test_state_events import _commit, _copies, _produce, _transactions
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LEFT_BEHIND = 30  # plain records per partition produced after the replicator stopped
DELETED = 15  # copies of the 20 records of the "deleted" topic removed from the target (delete-records)
DELETED_GROUP_AT = 5  # a group of the "deleted" topic committed there: records 5..14 are lost to it
READ_ON, REWOUND = 4, 6  # after the failover, on B: one group commits 4 past where apply put it, one 6 before


def _deleted_group(orders: str) -> str:
    return f"lhdel-{orders[-6:]}"  # not matched by the failover of the orders groups


@dataclass
class World:
    config: MirrorlakeConfig
    orders: str
    topics: dict[str, str]  # role -> source topic
    groups: dict[str, list[tuple[str, int, int]]]
    lake: Lakehouse
    written: dict[tuple[str, int], int]  # (group, partition) -> the offset the failover wrote on B


@pytest.fixture(scope="module")
def world(kafka_clusters, unique_topic, tmp_path_factory, spark) -> World:
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    orders = unique_topic("lh-orders")
    topics = {role: unique_topic(f"lh-{role}") for role in ("gone", "cfg", "grow", "tamper", "txtail", "deleted")}
    ensure_topic(a, orders, 2)
    for t in topics.values():
        ensure_topic(a, t, 1)
    _produce(a, orders, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(200)])
    _transactions(a, orders, 2, orders[-8:])
    _produce(a, orders, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(200, 300)])
    for role, t in topics.items():
        _produce(a, t, [(0, f"{role}{i}".encode(), f"v{i}".encode()) for i in range(20)])
    _abort_at_the_end(a, topics["txtail"], orders[-8:], partitions=1)  # ends in aborted records and a marker
    groups: dict[str, list[tuple[str, int, int]]] = {}
    for i, c in enumerate((0, 37, 110, 130, 150)):
        groups[f"lh-{orders[-6:]}-{i}"] = [(orders, 0, c), (orders, 1, c + 3)]
    for group, offsets in groups.items():
        _commit(a, group, offsets)
    _commit(a, _deleted_group(orders), [(topics["deleted"], 0, DELETED_GROUP_AT)])  # reads into the deleted copies

    flow = {"source": "A", "target": "B", "topics": [orders, *topics.values()], "audit_window_records": 10}
    # the reverse flow copies nothing here; its checkpoints of the moved groups on B are the failover's outcome
    reverse = {"source": "B", "target": "A", "topics": [f"none-{orders[-6:]}"], "groups": [f"lh-{orders[-6:]}-.*"],
               "emit_heartbeats": False, "audit": False}  # fmt: skip
    lakehouse = {"path": str(tmp_path_factory.mktemp("lakehouse-real"))}
    own = {"lakehouse": lakehouse, "state_topic": f"lh-events-{uuid.uuid4().hex[:8]}"}  # this world's events only
    copy_config = kafka_clusters.config(flows=[{**flow, "audit": False}], **own)
    Replicator(copy_config, status_port=None).run_until_caught_up()

    # the replicator is stopped: what arrives now is left behind
    _produce(a, orders, [(i % 2, f"late{i}".encode(), b"v") for i in range(2 * LEFT_BEHIND)])
    # damage on the target
    admin_b = AdminClient({"bootstrap.servers": b})
    gone = f"A.{topics['gone']}"
    admin_b.delete_topics([gone])[gone].result(timeout=30)
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", f"A.{topics['cfg']}", incremental_configs=[entry])
    for future in admin_b.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    grow = f"A.{topics['grow']}"
    admin_b.create_partitions([NewPartitions(grow, 2)])[grow].result(timeout=30)
    tamper = f"A.{topics['tamper']}"
    admin_b.delete_topics([tamper])[tamper].result(timeout=30)
    wait_for(lambda: not {gone, tamper} & set(admin_b.list_topics(timeout=10).topics), "topic deletion")
    ensure_topic(b, tamper, 1)
    deleted = TopicPartition(f"A.{topics['deleted']}", 0, DELETED)  # copies gone below the target's log start
    assert admin_b.delete_records([deleted])[deleted].result(timeout=30).low_watermark == DELETED
    rewrite = Producer({"bootstrap.servers": b})
    for r in read_partition(a, topics["tamper"], 0):
        value = b"altered" if r.offset == 7 else r.value
        rewrite.produce(tamper, value, r.key, 0, timestamp=r.timestamp, headers=list(r.headers))
    rewrite.flush(30)

    time.sleep(0.01)  # observations come strictly after the last sync
    config = kafka_clusters.config(flows=[flow, reverse], **own)
    assert observe_once(config, ["A->B"]) == {"A->B": {}}
    applied = apply_failover(config, "A->B", groups=f"lh-{orders[-6:]}-.*", stale_after_s=0)
    assert applied.event is not None and len(applied.event.groups) == len(groups)
    written = {(o.group, o.partition): o.offset for o in applied.event.offsets}
    reader, rewound = f"lh-{orders[-6:]}-3", f"lh-{orders[-6:]}-4"  # their consumers now run on B
    _commit(b, reader, [(f"A.{orders}", p, written[(reader, p)] + READ_ON) for p in (0, 1)])
    _commit(b, rewound, [(f"A.{orders}", p, written[(rewound, p)] - REWOUND) for p in (0, 1)])
    time.sleep(0.01)  # the reverse flow's checkpoints come strictly after the failover event
    assert observe_once(config, ["B->A"]) == {"B->A": {}}
    build_lakehouse(spark, config)
    return World(config, orders, topics, groups, Lakehouse(config), written)


def test_group_offsets_equal_ground_truth(world: World, kafka_clusters):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    truth = {
        p: GroundTruth(_copies(read_partition(a, world.orders, p), read_partition(b, f"A.{world.orders}", p)))
        for p in (0, 1)
    }
    rows = world.lake.query(
        f'SELECT "group", partition, committed_offset, translated_offset, exact_offset FROM group_offsets '
        f"WHERE source_topic = '{world.orders}'"
    )
    got = {(r.group, r.partition): (r.committed_offset, r.translated_offset, r.exact_offset) for r in rows.itertuples()}
    for group, offsets in world.groups.items():
        for _topic, p, c in offsets:
            assert got[(group, p)] == (c, truth[p].translate(c), truth[p].translate(c)), (group, p)


def test_rpo_equals_what_the_stopped_replicator_left_behind(world: World, kafka_clusters):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    rows = world.lake.query(
        "SELECT partition, records_unreplicated, records_behind FROM rpo_now('A->B') "
        f"WHERE source_topic = '{world.orders}' ORDER BY partition"
    )
    for r in rows.itertuples():
        source = read_partition(a, world.orders, r.partition)
        copied = {u for u, _d in _copies(source, read_partition(b, f"A.{world.orders}", r.partition))}
        left_behind = [s for s in source if s.offset not in copied]
        assert len(left_behind) == LEFT_BEHIND
        assert r.records_unreplicated == r.records_behind == LEFT_BEHIND, r
    failover = world.lake.query(
        f"SELECT records_unreplicated, records_lost, records_reread FROM failover_now('A->B') "
        f"WHERE source_topic = '{world.orders}'"
    )
    assert len(failover) == 2 * len(world.groups)
    assert set(failover.records_unreplicated) == {LEFT_BEHIND}
    assert set(failover.records_lost) == {0} and set(failover.records_reread) == {0}  # exact checkpoints


def test_rpo_of_a_caught_up_topic_ending_in_an_abort_is_zero(world: World):
    rows = world.lake.query(
        "SELECT records_unreplicated, bytes_unreplicated, seconds_unreplicated, read_position, log_end_offset "
        f"FROM rpo_now('A->B') WHERE source_topic = '{world.topics['txtail']}'"
    )
    assert len(rows) == 1
    r = rows.iloc[0]
    assert (r.records_unreplicated, r.bytes_unreplicated, r.seconds_unreplicated) == (0, 0, 0.0), r
    assert r.read_position < r.log_end_offset  # the committed position stops before the aborted tail


def test_failovers_table_and_plan_macros(world: World):
    prefix = f"lh-{world.orders[-6:]}-"
    rows = world.lake.query(f"SELECT * FROM failovers WHERE \"group\" LIKE '{prefix}%'")
    assert len(rows) == 2 * len(world.groups)
    assert set(rows["mode"]) == {"unplanned"} and set(rows.records_lost) == {0} and set(rows.records_reread) == {0}
    assert set(rows.records_unreplicated) == {LEFT_BEHIND}
    # the measured outcome: what the reverse flow B->A checkpointed of each moved group on B afterwards
    outcome = {
        (r.group, r.partition): (r.outcome, r.outcome_first_offset - r.target_offset, r.outcome_records_reread,
                                 r.outcome_records_consumed)
        for r in rows.itertuples()
    }  # fmt: skip
    moved_on = {f"{prefix}3": ("resumed", READ_ON, 0, READ_ON), f"{prefix}4": ("rewound", -REWOUND, REWOUND, -REWOUND)}
    for (group, partition), written in world.written.items():
        assert written == rows[(rows.group == group) & (rows.partition == partition)].target_offset.item()
        assert outcome[(group, partition)] == moved_on.get(group, ("resumed", 0, 0, 0)), (group, partition)
    plan = world.lake.query(
        f"SELECT * FROM failover_plan('A->B') WHERE source_topic = '{world.orders}' AND \"group\" LIKE '{prefix}%'"
    )
    assert len(plan) == 2 * len(world.groups)
    assert set(plan.records_lost) == {0} and set(plan.records_reread) == {0}
    assert set(plan.partition_records_unreplicated) == {LEFT_BEHIND}
    cut = world.lake.query("SELECT * FROM consistent_cut('A->B')")
    assert len(cut) == 1 and cut.partitions[0] > 0


def test_divergence_finds_each_damage_and_nothing_else(world: World):
    rows = world.lake.query("SELECT source_topic, kind, item, window_start FROM divergence")
    found = {(r.source_topic, r.kind) for r in rows.itertuples()}
    t = world.topics
    assert (t["gone"], "missing_target_topic") in found
    assert (t["grow"], "partition_count") in found
    config_items = {r.item for r in rows.itertuples() if r.source_topic == t["cfg"] and r.kind == "config"}
    assert "retention.ms" in config_items
    (gone,) = [r for r in rows.itertuples() if r.kind == "target_records_deleted"]
    assert (gone.source_topic, gone.item, gone.window_start) == (t["deleted"], f"target offsets [0, {DELETED})", 0)
    data = [r for r in rows.itertuples() if r.kind == "data"]
    # the deleted copies also differ in the windows audited after the deletion: 0..9 and 10..14 of 10..19
    assert sorted((r.source_topic, r.window_start) for r in data) == sorted(
        [(t["tamper"], 0), (t["deleted"], 0), (t["deleted"], 10)]
    )  # tamper: offset 7; 10..19 agree
    assert not [r for r in rows.itertuples() if r.source_topic == world.orders]


def test_rpo_counts_copies_deleted_from_the_target(world: World, kafka_clusters):
    """The issue's case: the records were copied, then deleted on the target; 0 pending, yet at risk."""
    rows = world.lake.query(
        "SELECT records_unreplicated, target_log_start_offset, records_deleted_on_target, records_at_risk "
        f"FROM rpo_now('A->B') WHERE source_topic = '{world.topics['deleted']}'"
    )
    assert len(rows) == 1
    r = rows.iloc[0]
    assert (r.records_unreplicated, r.target_log_start_offset) == (0, DELETED), r
    assert (r.records_deleted_on_target, r.records_at_risk) == (DELETED, DELETED), r
    # ground truth: the target holds only the copies past its log start
    assert len(read_partition(kafka_clusters.bootstrap("B"), f"A.{world.topics['deleted']}", 0)) == 20 - DELETED
    kept = world.lake.query(
        f"SELECT records_deleted_on_target FROM rpo_now('A->B') WHERE source_topic = '{world.orders}'"
    )
    assert set(kept.records_deleted_on_target) == {0}


def test_groups_health_and_the_plan_macro_count_copies_deleted_from_the_target(world: World):
    """#10 item 8 beyond the plan and rpo: rpo_groups, failover_plan() and flow_health count them too."""
    group, lost = _deleted_group(world.orders), DELETED - DELETED_GROUP_AT
    rows = world.lake.query(
        "SELECT resume_offset, method, records_lost, records_deleted_on_target, lost_cause, target_log_start_offset "
        f"FROM rpo_groups WHERE \"group\" = '{group}'"
    )
    assert len(rows) == 1
    r = rows.iloc[0]
    assert (r.resume_offset, r.method, r.target_log_start_offset) == (DELETED, "log_start", DELETED), r
    assert (r.records_lost, r.records_deleted_on_target, r.lost_cause) == (lost, lost, DELETED_ON_TARGET), r
    plan = world.lake.query(f"SELECT * FROM failover_plan('A->B') WHERE \"group\" = '{group}'")
    assert len(plan) == 1
    p = plan.iloc[0]
    assert (p.target_offset, p.records_lost, p.records_reread) == (DELETED, lost, 0), p
    assert (p.records_deleted_on_target, p.lost_cause) == (lost, DELETED_ON_TARGET), p
    sql = LakehouseSQL(world.lake.paths.root)
    try:
        health = flow_health(sql, "A->B")
    finally:
        sql.close()
    # flow A->B is shared by the session's other tests: at least this world's deletions count
    assert health.records_deleted_on_target is not None and health.records_deleted_on_target >= DELETED
    assert health.records_at_risk is not None and health.records_at_risk >= health.records_deleted_on_target
    # each process's latest lifecycle row reaches the rule (tests/test_dashboard_logic.py holds the rule)
    assert health.lifecycle_state in ("running", "stopped", "error"), health
    assert health.groups_losing_records >= 1
