"""The examples run as a user runs them, against the session's real clusters and lakehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from tests.test_state_events import _commit

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


@pytest.mark.kafka
def test_embedded_replicator_then_a_consumer_fails_over_where_its_group_left_off(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, state_topic, group = unique_topic("orders"), unique_topic("mirrorlake.events"), unique_topic("app")
    ensure_topic(a, topic, 2)
    producer = Producer({"bootstrap.servers": a})
    for p in range(2):
        for i in range(50):
            producer.produce(topic, key=f"k-{p}-{i}".encode(), value=b"v", partition=p)
    producer.flush(30)
    committed = {0: 20, 1: 35}
    _commit(a, group, [(topic, p, o) for p, o in committed.items()])

    out = run_example(
        "embed_replicator.py", "--source", a, "--target", b, "--topic", topic, "--state-topic", state_topic
    )
    assert "A->B: copied" in out
    target = f"A.{topic}"
    assert [len(read_partition(b, target, p)) for p in range(2)] == [50, 50]

    out = run_example(
        "failover_consumer.py", "--source", a, "--target", b, "--group", group, "--state-topic", state_topic,
        "--max-records", "200",
    )  # fmt: skip
    for p, c in committed.items():
        assert f"resume {target}[{p}] at {c} (exact; committed on A: {c})" in out
    first_read = {}
    for line in out.splitlines():
        if line.startswith("read "):
            tp, key = line.split(" key=")
            part = int(tp.split("[")[1].split("]")[0])
            first_read.setdefault(part, key)
    # Nothing before the committed offset is re-read, nothing after it is skipped.
    assert first_read == {p: repr(f"k-{p}-{c}".encode()) for p, c in committed.items()}
    assert out.count("\nread ") + out.startswith("read ") == sum(50 - c for c in committed.values())


@pytest.mark.spark
def test_notebook_style_queries_read_the_lakehouse_without_spark(built):
    from lakehouse.api import Lakehouse

    root = str(Path(built.config.lakehouse.path).resolve())
    out = run_example("query_lakehouse.py", root, "--flow", "A->B")
    assert "offset mapping per partition:" in out
    groups = Lakehouse.at(root).query("SELECT count(DISTINCT \"group\") AS n FROM group_offsets WHERE flow = 'A->B'")
    assert f"groups on A->B: {int(groups['n'][0])}" in out
