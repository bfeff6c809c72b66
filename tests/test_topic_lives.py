"""Topics that come back and records deleted before their copy, on real clusters (issue 39, item 2).

The issue's cases, each held to what the clusters hold (keys name their topic's life and offset):
- ``acct`` (2 partitions, 10,000 records each in the issue, 2,000 here) copied, the flow stopped,
  the topic deleted and created again, more new records than old (12,500; 2,500 here): the
  restarted flow resumed at the old committed position and the new topic's records before it never
  reached the target. Now
  every new record is copied, a ``topic_recreated`` event says so, and a group of the new topic
  is planned exactly (the mapping's new life);
- the same while the flow runs;
- ``on_topic_recreated: stop``: the flow fails naming the topic (exit 9), after the event;
- 700 records deleted on the source (delete-records) before the stopped flow copied them: a
  ``records_lost_before_copy`` event with that count and range; and the same while a slow flow runs.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.state_reader import read_state_log
from replicator.config import load_config
from replicator.errors import ReplicationError
from replicator.events import Lifecycle, RecordsLostBeforeCopy, TopicRecreated
from replicator.failover import plan_failover
from replicator.flow.runtime import Replicator
from replicator.kafka.settings import consumer_group_id
from replicator.kafka.state_log import StateLog
from replicator.tasks.observe import observe_once
from tests.consuming_app import checkpointed
from tests.test_delivery import start_processes, write_config
from tests.test_failover_unmapped import SLOW_FETCH
from tests.test_state_events import _commit
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
PARTITIONS, OLD, NEW = 2, 2_000, 2_500  # the new topic grows past the old one's end


def _produce(bootstrap: str, topic: str, life: str, per_partition: int, start: int = 0) -> None:
    """Keys name their offsets: idempotent, so a batch retried after a refusal (a topic created a moment
    ago, its leader not known yet) keeps its place. CI of 2026-11-28 saw a plain producer put records
    616..1615 after 1616..2499 on the source itself, and the test blamed the plan."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, key=f"{life}-{p}-{i}".encode(), value=b"v" * 20, partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0


def _recreate(bootstrap: str, topic: str, group: str | None = None, partitions: int = PARTITIONS) -> None:
    """Delete and create ``topic`` again; with ``group``, only once the broker removed that group's commits
    of the deleted topic (it does so a moment after the deletion, and would remove a commit made meanwhile)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, f"{topic} deleted")
    if group is not None:
        wait_for(lambda: _committed(bootstrap, group, topic) == [], f"{group}'s commits of {topic} removed")

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
        except KafkaException as exc:  # the deletion still in progress: asked again
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise
        return True

    wait_for(created, f"{topic} created again")


def _config(kafka_clusters, unique_topic, topic: str, **flow):
    return kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False,
                "refresh_topics_interval_seconds": 1, **flow}],
        state_topic=unique_topic("mirrorlake.lives"),
        replicator_id="lives-test",
    )  # fmt: skip


def _ends(bootstrap: str, topic: str) -> list[int]:
    """Each partition's log end (0 while the topic does not exist yet)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lives-probe"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)]  # fmt: skip
    except KafkaException:
        return [0] * PARTITIONS
    finally:
        consumer.close()


def _events(config, kind):
    conf = config.cluster("B").client_config()
    return [e for e in read_state_log(conf, config.state_topic).events if isinstance(e, kind)]


def _keys(bootstrap: str, topic: str) -> set[bytes]:
    try:
        return {r.key for p in range(PARTITIONS) for r in read_partition(bootstrap, topic, p)}
    except KafkaException:  # the remote topic is not created yet
        return set()


def planned_at(config, a: str, topic: str, group: str, committed: int):
    """The failover plan of ``group``, committed at ``committed`` on every partition of ``topic`` on A."""
    _commit(a, group, [(topic, p, committed) for p in range(PARTITIONS)])

    def observed() -> bool:  # a group just committed may be listed a moment later (CI of b3cb400)
        # committed again each round: the broker's clean-up of the deleted topic's offsets (by name,
        # after the new topic exists) was seen to remove the group's first commit (2026-11-29)
        _commit(a, group, [(topic, p, committed) for p in range(PARTITIONS)])
        assert observe_once(config) == {"A->B": {}}
        return checkpointed(config, "A->B", group)

    wait_for(observed, f"a checkpoint of {group}")
    (g,) = plan_failover(config, "A->B", groups=group, stale_after_s=0).groups
    return g


def _new_life_planned_exactly(config, kafka_clusters, topic: str, group: str, committed: int) -> None:
    """A group of the new topic, planned through the mapping's new life: every figure as a consumer of B
    resuming at the planned offset would find it, by content."""
    b = kafka_clusters.bootstrap("B")
    g = planned_at(config, kafka_clusters.bootstrap("A"), topic, group, committed)
    for row in g.partitions:
        on_b = read_partition(b, f"A.{topic}", row.partition)
        after = [r.key.decode() for r in on_b if r.offset >= row.target_offset]
        new = [int(k.rsplit("-", 1)[1]) for k in after if k.startswith("new-")]
        reread = sum(1 for i in new if i < committed)
        lost = len(set(range(committed, NEW)) - set(new))
        assert (row.method, row.records_lost, row.records_reread) == ("exact", lost, reread) == ("exact", 0, 0), row
        assert not any(k.startswith("old-") for k in after)  # the old life's copies are all before it


def test_a_topic_recreated_while_the_flow_was_stopped_is_copied_whole(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("acct")
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    Replicator(config, status_port=None).run_until_caught_up()
    _recreate(a, topic)
    _produce(a, topic, "new", NEW)  # past the old topic's end: the old position names a new record
    replicator = Replicator(config, status_port=None)
    replicator.run_until_caught_up()
    expected = {f"{life}-{p}-{i}".encode() for life, n in (("old", OLD), ("new", NEW)) for p in range(2)
                for i in range(n)}  # fmt: skip
    assert _keys(b, f"A.{topic}") == expected  # nothing of either life missing
    (event,) = _events(config, TopicRecreated)
    assert (event.topic, event.noticed, event.policy, event.partitions) == (topic, "start", "continue", PARTITIONS)
    assert event.previous_topic_id and event.topic_id != event.previous_topic_id
    assert event.log_end_offsets == (NEW, NEW)
    assert replicator.flow_stats()["A->B"].topics_recreated == 1
    _new_life_planned_exactly(config, kafka_clusters, topic, unique_topic("acct-app"), 1_500)


def test_a_topic_recreated_while_the_flow_runs_is_copied_whole(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("acct-live")
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, f"A.{topic}") == [OLD] * PARTITIONS, "the old life copied")
        _recreate(a, topic)
        _produce(a, topic, "new", NEW)
        # every new record, after the old ones (some new ones may be copied twice: counted below)
        wait_for(lambda: min(_ends(b, f"A.{topic}")) >= OLD + NEW, "the new life copied", timeout_s=120)
        wait_for(lambda: bool(_events(config, TopicRecreated)), "the topic_recreated event")
    finally:
        replicator.stop()
        replicator.wait(timeout=60)
    wanted = {f"new-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(NEW)}
    assert wanted <= _keys(b, f"A.{topic}")  # nothing of the new life missing
    (event,) = _events(config, TopicRecreated)
    assert (event.topic, event.noticed) == (topic, "running")
    _new_life_planned_exactly(config, kafka_clusters, topic, unique_topic("acct-live-app"), 1_500)


def test_the_new_life_start_is_the_committed_position_until_copying_moves_it(kafka_clusters, unique_topic):
    """The chaos soak of 2026-11-29 (seed 91040) lost 1,687 new records: the running flow noticed the
    re-created topic and committed its partitions at the new log start, but the consumer still held the
    old position stored for its auto-commit, which committed it again a moment later; killed before a
    copy of the new life was stored, the flow restarted at the old position (771) inside the new topic.
    Here the new topic stays empty, so nothing else moves the stored position: once an auto-commit has
    certainly run (another topic's copy committed), the topic's commit must still be the new log start."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, tick = unique_topic("acct-commit"), unique_topic("acct-tick")
    ensure_topic(a, topic, PARTITIONS)
    ensure_topic(a, tick, 1)
    config = _config(kafka_clusters, unique_topic, topic, topics=[topic, tick])
    group = consumer_group_id(config.flow("A->B"))
    _produce(a, topic, "old", OLD)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, f"A.{topic}") == [OLD] * PARTITIONS, "the old life copied")
        wait_for(lambda: _committed(a, group, topic) == [OLD] * PARTITIONS, "the old position committed")
        _recreate(a, topic, group)
        wait_for(lambda: bool(_events(config, TopicRecreated)), "the topic_recreated event", timeout_s=60)
        # the flow commits the new start when it notices (partitions it holds) or at their next assignment
        wait_for(lambda: _committed(a, group, topic) != [], "the new life's start committed")
        producer = Producer({"bootstrap.servers": a})
        for i in range(10):
            producer.produce(tick, key=f"tick-{i}".encode(), value=b"t", partition=0)
        assert producer.flush(30) == 0
        wait_for(lambda: _committed(a, group, tick) == [10], "an auto-commit after the re-creation")
        assert _committed(a, group, topic) == [0] * PARTITIONS  # the new log start, never the old position
    finally:
        replicator.stop()
        replicator.wait(timeout=60)


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    """The group's commits of ``topic``, as its coordinator holds them (also of a deleted topic): through
    a consumer that never joins, as ``replicator.client.group_offsets`` reads them (the admin API's
    ListConsumerGroupOffsets can segfault librdkafka, see tests/test_packaging.py)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return [tp.offset for tp in found if tp.offset >= 0]


def test_copies_made_under_the_old_id_before_a_stop_are_matched_at_the_restart(kafka_clusters, unique_topic):
    """The running flow never checks the topic's id before it stops (its refresh is ten minutes away):
    its consumer resets the old position to the new topic's log start and copies the new records under
    the old id. The restarted flow notices the new id at start, matches those copies with the new
    topic by content (syncs of the new life) and copies none of them twice."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("acct-unnoticed")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic, refresh_topics_interval_seconds=600)
    _produce(a, topic, "old", OLD)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, remote) == [OLD] * PARTITIONS, "the old life copied")
        _recreate(a, topic)
        first = 1_000  # fewer than the old position: librdkafka resets it to the new log start
        _produce(a, topic, "new", first)
        wait_for(lambda: _ends(b, remote) == [OLD + first] * PARTITIONS, "new records copied under the old id")
        _produce(a, topic, "new", NEW - first, start=first)
        wait_for(lambda: _ends(b, remote) == [OLD + NEW] * PARTITIONS, "the rest copied under the old id")
    finally:
        replicator.stop()
        replicator.wait(timeout=60)
    assert not _events(config, TopicRecreated)  # the running flow never noticed
    Replicator(config, status_port=None).run_until_caught_up()
    keys = [r.key for p in range(PARTITIONS) for r in read_partition(b, remote, p)]
    expected = {f"{life}-{p}-{i}".encode() for life, n in (("old", OLD), ("new", NEW)) for p in range(2)
                for i in range(n)}  # fmt: skip
    assert set(keys) == expected and len(keys) == len(expected)  # every record, none copied twice
    (event,) = _events(config, TopicRecreated)
    assert event.noticed == "start"
    _new_life_planned_exactly(config, kafka_clusters, topic, unique_topic("acct-unnoticed-app"), 1_500)


def test_a_peer_s_partition_of_a_recreated_topic_is_matched_not_copied_again(kafka_clusters, unique_topic, tmp_path):
    """Two processes share the flow, one partition each; both notice the re-created topic and copy their
    partition's new life. One is SIGKILLed: the survivor, which noticed the re-creation while the other
    held that partition, took it at the new log start and copied the peer's whole new life a second
    time (the 30-minute soak's second copies). Now it matches the partition's copies on the target
    first and goes on past them: every record of both lives once, in order."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("acct-peers")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    config = write_config(kafka_clusters, tmp_path, topic, refresh_topics_interval_seconds=1, audit=False)
    _produce(a, topic, "old", OLD)
    logs, procs = start_processes(config, tmp_path, "one", "two")
    try:
        wait_for(lambda: _ends(b, remote) == [OLD] * PARTITIONS, "the old life copied", timeout_s=120)
        wait_for(lambda: all(_one_each(log) for log in logs.values()), "one partition each", timeout_s=120)
        _recreate(a, topic)
        first = 1_000  # fewer than the old position: not read on from it (that copies some twice, by design)
        _produce(a, topic, "new", first)
        noticed = "was deleted and created again"
        wait_for(lambda: all(noticed in log.read_text() for log in logs.values()), "both noticed", timeout_s=60)
        _produce(a, topic, "new", NEW - first, start=first)
        wait_for(lambda: min(_ends(b, remote)) >= OLD + NEW, "the new life copied", timeout_s=120)
        taken = logs["two"].read_text().count("A->B: assigned")
        procs["one"].send_signal(signal.SIGKILL)
        procs["one"].wait(30)
        wait_for(lambda: logs["two"].read_text().count("A->B: assigned") > taken, "the survivor took the peer's", 120)
        _produce(a, topic, "new", 500, start=NEW)
        wait_for(lambda: min(_ends(b, remote)) >= OLD + NEW + 500, "the records after the kill copied", 120)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.wait(60)
    for p in range(PARTITIONS):
        keys = [r.key.decode() for r in read_partition(b, remote, p)]
        wanted = [f"old-{p}-{i}" for i in range(OLD)] + [f"new-{p}-{i}" for i in range(NEW + 500)]
        assert keys == wanted, (p, len(keys), len(wanted), logs["two"].read_text()[-3000:])


def test_a_new_life_said_by_a_process_that_never_held_the_partition_is_not_trusted_at_restart(
    kafka_clusters, unique_topic, tmp_path
):
    """A process of the flow holding no partition of a re-created topic says so at once (``topic_recreated``):
    the mapping's new life starts for every partition. The partition's owner, which checks ids rarely,
    reads on from its old position in the longer new topic, under the old id, and is SIGKILLed before it
    notices. A restart took the new life as settled and trusted the owner's commit (a position in the new
    topic): the new topic's records before the old position never reached the target. Now a partition
    whose new life holds no copy is matched by content and copied from the new log start: every record
    is on the target (the read-on copies twice, the case docs/operations.md names)."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("acct-unheld")
    remote = f"A.{topic}"
    old, new = 2_000, 3_000  # the new topic longer than the old position: the owner reads on from it
    ensure_topic(a, topic, 1)

    def produce(life: str, n: int) -> None:
        producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
        for i in range(n):
            producer.produce(topic, key=f"{life}-{i}".encode(), value=b"v" * 20, partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0

    def end() -> int:
        consumer = Consumer({"bootstrap.servers": b, "group.id": "lives-probe"})
        try:
            return consumer.get_watermark_offsets(TopicPartition(remote, 0), timeout=10, cached=False)[1]
        except KafkaException:
            return 0
        finally:
            consumer.close()

    dirs = {name: tmp_path / name for name in ("owner", "peer")}
    for d in dirs.values():
        d.mkdir()
    interval = {"owner": 600, "peer": 1}  # the owner never checks while running; the peer every second
    configs = {n: write_config(kafka_clusters, d, topic, refresh_topics_interval_seconds=interval[n], audit=False)
               for n, d in dirs.items()}  # fmt: skip
    produce("old", old)
    logs, procs = start_processes(configs["owner"], dirs["owner"], "owner")
    try:
        wait_for(lambda: end() == old, "the old life copied", timeout_s=120)
        more_logs, more = start_processes(configs["peer"], dirs["peer"], "peer")
        logs.update(more_logs)
        procs.update(more)
        group = consumer_group_id(load_config(configs["peer"]).flows[0])
        admin = AdminClient({"bootstrap.servers": a})

        def members() -> int:
            (future,) = admin.describe_consumer_groups([group]).values()
            return len(future.result(timeout=30).members)

        wait_for(lambda: members() == 2, "the peer joined, holding nothing (sticky)", timeout_s=120)
        procs["owner"].send_signal(signal.SIGSTOP)  # frozen: it sees the new topic only once it is longer
        try:
            _recreate(a, topic, partitions=1)
            produce("new", new)
            said = "was deleted and created again"
            wait_for(lambda: said in logs["peer"].read_text(), "the peer said the new life", timeout_s=60)
        finally:
            procs["owner"].send_signal(signal.SIGCONT)
        wait_for(lambda: end() == new, "the owner read on from its old position to the new end", timeout_s=120)
        assert "was deleted and created again" not in logs["owner"].read_text()  # never noticed
        wait_for(lambda: _committed(a, group, topic) == [new], "the owner committed its read-on position")
        procs["peer"].send_signal(signal.SIGTERM)
        assert procs["peer"].wait(60) == 0
        procs["owner"].send_signal(signal.SIGKILL)
        procs["owner"].wait(30)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert [e.replicator_id for e in _events(load_config(configs["peer"]), TopicRecreated)
            if e.topic == topic] == ["peer"]  # fmt: skip
    Replicator(load_config(configs["owner"]), status_port=None).run_until_caught_up()
    keys = [r.key.decode() for r in read_partition(b, remote, 0)]
    missing = {f"new-{i}" for i in range(new)} - set(keys)
    assert not missing, (len(missing), min(missing, key=lambda k: int(k.split("-")[1])))
    assert keys[:old] == [f"old-{i}" for i in range(old)]
    read_on = new - old  # the owner's copies from its old position on, under the old id
    assert keys[old : old + read_on] == [f"new-{i}" for i in range(old, new)]
    assert keys[old + read_on :] == [f"new-{i}" for i in range(new)]  # then the new topic whole, in order


def _one_each(log: Path) -> bool:
    """The process holds exactly one partition (its log's assignments, revocations and losses in order:
    a cooperative rebalance names only the partitions it adds or takes away)."""
    held: set[str] = set()
    for line in log.read_text().splitlines():
        for verb in ("assigned", "revoked", "lost"):
            if f"A->B: {verb} " in line:
                names = set(re.findall(r"[\w.-]+\[\d+\]", line.split(f"A->B: {verb} ", 1)[1]))
                held = held | names if verb == "assigned" else held - names
    return len(held) == 1


def test_on_topic_recreated_stop_fails_the_flow_naming_the_topic(kafka_clusters, unique_topic, tmp_path: Path):
    a = kafka_clusters.bootstrap("A")
    topic = unique_topic("acct-stop")
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic, on_topic_recreated="stop")
    _produce(a, topic, "old", 100)
    Replicator(config, status_port=None).run_until_caught_up()
    _recreate(a, topic)
    _produce(a, topic, "new", 100)
    with pytest.raises(ReplicationError, match=f"source topic '{topic}' was deleted and created again"):
        Replicator(config, status_port=None).run_until_caught_up()
    (event,) = _events(config, TopicRecreated)
    assert event.policy == "stop"
    b = kafka_clusters.bootstrap("B")
    held = _ends(b, f"A.{topic}")
    # started again with stop still set: it holds (no copy of the new topic, no second event)
    with pytest.raises(ReplicationError, match=f"source topic '{topic}' .* stop still holds"):
        Replicator(config, status_port=None).run_until_caught_up()
    assert len(_events(config, TopicRecreated)) == 1
    assert _ends(b, f"A.{topic}") == held
    # continue: the new topic's records after the old copies
    going_on = _config(kafka_clusters, lambda _prefix: config.state_topic, topic)
    Replicator(going_on, status_port=None).run_until_caught_up()
    assert [end - before for end, before in zip(_ends(b, f"A.{topic}"), held, strict=True)] == [100] * PARTITIONS


@pytest.mark.parametrize("ended", ["stopped", "crashed"])
def test_records_deleted_before_the_stopped_flow_copied_them_are_counted(kafka_clusters, unique_topic, ended):
    """``crashed``: another process of the flow started and never stopped (what a SIGKILL leaves), so
    the restart takes the crash path: its resume positions are committed only after the loss is read."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("expired")
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", 1_000)
    Replicator(config, status_port=None).run_until_caught_up()
    if ended == "crashed":
        producer = Producer({"bootstrap.servers": b})
        StateLog(producer, config.state_topic).emit(Lifecycle(flow="A->B", replicator_id="killed-9", state="started"))
        assert producer.flush(30) == 0
    _produce(a, topic, "old", 1_000, start=1_000)
    admin = AdminClient({"bootstrap.servers": a})
    for future in admin.delete_records([TopicPartition(topic, 0, 1_700)]).values():
        assert future.result(timeout=30).low_watermark == 1_700
    replicator = Replicator(config, status_port=None)
    replicator.run_until_caught_up()
    never = {f"old-0-{i}".encode() for i in range(1_000, 1_700)}
    assert not never & _keys(b, f"A.{topic}")  # ground truth: never copied, and gone from A
    (event,) = _events(config, RecordsLostBeforeCopy)
    assert (event.partition, event.from_offset, event.to_offset, event.records) == (0, 1_000, 1_700, len(never))
    assert event.noticed == "start"
    assert replicator.flow_stats()["A->B"].records_lost_before_copy == len(never)


def test_records_deleted_under_a_running_flow_before_it_copied_them_are_counted(kafka_clusters, unique_topic):
    """A slow flow (``SLOW_FETCH``) is far behind when delete-records removes offsets below 5,000 of
    partition 0: the consumer resets to the log start, and the gap its copies show is the loss."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("expired-live")
    ensure_topic(a, topic, PARTITIONS)
    config = kafka_clusters.config(
        clusters={"A": {"bootstrap_servers": a, "client": SLOW_FETCH}, "B": {"bootstrap_servers": b}},
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False,
                "refresh_topics_interval_seconds": 1}],
        state_topic=unique_topic("mirrorlake.lives"),
    )  # fmt: skip
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 20})
    for i in range(10_000):
        producer.produce(topic, key=f"old-0-{i}".encode(), value=b"v" * 20, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, f"A.{topic}")[0] > 100, "the flow copying, slowly")
        admin = AdminClient({"bootstrap.servers": a})
        for future in admin.delete_records([TopicPartition(topic, 0, 5_000)]).values():
            assert future.result(timeout=30).low_watermark == 5_000
        wait_for(lambda: bool(_events(config, RecordsLostBeforeCopy)), "the records_lost_before_copy event")
    finally:
        replicator.stop()
        replicator.wait(timeout=60)
    copied = {int(k.decode().rsplit("-", 1)[1]) for k in _keys(b, f"A.{topic}")}
    below = sorted(i for i in copied if i < 5_000)
    assert below == list(range(len(below)))  # copied in order up to the deletion
    (event,) = _events(config, RecordsLostBeforeCopy)
    assert (event.from_offset, event.to_offset, event.noticed) == (len(below), 5_000, "running")
    assert event.records == 5_000 - len(below)  # ground truth: never copied, and gone from A
