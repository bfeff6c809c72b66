"""Failover end to end on real clusters: the source's broker is killed, the plan is made and applied
with it down, and consumers on the target lose exactly what the plan said, re-reading nothing;
once the source is back, failback lists (and exports) exactly those records, re-produces them to the
target, mirrors back only what the target gained and moves groups back losing nothing, under the
default and the identity policy.

The source is this module's own cluster X (the session's clusters are shared, this one is killed
with SIGKILL and restarted); the target is the session's B. X->B runs under load and is stopped;
more records arrive on X and ``observe`` records what is left behind; then X's broker dies.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.config import parse_config
from replicator.errors import ClusterUnreachableError, ConfigError, FailoverError
from replicator.failover import (
    apply_failover,
    failback_plan,
    plan_failover,
    recover_never_replicated,
    seed_reverse_flow,
)
from replicator.flow.runtime import Replicator
from replicator.tasks.observe import observe_once
from tests.killable_source import Source, source_cluster  # noqa: F401 (the fixture ``source``: cluster X)
from tests.test_state_events import _commit
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka

FLOW = "X->B"


def _load(bootstrap: str, topic: str, prefix: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"v" * (i % 50), f"{prefix}-{i}".encode(), i % 2)
        producer.poll(0)
    assert producer.flush(30) == 0


def _resume_on_target(bootstrap: str, group: str, topic: str) -> list[bytes]:
    """Keys a consumer of ``group`` reads on the target from its committed offsets to the end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest", "enable.auto.commit": False}
    )
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=30)
        assert all(tp.offset >= 0 for tp in committed), committed
        consumer.assign(committed)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)}
        keys: list[bytes] = []

        def done() -> bool:
            keys.extend(m.key() for m in consumer.consume(1000, timeout=0.5) if m.error() is None)
            return all(tp.offset >= ends[tp.partition] for tp in consumer.position(committed))

        wait_for(done, "consumer on the target at the end")
        return keys
    finally:
        consumer.close()


def _count(bootstrap: str, topic: str) -> int:
    try:
        return len(read_partition(bootstrap, topic, 0))
    except KafkaException:  # the remote topic is not created yet
        return 0


def _member_on_target(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    wait_for(lambda: bool(consumer.poll(0.2) or consumer.assignment()), f"{group} joined on the target")
    return consumer


def _config_data(kafka_clusters, source: Source, topic: str) -> dict:
    return {
        "clusters": {
            **{alias: {"bootstrap_servers": bs} for alias, bs in kafka_clusters.bootstraps.items()},
            "X": {"bootstrap_servers": source.bootstrap},
        },
        "flows": [
            {
                "source": "X",
                "target": "B",
                "topics": [topic],
                "audit": False,
                "emit_checkpoints_interval_seconds": 1,
                "watermarks_interval_seconds": 1,
            }
        ],
        "heartbeats_topic": f"heartbeats-{topic[-12:]}",
    }


def test_failover_with_the_source_killed_loses_exactly_the_reported_records(
    source: Source, kafka_clusters, unique_topic, tmp_path: Path
):
    b = kafka_clusters.bootstrap("B")
    topic, app, busy = unique_topic("fo"), unique_topic("fo-app"), unique_topic("fo-busy")
    ensure_topic(source.bootstrap, topic, 2)
    _load(source.bootstrap, topic, "first", 2000)
    _commit(source.bootstrap, app, [(topic, 0, 400), (topic, 1, 300)])
    _commit(source.bootstrap, busy, [(topic, 0, 10), (topic, 1, 10)])
    data = _config_data(kafka_clusters, source, topic)
    config = parse_config(data, source="test_failover_e2e")
    config_file = tmp_path / "failover.yaml"
    config_file.write_text(yaml.safe_dump(data))

    # under load: the replicator runs while records keep arriving; apply refuses while it runs
    replicator = Replicator(config, status_port=None)
    replicator.start()
    load = threading.Thread(target=_load, args=(source.bootstrap, topic, "load", 20_000))
    load.start()
    remote = f"X.{topic}"
    wait_for(lambda: _count(b, remote) > 1000, "replication under way")

    def refused() -> bool:
        try:
            apply_failover(config, FLOW, groups=app)
        except FailoverError as exc:
            if "no group has a checkpoint" in str(exc):
                return False  # the running flow has not checkpointed the group yet (a loaded machine)
            assert "still runs" in str(exc), exc
            return True
        raise AssertionError("apply moved groups while the flow runs")

    wait_for(refused, "apply refused while the flow runs")
    replicator.stop()
    replicator.wait()
    load.join()
    _load(source.bootstrap, topic, "late", 30)  # certainly after the replicator stopped
    assert observe_once(config) == {FLOW: {}}  # what it left behind, measured on X
    source.kill()

    # with X down: plan (CLI, json), bad input, apply, rerun
    run = [sys.executable, "-m", "mirrorlake.cli", "failover", "plan", "-c", str(config_file), "--flow", FLOW]
    out = subprocess.run([*run, "--groups", f"{app}|{busy}", "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    reported = {(p["source_topic"], p["partition"]): p for p in plan["partitions"]}
    assert all(reported[(topic, p)]["exact"] for p in (0, 1))
    (app_plan,) = [g for g in plan["groups"] if g["group"] == app]
    assert [(r["method"], r["records_lost"], r["records_reread"]) for r in app_plan["partitions"]] == [
        ("exact", 0, 0)
    ] * 2
    bad = subprocess.run([*run, "--groups", "no-such-group"], capture_output=True, text=True)
    # the last line is the error; warnings before it name the bad records other tests planted in B's state topic
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode == 21 and last.startswith("error: --groups 'no-such-group' matches no group"), bad
    assert "Traceback" not in bad.stderr
    with pytest.raises(ConfigError, match="unknown flow"):
        plan_failover(config, "Q->B")

    on_b = {p: read_partition(b, remote, p) for p in (0, 1)}
    at_ms = on_b[0][350].timestamp  # resume at a time: a few records before the group's position
    timed = plan_failover(config, FLOW, groups=app, at_ms=at_ms)
    (timed_app,) = timed.groups
    with pytest.raises(FailoverError, match="in the future"):
        plan_failover(config, FLOW, groups=app, at_ms=timed.planned_at_ms + 3_600_000)

    member = _member_on_target(b, busy, remote)
    try:
        first = apply_failover(config, FLOW, groups=f"{app}|{busy}", stale_after_s=0)
    finally:
        member.close()
    outcomes = {g.group: g.outcome for g in first.groups}
    assert outcomes == {app: "moved", busy: "skipped_active_on_target"}, first.groups
    assert first.event is not None and first.event.groups == (app,)
    apply = [sys.executable, "-m", "mirrorlake.cli", "failover", "apply", "-c", str(config_file), "--flow", FLOW]
    again = subprocess.run([*apply, "--groups", app, "--stale-after", "0"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"group {app}: skipped_already_failed_over" in again.stdout and "nothing moved" in again.stdout

    # consumers resume on B; failback needs X: a clear error while it is down; X comes back and is
    # compared by content
    read_on_b = set(_resume_on_target(b, app, remote))
    impatient = tmp_path / "impatient.yaml"
    impatient.write_text(yaml.safe_dump({**data, "connect_timeout_seconds": 1}))
    failback = [sys.executable, "-m", "mirrorlake.cli", "failback", "apply", "--flow", FLOW, "--recover"]
    down = subprocess.run([*failback, "-c", str(impatient)], capture_output=True, text=True)
    last = down.stderr.strip().splitlines()[-1]
    assert down.returncode == ClusterUnreachableError.exit_code and "cluster X" in last, down.stderr
    assert "Traceback" not in down.stderr
    source.restart()
    committed = {0: 400, 1: 300}
    export = tmp_path / "never-replicated.jsonl"
    never_replicated = failback_plan(config, FLOW, export=export)
    # the observer watermarked X's heartbeats too, never copied to B: the replicators' records, not recovered
    assert {r.source_topic for r in never_replicated} == {topic}
    assert export.stat().st_mode & 0o777 == 0o600  # record contents: the user's alone
    lost_on_x: dict[int, list] = {}
    for p in (0, 1):
        on_x = read_partition(source.bootstrap, topic, p)
        should_read = [r for r in on_x if r.offset >= committed[p]]
        lost = [r for r in should_read if r.key not in read_on_b]
        lost_on_x[p] = lost
        reread = [r for r in on_x if r.offset < committed[p] and r.key in read_on_b]
        assert len(lost) == reported[(topic, p)]["records"] > 0, (p, len(lost), reported[(topic, p)])
        assert sum(len(r.key or b"") + len(r.value or b"") for r in lost) == reported[(topic, p)]["bytes"]
        assert reread == []
        row = next(r for r in app_plan["partitions"] if r["partition"] == p)
        assert row["records_unreplicated"] == len(lost)
        # the time-based plan's cost, against the clusters' content
        offset_on_x = {r.key: r.offset for r in on_x}
        t = next((r.offset for r in on_b[p] if r.timestamp >= at_ms), len(on_b[p]))
        after_t = [offset_on_x[r.key] for r in on_b[p] if r.offset >= t]
        copied = {offset_on_x[r.key] for r in on_b[p]}
        timed_row = next(r for r in timed_app.partitions if r.partition == p)
        assert timed_row.target_offset == t and timed_row.method == "timestamp"
        assert timed_row.records_reread == sum(1 for u in after_t if u < committed[p])
        assert timed_row.records_lost == len({u for u in copied if u >= committed[p]} - set(after_t))
        assert (timed_row.exact_offset, timed_row.lost_at_exact, timed_row.reread_at_exact) == (
            row["target_offset"],
            0,
            0,
        )
        # failback: what never reached B, listed and exported, equals what was lost
        (never,) = [r for r in never_replicated if r.source_topic == topic and r.partition == p]
        assert never.records == len(lost) and never.bytes == reported[(topic, p)]["bytes"]
        exported = [json.loads(line) for line in export.read_text().splitlines()]
        keys = [base64.b64decode(e["key"]) for e in exported if e["topic"] == topic and e["partition"] == p]
        assert keys == [r.key for r in lost]

    # --recover re-produces exactly those records to B (key, value, headers, timestamp); a rerun adds none
    recovered = subprocess.run([*failback, "-c", str(config_file)], capture_output=True, text=True)
    assert recovered.returncode == 0 and "failback event" in recovered.stdout, recovered.stderr
    again = subprocess.run([*failback, "-c", str(config_file), "--format", "json"], capture_output=True, text=True)
    assert again.returncode == 0 and json.loads(again.stdout)["recover"]["ranges"] == [], again.stderr
    for p in (0, 1):
        added = read_partition(b, remote, p)[len(on_b[p]) :]
        content = [(r.key, r.value, r.headers, r.timestamp) for r in added]
        assert content == [(r.key, r.value, r.headers, r.timestamp) for r in lost_on_x[p]], p
    left = {(r.source_topic, r.partition): r for r in failback_plan(config, FLOW)}
    assert [(left[(topic, p)].records, left[(topic, p)].recovered_records) for p in (0, 1)] == [
        (0, len(lost_on_x[0])),
        (0, len(lost_on_x[1])),
    ]

    # default policy: producers wrote to B's own topic; B->X mirrors it to X's B.<topic>, never X.<topic>
    ensure_topic(b, topic, 2)
    _load(b, topic, "b", 20)
    _commit(b, app, [(topic, 0, 5), (topic, 1, 5)])  # app also read 5 of B's own records per partition
    back_data = {**data, "flows": [*data["flows"], {"source": "B", "target": "X", "topics": [topic], "audit": False}]}
    back_file = tmp_path / "failback.yaml"
    back_file.write_text(yaml.safe_dump(back_data))
    failback = [sys.executable, "-m", "mirrorlake.cli", "failback", "apply", "-c", str(back_file), "--flow", FLOW]
    seeded = subprocess.run([*failback, "--reverse", "--format", "json"], capture_output=True, text=True)
    assert seeded.returncode == 0, seeded.stderr
    assert {s["outcome"] for s in json.loads(seeded.stdout)["reverse"] if s["topic"] == remote} == {"not_selected"}
    Replicator(
        parse_config(back_data, source="test_failover_e2e"), flows=["B->X"], status_port=None
    ).run_until_caught_up()
    on_x_back = [r.key for p in (0, 1) for r in read_partition(source.bootstrap, f"B.{topic}", p)]
    assert sorted(on_x_back) == sorted(f"b-{i}".encode() for i in range(20))
    assert f"B.{remote}" not in AdminClient({"bootstrap.servers": source.bootstrap}).list_topics(timeout=30).topics
    moved = subprocess.run([*failback, "--groups", app], capture_output=True, text=True)
    assert f"group {app}: moved" in moved.stdout, moved.stdout + moved.stderr
    read_back = _resume_on_target(source.bootstrap, app, f"B.{topic}")
    assert sorted(read_back) == sorted(r.key for p in (0, 1) for r in read_partition(b, topic, p)[5:])


def test_failback_under_the_identity_policy_mirrors_back_only_what_b_gained(
    source: Source, kafka_clusters, unique_topic, tmp_path: Path
):
    """Aiven's active/passive recipe: same topic names on both sides. X->B, failover, producers on B,
    X back: the never-replicated records go to B, B->X copies only B's own records, groups move back."""
    source.restart()  # no-op when it runs
    b = kafka_clusters.bootstrap("B")
    topic, app, busy = unique_topic("fb-id"), unique_topic("fb-id-app"), unique_topic("fb-id-busy")
    ensure_topic(source.bootstrap, topic, 2)
    _load(source.bootstrap, topic, "a", 400)
    _commit(source.bootstrap, app, [(topic, 0, 50), (topic, 1, 60)])
    data = {**_config_data(kafka_clusters, source, topic), "replication_policy": {"class": "identity"}}
    config = parse_config(data, source="test_failover_e2e")
    Replicator(config, status_port=None).run_until_caught_up()
    _load(source.bootstrap, topic, "late", 20)  # never replicated
    assert [g.outcome for g in apply_failover(config, FLOW, groups=app, stale_after_s=0).groups] == ["moved"]
    copies = {p: len(read_partition(b, topic, p)) for p in (0, 1)}
    _load(b, topic, "b", 30)  # producers write on B after the failover
    # app read some of B's own records on p0 and stopped inside A's copies on p1
    _commit(b, app, [(topic, 0, copies[0] + 5), (topic, 1, copies[1] - 50)])
    _commit(b, busy, [(topic, 0, copies[0]), (topic, 1, copies[1])])
    with pytest.raises(ConfigError, match="no reverse flow B->X"):
        seed_reverse_flow(config, FLOW)
    with pytest.raises(ConfigError, match="unknown flow"):
        recover_never_replicated(config, "Q->B")

    back_data = {
        **data,
        "provenance_header": True,
        "flows": [*data["flows"], {"source": "B", "target": "X", "topics": [topic], "audit": False}],
    }
    back_file = tmp_path / "failback.yaml"
    back_file.write_text(yaml.safe_dump(back_data))
    failback = [sys.executable, "-m", "mirrorlake.cli", "failback", "apply", "-c", str(back_file), "--flow", FLOW]
    first = subprocess.run([*failback, "--recover", "--reverse", "--stale-after", "0", "--format", "json"],
                           capture_output=True, text=True)  # fmt: skip
    assert first.returncode == 0, first.stderr
    steps = json.loads(first.stdout)
    # (the module's other tests copied other topics over the flow X->B: those rows are theirs)
    assert sum(r["records"] for r in steps["recover"]["ranges"] if r["source_topic"] == topic) == 20
    assert [
        (s["topic"], s["partition"], s["offset"], s["outcome"]) for s in steps["reverse"] if s["topic"] == topic
    ] == [(topic, p, copies[p], "seeded") for p in (0, 1)]
    back = parse_config(back_data, source="test_failover_e2e")
    Replicator(back, flows=["B->X"], status_port=None).run_until_caught_up()

    # on X: A's records once (none came back), B's own records once each
    on_x = [r.key for p in (0, 1) for r in read_partition(source.bootstrap, topic, p)]
    assert len(on_x) == len(set(on_x)) == 400 + 20 + 30
    assert {k for k in on_x if k.startswith(b"b-")} == {f"b-{i}".encode() for i in range(30)}

    member = _member_on_target(source.bootstrap, busy, topic)
    try:
        moved = subprocess.run([*failback, "--groups", f"{app}|{busy}"], capture_output=True, text=True)
    finally:
        member.close()
    assert moved.returncode == 0, moved.stderr
    assert f"group {app}: moved" in moved.stdout and f"group {busy}: skipped_active_on_target" in moved.stdout
    again = subprocess.run([*failback, "--groups", app], capture_output=True, text=True)
    assert f"group {app}: skipped_already_failed_back" in again.stdout and "nothing moved" in again.stdout

    # app resumes on X and loses nothing it had not read on B; it re-reads only B's 5 records it had
    # read on p0 (on X they follow the recovered records it had not read)
    read = _resume_on_target(source.bootstrap, app, topic)
    on_b = {p: read_partition(b, topic, p) for p in (0, 1)}
    unread_on_b = [r.key for p, d in ((0, copies[0] + 5), (1, copies[1] - 50)) for r in on_b[p][d:]]
    reread = [r.key for r in on_b[0][copies[0] : copies[0] + 5]]
    assert sorted(read) == sorted(unread_on_b + reread)
