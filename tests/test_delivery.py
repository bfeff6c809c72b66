"""Delivery guarantees under kill -9 and SIGTERM, with `mirrorlake replicate` as a real process.

A producer thread keeps writing to the source while the replicator is killed mid-stream, so the
kill always lands while records are in flight. Afterwards a fresh process runs until caught up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorlake.groundtruth import (
    GroundTruth,
    copies_by_content,
    mapping_from_events,
    read_partition,
    state_events,
    syncs_for,
)
from mirrorlake.traffic import ensure_topic
from replicator.client.mapping import TranslationMethod, translate
from replicator.client.mapping_index import MappingIndex
from replicator.config import load_config
from replicator.events import Lifecycle, SyncReason
from replicator.flow.runtime import Replicator

pytestmark = pytest.mark.kafka
PARTITIONS = 3
ROOT = Path(__file__).resolve().parents[1]


def write_config(kafka_clusters, tmp_path: Path, topic: str, state_topic: str | None = None, **flow_options) -> Path:
    data: dict = {
        "clusters": {a: {"bootstrap_servers": kafka_clusters.bootstrap(a)} for a in ("A", "B")},
        # no heartbeats: a heartbeat written after the last copy would make the rerun copy 1, not 0
        "flows": [
            {
                "source": "A",
                "target": "B",
                "topics": [topic],
                "sync_interval_seconds": 0.5,
                "emit_heartbeats": False,
                **flow_options,
            }
        ],
        "replicator_id": "delivery-test",
    }
    if state_topic is not None:  # a flow history of its own: no other test's process in it
        data["state_topic"] = state_topic
    path = tmp_path / "replicate.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_replicator(config: Path, *extra: str, log: Path | None = None) -> subprocess.Popen:
    """``mirrorlake replicate`` as a process; its stderr to ``log`` when given (a pipe nobody reads
    would fill and block a chatty process), else a pipe for ``communicate``."""
    with log.open("w") if log is not None else contextlib.nullcontext() as err:
        return subprocess.Popen(
            [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config), *extra],
            cwd=ROOT,
            stdout=subprocess.PIPE if log is None else subprocess.DEVNULL,
            stderr=err if log is not None else subprocess.PIPE,
            text=True,
        )


def produce_steadily(bootstrap: str, topic: str, stop: threading.Event, limit: int = 1_500_000) -> int:
    """~10k records/s until ``stop`` is set (or ``limit``); returns how many were produced."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    i = 0
    while not stop.is_set() and i < limit:
        producer.produce(topic, key=f"k{i}".encode(), value=os.urandom(64), partition=i % PARTITIONS)
        i += 1
        if i % 500 == 0:
            producer.poll(0)
            time.sleep(0.05)
    producer.flush(30)
    return i


def high_watermarks(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))
    except Exception:  # noqa: BLE001 - the topic may not exist yet
        return 0
    finally:
        consumer.close()


def kill_mid_stream(kafka_clusters, config: Path, topic: str, log: Path) -> None:
    """Run the replicator while records flow; SIGKILL it once a few thousand arrived, then stop producing."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    stop = threading.Event()
    producer = threading.Thread(target=produce_steadily, args=(a, topic, stop), daemon=True)
    proc = start_replicator(config, log=log)
    try:
        producer.start()
        deadline = time.monotonic() + 120
        while high_watermarks(b, f"A.{topic}") < 5_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert producer.is_alive(), "the stream ended before the kill: it would not be mid-stream"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        time.sleep(0.5)  # records keep arriving on the source after the kill
        stop.set()
    producer.join(60)


def copy_faults(source: list[bytes], target: list[bytes]) -> str:
    """What is wrong with ``target`` as the copy of ``source``, in a few words ("" when it is exact):
    counts, and where the first second copy and the first divergence sit on the target, so that a
    failure names the offsets to look up in the replicators' logs instead of printing the logs."""
    if target == source:
        return ""
    first_at: dict[bytes, int] = {}
    second = []  # (offset of the first copy, offset of this one, key)
    for d, k in enumerate(target):
        if first_at.setdefault(k, d) != d:
            second.append((first_at[k], d, k))
    missing = len(set(source) - set(target))
    pairs = zip(source, target, strict=False)
    diverge = next((i for i, (s, t) in enumerate(pairs) if s != t), min(len(source), len(target)))
    run = [d for _first, d, _k in second]
    return (
        f"{len(target)} on the target for {len(source)} on the source: {missing} missing, {len(second)} second"
        f" copies (first: {second[0][2]!r} at target indexes {second[0][0]} and {second[0][1]}; second copies at"
        f" indexes {run[0] if run else '-'}..{run[-1] if run else '-'}), first divergence at index {diverge}"
    )


_SAID = ("resumes at", "orphan", "recover", "assigned", "Error", "crash")


def log_tails(logs: Sequence[Path], needles: Sequence[str] = _SAID) -> str:
    """The lines of the replicators' logs that say where copying resumed and why."""
    out = []
    for log in logs:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        said = [line for line in lines if any(n in line for n in needles)]
        out.append(f"--- {log.name}: {len(lines)} lines\n" + "\n".join(said[-40:]))
    return "\n".join(out)


def assert_each_copied_once_in_order(a: str, b: str, topic: str, logs: Sequence[Path] = ()) -> tuple[dict, dict]:
    """Each partition's records on the target are the source's, once each, in order; returns both sides."""
    source = {p: read_partition(a, topic, p) for p in range(PARTITIONS)}
    target = {p: read_partition(b, f"A.{topic}", p) for p in range(PARTITIONS)}
    faults = {p: copy_faults([r.key for r in source[p]], [r.key for r in target[p]]) for p in range(PARTITIONS)}
    faults = {p: fault for p, fault in faults.items() if fault}
    assert not faults, f"{faults}\n{log_tails(logs)}"  # nothing lost, no second copy, in order
    return source, target


def assert_mapping_exact(kafka_clusters, topic: str, source, target) -> None:
    syncs = syncs_for(state_events(kafka_clusters.bootstrap("B"), "mirrorlake.events"), topic)
    for p in range(PARTITIONS):
        truth = GroundTruth(copies_by_content(source[p], target[p]))
        segments = mapping_from_events(syncs, p)
        high = source[p][-1].offset + 1
        for c in range(0, high + 1, 3):
            got = translate(segments, c)
            assert (got.downstream if got else None) == truth.translate(c), (p, c)


def orphan_copies(kafka_clusters, topic: str) -> int:
    """Target records past the last offset sync's downstream offset, summed over partitions."""
    b = kafka_clusters.bootstrap("B")
    syncs = syncs_for(state_events(b, "mirrorlake.events"), topic)
    orphans = 0
    for p in range(PARTITIONS):
        last = max((s.downstream_offset for s in syncs if s.partition == p), default=-1)
        orphans += max(0, len(read_partition(b, f"A.{topic}", p)) - (last + 1))
    return orphans


def assert_every_copy_reverse_translates(kafka_clusters, topic: str, source, target) -> None:
    """Each record on the target has its row: reverse translation gives the source record it copies."""
    syncs = syncs_for(state_events(kafka_clusters.bootstrap("B"), "mirrorlake.events"), topic)
    index = MappingIndex()
    index.add(syncs)
    for p in range(PARTITIONS):
        for u, d in copies_by_content(source[p], target[p]):
            got = index.reverse("A->B", topic, p, d)
            assert got is not None and (got.upstream, got.method) == (u, TranslationMethod.EXACT), (p, d, u, got)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_kill_9_with_at_least_once_loses_nothing_and_the_mapping_stays_exact(
    kafka_clusters, unique_topic, tmp_path, engine: str
):
    """On both produce paths: the compiled one (every other real-cluster flow test runs on it, as
    ``auto`` does) and the pure-Python one. Crash-consistent (issue 39 item 1): the target holds each
    source record exactly once, in order: the restart resumed past every copy it knew (durable
    syncs, and the orphans recovery matched by content), not at the last committed position."""
    topic = unique_topic("kill-alo")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    config = write_config(kafka_clusters, tmp_path, topic, copy_engine=engine)
    logs = (tmp_path / "killed.log", tmp_path / "rerun.log")
    kill_mid_stream(kafka_clusters, config, topic, logs[0])
    orphans = orphan_copies(kafka_clusters, topic)

    rerun = start_replicator(config, "--until-caught-up", log=logs[1])
    assert rerun.wait(180) == 0, logs[1].read_text()[-3000:]
    source, target = assert_each_copied_once_in_order(a, b, topic, logs)
    assert_mapping_exact(kafka_clusters, topic, source, target)
    assert_every_copy_reverse_translates(kafka_clusters, topic, source, target)
    if orphans:  # the kill left copies without a sync: the restart recovered them
        syncs = syncs_for(state_events(b, "mirrorlake.events"), topic)
        assert any(s.reason == SyncReason.RECOVERED for s in syncs), orphans


def test_kill_9_with_exactly_once_leaves_no_duplicate_for_read_committed(kafka_clusters, unique_topic, tmp_path):
    topic = unique_topic("kill-eos")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    config = write_config(kafka_clusters, tmp_path, topic, exactly_once=True, transaction_interval_seconds=0.3)
    logs = (tmp_path / "killed.log", tmp_path / "rerun.log")
    kill_mid_stream(kafka_clusters, config, topic, logs[0])
    rerun = start_replicator(config, "--until-caught-up", log=logs[1])
    assert rerun.wait(180) == 0, logs[1].read_text()[-3000:]
    # read_committed: no loss, no duplicate, same order
    source, target = assert_each_copied_once_in_order(a, b, topic, logs)
    assert_mapping_exact(kafka_clusters, topic, source, target)


def test_sigterm_drains_and_commits_so_a_restart_has_nothing_to_replay(kafka_clusters, unique_topic, tmp_path):
    topic = unique_topic("term")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    config = write_config(kafka_clusters, tmp_path, topic)
    started_ms = int(time.time() * 1000)
    proc = start_replicator(config)
    try:
        produce_steadily(a, topic, threading.Event(), limit=3_000)
        deadline = time.monotonic() + 60
        while high_watermarks(b, f"A.{topic}") < 3_000 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "A->B: 3000 records" in out
    lifecycle = [
        e.state
        for e in state_events(b, "mirrorlake.events")
        if isinstance(e, Lifecycle) and e.replicator_id == "delivery-test" and e.emitted_at_ms >= started_ms
    ]
    assert lifecycle == ["started", "stopped"]
    rerun = Replicator(load_config(config)).run_until_caught_up()
    assert rerun["A->B"].records == 0  # everything copied was committed before the exit


def start_processes(config: Path, tmp_path: Path, *names: str) -> tuple[dict[str, Path], dict[str, subprocess.Popen]]:
    """One ``mirrorlake replicate`` process per name (its replicator id), each logging to ``<name>.log``."""
    logs = {name: tmp_path / f"{name}.log" for name in names}
    procs = {}
    for name, log in logs.items():
        with log.open("w") as err:
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config), "--replicator-id", name],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True,
            )  # fmt: skip
    return logs, procs


def start_pair(kafka_clusters, tmp_path: Path, topic: str):
    """``topic`` on A, processes "one" and "two" of its A->B flow started, and a producer thread not yet
    started: (A's bootstrap, B's, the config, the logs, the processes, (its stop, the producer))."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    config = write_config(kafka_clusters, tmp_path, topic)
    logs, procs = start_processes(config, tmp_path, "one", "two")
    stop = threading.Event()
    producer = threading.Thread(target=produce_steadily, args=(a, topic, stop), daemon=True)
    return a, b, config, logs, procs, (stop, producer)


def log_lines(path: Path, needle: str) -> int:
    return sum(needle in line for line in path.read_text(errors="replace").splitlines()) if path.exists() else 0


def test_a_live_process_taking_over_a_killed_peers_partitions_copies_nothing_twice(
    kafka_clusters, unique_topic, tmp_path
):
    """Two processes share an at-least-once flow; one is SIGKILLed mid-stream and the group hands its
    partitions to the other, which is running (issue 39 item 1: "a partition is recovered only by the
    process that owns it"). The survivor recovers the dead peer's copies (syncs it left, orphans by
    content) before it copies them, so the target holds each source record once, in order."""
    topic = unique_topic("takeover")
    a, b, config, logs, procs, (stop, producer) = start_pair(kafka_clusters, tmp_path, topic)
    try:
        producer.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(log_lines(log, "A->B: assigned") for log in logs.values()):
            time.sleep(0.1)  # the group split the partitions between them
        assert log_lines(logs["two"], "A->B: assigned"), logs["two"].read_text()
        start = high_watermarks(b, f"A.{topic}")
        while high_watermarks(b, f"A.{topic}") < start + 5_000 and time.monotonic() < deadline:
            time.sleep(0.05)  # both copy for a while
        procs["one"].send_signal(signal.SIGKILL)
        procs["one"].wait(30)
        taken = log_lines(logs["two"], "A->B: assigned")
        while log_lines(logs["two"], "A->B: assigned") == taken and time.monotonic() < deadline:
            time.sleep(0.1)  # the group gives the dead peer's partitions to the survivor
        assert log_lines(logs["two"], "A->B: assigned") > taken, logs["two"].read_text()
        time.sleep(1)  # the survivor copies them while records still arrive
        stop.set()
        producer.join(60)
        total = high_watermarks(a, topic)
        while high_watermarks(b, f"A.{topic}") < total and time.monotonic() < deadline + 60:
            time.sleep(0.1)
    finally:
        stop.set()
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.wait(60)
    source, target = assert_each_copied_once_in_order(a, b, topic, list(logs.values()))
    assert_mapping_exact(kafka_clusters, topic, source, target)
