"""MM2's own client library (``RemoteClusterUtils``/``MirrorClient`` from ``connect-mirror-client``, in a
JVM) against clusters replicated by mirrorlake along a chain P->Q->R.

What a Java application written for MM2 calls when it fails over must answer as for an MM2 deployment
of the same topology: ``translateOffsets`` reads ``<alias>.checkpoints.internal`` and must give, for
every group and partition, the offset ``mirrorlake translate`` gives and the ground truth (every copy
on the target, matched by content) asks for; ``replicationHops``, ``upstreamClusters``,
``heartbeatTopics`` and ``checkpointTopics`` come from topic names, and an MM2 running P->Q and Q->R
(heartbeat connectors for every pair, as MM2's dedicated mode runs them) leaves exactly these names:
on R ``heartbeats``, ``Q.heartbeats``, ``Q.P.heartbeats``, ``Q.checkpoints.internal``; on Q
``heartbeats``, ``P.heartbeats``, ``P.checkpoints.internal``; on P ``heartbeats``.

The session's clusters A, B, C are shared by every test, so this one names them P, Q, R with a
suffix of its own: its MM2 topics (``Q1a2b3c.P1a2b3c.heartbeats``, ...) are its alone, and answers
are compared on its own names (``heartbeats`` itself is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.translation_vs_mm2 import commit_groups
from mirrorlake.groundtruth import GroundTruth, copies_by_content, read_partition
from mirrorlake.traffic import ensure_topic, produce_sample_traffic
from replicator.client.state_snapshot import load_snapshot
from replicator.config import parse_config
from replicator.flow.runtime import Replicator
from replicator.mm2.records import decode_offset_sync
from tests.mm2_client_probe import Mm2ClientProbe
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka

PARTITIONS = 2


@pytest.fixture(scope="module")
def probe(kafka_clusters, tmp_path_factory) -> Mm2ClientProbe:
    return Mm2ClientProbe.compiled(kafka_clusters, tmp_path_factory)


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _all_copied(source: str, source_topic: str, target: str, target_topic: str) -> bool:
    try:
        return all(
            {u for u, _d in copies_by_content(src, read_partition(target, target_topic, p))} == {r.offset for r in src}
            for p in range(PARTITIONS)
            if (src := read_partition(source, source_topic, p)) is not None
        )
    except KafkaException:
        return False  # the remote topic does not exist yet


def _truth(source: str, source_topic: str, target: str, target_topic: str) -> dict[int, GroundTruth]:
    return {
        p: GroundTruth(
            copies_by_content(read_partition(source, source_topic, p), read_partition(target, target_topic, p))
        )
        for p in range(PARTITIONS)
    }


def _cli_translate(config_path: Path, flow: str, group: str) -> dict[tuple[str, int], int]:
    run = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "translate", "-c", str(config_path), "--flow", flow, "--group", group]
        + ["--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return {(r["topic"], r["partition"]): r["offset"] for r in json.loads(run.stdout)["offsets"]}


def test_mm2_client_answers_for_a_chain_replicated_by_mirrorlake(kafka_clusters, probe, unique_topic, tmp_path):
    tag = uuid.uuid4().hex[:6]
    P, Q, R = f"P{tag}", f"Q{tag}", f"R{tag}"  # noqa: N806 (cluster aliases)
    boot = {P: kafka_clusters.bootstrap("A"), Q: kafka_clusters.bootstrap("B"), R: kafka_clusters.bootstrap("C")}
    topic = unique_topic("mm2client").replace("-", "_")
    on_q, on_r = f"{P}.{topic}", f"{Q}.{P}.{topic}"
    ensure_topic(boot[P], topic, PARTITIONS)
    produce_sample_traffic(
        boot[P], topic, records=400, partitions=PARTITIONS, transactions=4, records_per_transaction=20
    )
    ends = _ends(boot[P], topic)
    at = {
        "g_first": lambda end: 0,
        "g_mid": lambda end: 137,
        "g_in_txns": lambda end: end - 9,
        "g_end": lambda end: end,
    }
    groups_p = {f"{tag}-{g}": {p: f(ends[p]) for p in range(PARTITIONS)} for g, f in at.items()}
    commit_groups(boot[P], topic, groups_p)

    flow = {
        "groups": [f"{tag}-.*"],
        "emit_checkpoints_interval_seconds": 1,
        "emit_heartbeats_interval_seconds": 0.5,
        "audit": False,
    }
    doc = {
        "clusters": {alias: {"bootstrap_servers": b} for alias, b in boot.items()},
        "flows": [
            {"source": P, "target": Q, "topics": [topic], **flow},
            {"source": Q, "target": R, "topics": [on_q], **flow},
        ],
        "state_topic": f"mirrorlake.mm2client-{tag}",
    }
    config_path = tmp_path / "chain.yaml"
    config_path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    replicator = Replicator(parse_config(doc), status_port=None)
    replicator.start()
    try:
        # P->Q: every group of P, once everything is copied
        wait_for(lambda: _all_copied(boot[P], topic, boot[Q], on_q), f"{on_q} copied", timeout_s=120, every_s=1)
        truth_q = _truth(boot[P], topic, boot[Q], on_q)
        wanted_q = {g: {(on_q, p): truth_q[p].translate(c) for p, c in by_p.items()} for g, by_p in groups_p.items()}

        def translated(alias: str, target: str, wanted: dict[str, dict[tuple[str, int], int | None]]) -> bool:
            answers = probe.ask(boot[target], *(f"translate:{alias}:{g}" for g in wanted))
            return all(answers.translated(alias, g) == w for g, w in wanted.items())

        wait_for(lambda: translated(P, Q, wanted_q), f"translateOffsets on {Q}", timeout_s=120, every_s=1)
        for group, wanted in wanted_q.items():
            assert _cli_translate(config_path, f"{P}->{Q}", group) == wanted

        # Q->R: groups consuming the replica on Q fail over to R
        groups_q = {f"{tag}-q-first": {0: 0, 1: 5}, f"{tag}-q-mid": {0: 100, 1: 150}}
        groups_q[f"{tag}-q-end"] = _ends(boot[Q], on_q)
        commit_groups(boot[Q], on_q, groups_q)
        wait_for(lambda: _all_copied(boot[Q], on_q, boot[R], on_r), f"{on_r} copied", timeout_s=120, every_s=1)
        truth_r = _truth(boot[Q], on_q, boot[R], on_r)
        wanted_r = {g: {(on_r, p): truth_r[p].translate(c) for p, c in by_p.items()} for g, by_p in groups_q.items()}
        wait_for(lambda: translated(Q, R, wanted_r), f"translateOffsets on {R}", timeout_s=120, every_s=1)
        for group, wanted in wanted_r.items():
            assert _cli_translate(config_path, f"{Q}->{R}", group) == wanted

        topology = ("upstreamClusters", "heartbeatTopics", "checkpointTopics")

        def mine(names: set[str]) -> set[str]:
            return {n for n in names if n == "heartbeats" or tag in n}

        def answers(alias: str, *hops: str) -> tuple[dict[str, set[str]], dict[str, int]]:
            a = probe.ask(boot[alias], *topology, *(f"hops:{h}" for h in hops))
            return {k: mine(a.names(k)) for k in topology}, {h: a.hops(h) for h in hops}

        expected = {
            R: (
                {
                    "upstreamClusters": {P, Q},
                    "heartbeatTopics": {"heartbeats", f"{Q}.heartbeats", f"{Q}.{P}.heartbeats"},
                    "checkpointTopics": {f"{Q}.checkpoints.internal"},
                },
                {P: 2, Q: 1},
            ),
            Q: (
                {
                    "upstreamClusters": {P},
                    "heartbeatTopics": {"heartbeats", f"{P}.heartbeats"},
                    "checkpointTopics": {f"{P}.checkpoints.internal"},
                },
                {P: 1, R: -1},
            ),
            P: ({"upstreamClusters": set(), "heartbeatTopics": {"heartbeats"}, "checkpointTopics": set()}, {Q: -1}),
        }
        for alias, (names, hops) in expected.items():
            try:
                wait_for(lambda a=alias, n=names, h=hops: answers(a, *h) == (n, h), f"MirrorClient on {alias}", 60, 1)
            except AssertionError:
                assert answers(alias, *hops) == (names, hops), f"MirrorClient on {alias}"  # shows what differs
                raise
    finally:
        replicator.stop()
        replicator.wait()


def test_mm2_offset_syncs_name_real_copies_up_to_the_last_record(kafka_clusters, unique_topic):
    tag = uuid.uuid4().hex[:6]
    P, Q = f"P{tag}", f"Q{tag}"  # noqa: N806 (cluster aliases)
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("mm2syncs").replace("-", "_")
    ensure_topic(a, topic, PARTITIONS)
    produce_sample_traffic(a, topic, records=300, partitions=PARTITIONS, transactions=4, records_per_transaction=20)
    doc = {
        "clusters": {P: {"bootstrap_servers": a}, Q: {"bootstrap_servers": b}},
        "flows": [{"source": P, "target": Q, "topics": [topic], "emit_mm2_offset_syncs": True, "audit": False}],
        "state_topic": f"mirrorlake.mm2syncs-{tag}",
    }
    Replicator(parse_config(doc), status_port=None).run_until_caught_up()

    syncs_topic = f"mm2-offset-syncs.{Q}.internal"  # on the source, MM2's default location
    records = read_partition(a, syncs_topic, 0)
    syncs = [decode_offset_sync(r.key, r.value) for r in records]
    assert {s.topic for s in syncs} <= {topic, "heartbeats"}  # heartbeats topics always travel
    syncs = [s for s in syncs if s.topic == topic]
    for p in range(PARTITIONS):
        source = read_partition(a, topic, p)
        copies = set(copies_by_content(source, read_partition(b, f"{P}.{topic}", p)))
        mine = [(s.upstream_offset, s.downstream_offset) for s in syncs if s.partition == p]
        assert mine and set(mine) <= copies  # every sync is a record and where it landed
        assert max(u for u, _d in mine) == source[-1].offset  # up to the last copied record


def test_mm2_offset_syncs_turned_on_later_start_from_the_state_snapshot(kafka_clusters, unique_topic):
    """The syncs a state snapshot covers are not in the log the task reads: it writes them from the snapshot."""
    tag = uuid.uuid4().hex[:6]
    P, Q = f"P{tag}", f"Q{tag}"  # noqa: N806 (cluster aliases)
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("mm2snap").replace("-", "_")
    ensure_topic(a, topic, PARTITIONS)
    produce_sample_traffic(a, topic, records=200, partitions=PARTITIONS)
    doc = {
        "clusters": {P: {"bootstrap_servers": a}, Q: {"bootstrap_servers": b}},
        "flows": [{"source": P, "target": Q, "topics": [topic], "emit_heartbeats": False}],  # audits read the log
        "state_topic": f"mirrorlake.mm2snap-{tag}",
    }
    Replicator(parse_config(doc), status_port=None).run_until_caught_up()  # its last round writes a snapshot
    snap = load_snapshot({"bootstrap.servers": b}, doc["state_topic"], f"{P}->{Q}")
    assert snap is not None and snap.segments
    doc["flows"][0]["emit_mm2_offset_syncs"] = True
    Replicator(parse_config(doc), status_port=None).run_until_caught_up()  # nothing new to copy

    syncs = [decode_offset_sync(r.key, r.value) for r in read_partition(a, f"mm2-offset-syncs.{Q}.internal", 0)]
    for p in range(PARTITIONS):
        last = read_partition(a, topic, p)[-1].offset
        assert max(s.upstream_offset for s in syncs if s.topic == topic and s.partition == p) == last


def test_takeover_from_mm2_names_what_is_wrong(kafka_clusters, tmp_path):
    doc = {
        "clusters": {alias: {"bootstrap_servers": kafka_clusters.bootstrap(alias)} for alias in ("A", "B")},
        "flows": [{"source": "A", "target": "B"}, {"source": "B", "target": "A", "exactly_once": True}],
    }
    config_path = tmp_path / "takeover.yaml"
    config_path.write_text(yaml.safe_dump(doc), encoding="utf-8")

    def takeover(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mirrorlake.cli", "takeover-mm2", str(config_path), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    missing = takeover("--flow", "A->B", "--offsets-topic", f"no-such-topic-{uuid.uuid4().hex[:8]}")
    assert missing.returncode == 2 and "MM2's offsets topic 'no-such-topic-" in missing.stderr, missing.stderr
    eos = takeover("--flow", "B->A")
    assert eos.returncode == 2 and "for at-least-once flows" in eos.stderr, eos.stderr
    unknown = takeover("--flow", "A->C")
    assert unknown.returncode == 2 and "unknown flow 'A->C'" in unknown.stderr
    assert not any("Traceback" in r.stderr for r in (missing, eos, unknown))
