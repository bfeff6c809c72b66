"""``mirrorlake import-mm2`` on topics written by a real MirrorMaker 2 (Kafka 4.3.1, dedicated mode).

MM2 copies a topic A->B (with transactions on A, so MM2's syncs see upstream gaps) while consumer
groups have committed offsets on A; once it wrote syncs, checkpoints and heartbeats it is stopped by
PID, a garbage record is put into each of its topics, and the import runs. The test decodes MM2's
records on its own (``struct``) and compares them with the imported events.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.failover import FailoverCosts
from bench.mm2 import MirrorMaker2, Mm2Settings, checkpoint_properties
from bench.translation_vs_mm2 import commit_groups
from mirrorlake.groundtruth import copies_by_content, read_partition
from mirrorlake.localkafka import require_java, resolve_kafka_jars
from mirrorlake.traffic import ensure_topic, produce_sample_traffic
from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.client.translation import translate_offsets
from replicator.config import load_config
from replicator.config.cache import cache_root
from replicator.events import Checkpoint, Event, Heartbeat, OffsetSync
from replicator.flow.runtime import Replicator
from replicator.mm2.importer import Mm2Importer
from replicator.mm2.records import (
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
    encode_checkpoint,
    encode_heartbeat,
    encode_offset_sync,
)
from replicator.mm2.takeover import mm2_source_positions
from tests.mm2_client_probe import Mm2ClientProbe
from tests.test_mm2_records import enc_checkpoint, enc_offset_sync
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka

SYNCS, CHECKPOINTS = "mm2-offset-syncs.B.internal", "A.checkpoints.internal"  # on A, on B
PARTITIONS = 2


# -- reading MM2's topics independently of replicator.mm2.records ---------------------------------


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def raw_syncs(bootstrap: str) -> list[tuple[str, int, int, int]]:
    out = []
    for r in read_partition(bootstrap, SYNCS, 0):
        try:
            topic, pos = _string(r.key, 0)
            (partition,) = struct.unpack_from(">i", r.key, pos)
            out.append((topic, partition, *struct.unpack_from(">qq", r.value, 0)))
        except (struct.error, TypeError, UnicodeDecodeError):
            continue  # the garbage record
    return out


def raw_checkpoints(bootstrap: str) -> list[tuple[str, str, int, int, int]]:
    out = []
    for r in read_partition(bootstrap, CHECKPOINTS, 0):
        if r.value[:2] != b"\x00\x00":
            continue  # the garbage record (version 7)
        group, pos = _string(r.key, 0)
        topic, pos = _string(r.key, pos)
        (partition,) = struct.unpack_from(">i", r.key, pos)
        out.append((group, topic, partition, *struct.unpack_from(">qq", r.value, 2)))
    return out


def raw_heartbeats(bootstrap: str, topic: str) -> list[tuple[str, str, int]]:
    out = []
    for r in read_partition(bootstrap, topic, 0):
        if r.value is None or len(r.value) != 10 or r.value[:2] != b"\x00\x00":
            continue  # the garbage record, or a mirrorlake heartbeat of another test
        source, pos = _string(r.key, 0)
        target, _ = _string(r.key, pos)
        out.append((source, target, struct.unpack_from(">q", r.value, 2)[0]))
    return out


def topics_on(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def append(bootstrap: str, topic: str, key: bytes | None, value: bytes | None) -> int:
    """Produce one record; returns its offset."""
    landed: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, key, on_delivery=lambda err, msg: landed.append(msg.offset()))
    producer.flush(10)
    return landed[0]


# -- one MM2 run for the module -------------------------------------------------------------------


@dataclass(frozen=True)
class Mm2Run:
    topic: str
    committed: dict[tuple[str, int], int]  # (group, partition) -> committed offset on A
    garbage: frozenset[tuple[str, str, int]]  # (alias, topic, offset) of the garbage records
    offsets_topic: str  # MM2's source positions (Connect's offsets topic on B)


@pytest.fixture(scope="module")
def mm2_run(kafka_clusters, unique_topic, tmp_path_factory) -> Mm2Run:
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("mm2import").replace("-", "_")
    ensure_topic(a, topic, PARTITIONS)
    produce_sample_traffic(a, topic, records=600, partitions=PARTITIONS, transactions=4, records_per_transaction=20)
    ends = {
        p: Consumer({"bootstrap.servers": a, "group.id": "x"}).get_watermark_offsets(
            TopicPartition(topic, p), timeout=10
        )[1]
        for p in range(PARTITIONS)
    }
    groups = {"g_first": lambda end: 1, "g_mid": lambda end: 137, "g_lagging": lambda end: 43, "g_end": lambda end: end}
    offsets = {f"{topic}-{group}": {p: at(ends[p]) for p in range(PARTITIONS)} for group, at in groups.items()}
    commit_groups(a, topic, offsets)
    committed = {(group, p): o for group, by_p in offsets.items() for p, o in by_p.items()}

    mm2 = MirrorMaker2(
        java=require_java(),
        lib_dir=resolve_kafka_jars(kafka_clusters.config().local_kafka.version, cache_root()),
        work_dir=tmp_path_factory.mktemp("mm2-import"),
        source=a,
        target=b,
        topics=[topic],
        settings=Mm2Settings(
            tuned_producer=False,
            heap="512m",
            source_alias="A",
            target_alias="B",
            properties=checkpoint_properties(offset_lag_max=10),
        ),
    )
    mm2.start()
    try:
        seen: dict[str, object] = {}

        def mm2_is_done() -> bool:
            try:
                return mm2_wrote_everything()
            except KafkaException:
                return False  # a topic MM2 just created has no leader yet

        def mm2_wrote_everything() -> bool:
            assert mm2.alive(), mm2.log_tail()
            seen["topics"] = (sorted(topics_on(a)), sorted(topics_on(b)))
            if not {CHECKPOINTS, "heartbeats"} <= topics_on(b) or SYNCS not in topics_on(a):
                return False
            seen["checkpoints"] = latest = {(g, p): u for g, _t, p, u, _d in raw_checkpoints(b)}
            seen["heartbeats"] = len(raw_heartbeats(b, "heartbeats"))
            if "A.heartbeats" not in topics_on(b) or not raw_heartbeats(b, "A.heartbeats"):
                return False  # B->A's heartbeats (written to A by MM2 for the disabled flow) copied back to B
            # MM2 checkpoints only a group whose offset is at or past the oldest sync it kept, and the
            # syncs its checkpoint task reads at start-up keep only the latest per partition
            # (OffsetSyncStore, KAFKA-14666): when that task starts after the copy, only g_end is
            # translatable. The tests check the other groups wherever MM2 did checkpoint them.
            required = {k: c for k, c in committed.items() if k[0].endswith("g_end")}
            return all(latest.get(k) == c for k, c in required.items()) and seen["heartbeats"] >= 2  # type: ignore[operator]

        try:
            wait_for(mm2_is_done, "MM2 to checkpoint every group and emit heartbeats", timeout_s=120, every_s=1.0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: committed {committed}, seen {seen}") from None
    finally:
        mm2.stop()
    garbage = {
        ("A", SYNCS, append(a, SYNCS, b"\x00", struct.pack(">qq", 1, 1))),  # key too short
        ("B", CHECKPOINTS, append(b, CHECKPOINTS, b"\x00\x01g", struct.pack(">hqq", 7, 0, 0) + b"\x00\x00")),
        ("B", "heartbeats", append(b, "heartbeats", b"\x00\x01A\x00\x01B", b"\x00\x00\x00")),  # truncated
    }
    return Mm2Run(topic, committed, frozenset(garbage), mm2.offsets_topic)


def _write_config(path: Path, kafka_clusters, state_topic: str) -> Path:
    doc = {
        "clusters": {alias: {"bootstrap_servers": kafka_clusters.bootstrap(alias)} for alias in ("A", "B", "C")},
        "flows": [{"source": "A", "target": "B"}],
        "state_topic": state_topic,
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", *args], capture_output=True, text=True, timeout=300, check=False
    )


def _events(bootstrap: str, state_topic: str) -> list[Event]:
    read = read_state_log({"bootstrap.servers": bootstrap}, state_topic)
    assert not read.bad
    return read.events


def test_cli_imports_what_mm2_wrote_and_a_rerun_imports_nothing(mm2_run, kafka_clusters, unique_topic, tmp_path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    state_topic = unique_topic("mirrorlake.mm2events")
    config = _write_config(tmp_path / "mm2-import.yaml", kafka_clusters, state_topic)

    run = _cli("import-mm2", str(config), "--flow", "A->B")
    assert run.returncode == 0, run.stderr
    reported = {line.split(": ", 2)[1] for line in run.stdout.splitlines() if line.strip().startswith("undecodable:")}
    for alias, topic, offset in mm2_run.garbage:
        assert any(r.startswith(f"{alias}:{topic}[0]@{offset}") for r in reported), (run.stdout, alias, topic)
    events = _events(b, state_topic)
    assert len({e.event_id for e in events}) == len(events)
    assert {e.flow for e in events} == {"A->B"} and {e.replicator_id for e in events} == {"mm2-import"}

    # offset syncs: exactly MM2's records, in MM2's terms
    syncs = [e for e in events if isinstance(e, OffsetSync)]
    mm2_syncs = raw_syncs(a)
    assert Counter((s.source_topic, s.partition, s.upstream_offset, s.downstream_offset) for s in syncs) == Counter(
        mm2_syncs
    )
    assert {(s.source_topic, s.target_topic, s.reason, s.previous_upstream_offset) for s in syncs} <= {
        (mm2_run.topic, f"A.{mm2_run.topic}", "mm2", None),
        ("heartbeats", "A.heartbeats", "mm2", None),  # MM2 always replicates heartbeats topics
    }
    assert f"A->B: imported {len(syncs)} offset syncs" in run.stdout

    # checkpoints: MM2's records, and the latest of each group and partition is the group's commit on A
    # (of this run's groups: mirrorlake flows of other tests write A.checkpoints.internal on B too)
    run_groups = {group for group, _p in mm2_run.committed}
    cps = [e for e in events if isinstance(e, Checkpoint) and e.group in run_groups]
    mm2_cps = [c for c in raw_checkpoints(b) if c[0] in run_groups]
    assert mm2_cps
    assert Counter(
        (c.group, c.target_topic, c.partition, c.upstream_offset, c.downstream_offset) for c in cps
    ) == Counter(mm2_cps)
    assert {(c.source_topic, c.method, c.error_bound) for c in cps} == {(mm2_run.topic, "mm2", None)}
    latest: dict[tuple[str, int], Checkpoint] = {}
    for c in cps:
        if (c.group, c.partition) not in latest or c.upstream_offset > latest[(c.group, c.partition)].upstream_offset:
            latest[(c.group, c.partition)] = c
    checkpointed = {k: c.upstream_offset for k, c in latest.items() if k in mm2_run.committed}
    assert checkpointed == {k: c for k, c in mm2_run.committed.items() if k in checkpointed}
    assert {k for k in mm2_run.committed if k[0].endswith("g_end")} <= set(checkpointed)

    # translation of the imported syncs: loses nothing, re-reads no more than MM2's own checkpoint
    index = MappingIndex()
    index.add(syncs)
    for p in range(PARTITIONS):
        costs = FailoverCosts(
            copies_by_content(read_partition(a, mm2_run.topic, p), read_partition(b, f"A.{mm2_run.topic}", p))
        )
        for (group, partition), c in mm2_run.committed.items():
            if partition != p or (group, p) not in latest:
                continue
            ours = index.translate("A->B", mm2_run.topic, p, c)
            theirs = latest[(group, p)].downstream_offset
            assert ours is not None and theirs <= ours.downstream, (group, p, c)
            assert costs.cost(c, theirs).lost == costs.cost(c, ours.downstream).lost == 0
            assert costs.cost(c, ours.downstream).reread <= costs.cost(c, theirs).reread

    # heartbeats: each of MM2's A->B heartbeats on B, with its hop path
    beats = [e for e in events if isinstance(e, Heartbeat)]
    direct = [h for h in beats if h.topic == "heartbeats"]
    assert Counter((h.origin_cluster, h.origin_timestamp_ms) for h in direct) == Counter(
        (s, ts) for s, _t, ts in raw_heartbeats(b, "heartbeats") if s == "A"
    )
    assert direct and {h.hop_path for h in direct} == {("A", "B")}
    # only this test's clusters: other tests' MM2-format heartbeats (P->Q chains) reach A.heartbeats too
    replicated = [h for h in beats if h.topic == "A.heartbeats" and set(h.hop_path) <= {"A", "B"}]
    assert {h.hop_path for h in replicated} == {("B", "A", "B")}
    assert {h.origin_cluster for h in replicated} == {"B"}

    rerun = _cli("import-mm2", str(config))
    assert rerun.returncode == 0, rerun.stderr
    assert "A->B: imported 0 offset syncs, 0 checkpoints, 0 heartbeats" in rerun.stdout
    assert "0 undecodable" in rerun.stdout
    assert len(_events(b, state_topic)) == len(events)

    unknown = _cli("import-mm2", str(config), "--flow", "A->C")
    assert unknown.returncode == 2 and "error: unknown flow 'A->C'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_mirrorlakes_encoder_writes_the_bytes_mm2_wrote(mm2_run, kafka_clusters):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    garbage = {(topic, offset) for _alias, topic, offset in mm2_run.garbage}
    kinds = [
        (a, SYNCS, decode_offset_sync, encode_offset_sync),
        (b, CHECKPOINTS, decode_checkpoint, encode_checkpoint),
        (b, "heartbeats", decode_heartbeat, encode_heartbeat),
        (b, "A.heartbeats", decode_heartbeat, encode_heartbeat),
    ]
    for bootstrap, topic, decode, encode in kinds:
        records = [r for r in read_partition(bootstrap, topic, 0) if (topic, r.offset) not in garbage]
        records = [r for r in records if topic == SYNCS or r.value[:2] == b"\x00\x00"]  # version 0: MM2's
        assert records, topic
        assert [encode(decode(r.key, r.value)) for r in records] == [(r.key, r.value) for r in records], topic


def test_follow_imports_new_records_and_skips_bad_ones_without_stopping(
    mm2_run, kafka_clusters, unique_topic, tmp_path
):
    b = kafka_clusters.bootstrap("B")
    state_topic = unique_topic("mirrorlake.mm2follow")
    config = load_config(_write_config(tmp_path / "follow.yaml", kafka_clusters, state_topic))
    importer = Mm2Importer(config, config.flow("A->B"), group_id=unique_topic("mirrorlake.import-test"))
    stop = threading.Event()
    result = {}
    thread = threading.Thread(target=lambda: result.update(stats=importer.run(follow=True, stop=stop)))
    thread.start()
    try:
        wait_for(lambda: any(isinstance(e, Checkpoint) for e in _events(b, state_topic)), "the first import")
        # offset-syncs.topic.location=target: MM2 would write mm2-offset-syncs.A.internal on B
        ensure_topic(b, "mm2-offset-syncs.A.internal", 1)
        from replicator.mm2.records import Mm2Checkpoint, Mm2OffsetSync

        append(b, "mm2-offset-syncs.A.internal", *enc_offset_sync(Mm2OffsetSync("elsewhere", 0, 5, 3)))
        append(b, CHECKPOINTS, b"garbage", b"\xff")
        append(b, CHECKPOINTS, *enc_checkpoint(Mm2Checkpoint("late-group", f"A.{mm2_run.topic}", 1, 9, 8, "x")))

        def arrived() -> bool:
            events = _events(b, state_topic)
            return any(isinstance(e, Checkpoint) and e.group == "late-group" for e in events) and any(
                isinstance(e, OffsetSync) and e.source_topic == "elsewhere" for e in events
            )

        wait_for(arrived, "records written while following")
    finally:
        stop.set()
        thread.join(60)
    stats = result["stats"]
    assert stats.bad >= 2  # the module's garbage checkpoint and this one, skipped without stopping
    assert "B:mm2-offset-syncs.A.internal" in stats.topics and "A:mm2-offset-syncs.B.internal" in stats.topics
    late = [e for e in _events(b, state_topic) if isinstance(e, Checkpoint) and e.group == "late-group"]
    assert [(c.source_topic, c.upstream_offset, c.downstream_offset, c.metadata) for c in late] == [
        (mm2_run.topic, 9, 8, "x")
    ]


@pytest.fixture(scope="module")
def probe(kafka_clusters, tmp_path_factory) -> Mm2ClientProbe:
    return Mm2ClientProbe.compiled(kafka_clusters, tmp_path_factory)


def test_mirrorlake_takes_over_where_mm2_stopped_and_a_java_group_fails_over(
    mm2_run, kafka_clusters, unique_topic, tmp_path, probe
):
    """MM2 (stopped) copied A->B; mirrorlake continues from MM2's positions: every record once on B."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, remote = mm2_run.topic, f"A.{mm2_run.topic}"
    mm2_positions = mm2_source_positions({"bootstrap.servers": b}, mm2_run.offsets_topic, "A")
    assert {(topic, p) for p in range(PARTITIONS)} <= set(mm2_positions)
    before = {p: Counter(r.key for r in read_partition(b, remote, p)) for p in range(PARTITIONS)}  # MM2's copies
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True})
    for i in range(200):
        producer.produce(topic, f"after-{i}".encode(), f"after-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    group = f"{topic}-g_after_takeover"
    committed = {p: mm2_positions[(topic, p)] + 1 + 40 for p in range(PARTITIONS)}  # in what mirrorlake copies
    commit_groups(a, topic, {group: committed})

    state_topic = unique_topic("mirrorlake.takeover")
    doc = {
        "clusters": {alias: {"bootstrap_servers": kafka_clusters.bootstrap(alias)} for alias in ("A", "B")},
        "flows": [{"source": "A", "target": "B", "topics": [topic], "groups": [group], "audit": False}],
        "state_topic": state_topic,
        "heartbeats_topic": unique_topic("heartbeats"),  # MM2's own heartbeats topic stays MM2's
    }
    config_path = tmp_path / "takeover.yaml"
    config_path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    run = _cli("takeover-mm2", str(config_path), "--flow", "A->B", "--offsets-topic", mm2_run.offsets_topic)
    assert run.returncode == 0, run.stderr
    for p in range(PARTITIONS):
        assert f"{topic}[{p}] at {mm2_positions[(topic, p)] + 1}" in run.stdout
    Replicator(load_config(config_path), status_port=None).run_until_caught_up()

    for p in range(PARTITIONS):
        source, target = read_partition(a, topic, p), read_partition(b, remote, p)
        copied = Counter(r.key for r in target) - before[p]  # what mirrorlake added
        missing = Counter(r.key for r in source if r.key not in before[p])
        assert copied == missing, p  # every record MM2 had not copied, once; nothing MM2 copied
        assert before[p] and sum(missing.values()) >= 100  # MM2's part and the 100 new records of p
        costs = FailoverCosts(copies_by_content(source, target))
        translated = probe.ask(b, f"translate:A:{group}").translated("A", group)
        t = translated[(remote, p)]
        assert costs.cost(committed[p], t) == costs.cost(committed[p], costs.exact(committed[p]))
        assert (costs.cost(committed[p], t).lost, costs.cost(committed[p], t).reread) == (0, 0)
        mine = translate_offsets(load_config(config_path), "A->B", group)[(remote, p)]
        assert mine.downstream_offset == t
