"""A topic pattern that backtracks, against a topic name made for it, on real clusters (issue 33, item 3).

``topics: ["(a+)+$"]`` with a topic named forty ``a`` then ``-x`` on the source kept ``replicate``
at 78% CPU for ten minutes, deaf to SIGTERM: Python's regex engine held the GIL, so the signal's
handler never ran. Filters now run on RE2 (``replicator.config.patterns``): the flow selects the
all-``a`` topic, leaves the hostile one alone, copies every record, and stops on SIGTERM with its
usual exit code. The harness waits with safety timeouts only.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
RECORDS = 100


def test_replicate_with_a_backtracking_pattern_copies_and_stops_on_sigterm(kafka_clusters, tmp_path: Path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    wanted, hostile = "a" * 61, "a" * 40 + f"-x-{uuid.uuid4().hex}"
    for topic in (hostile, wanted):
        ensure_topic(a, topic, 1)
    producer = Producer({"bootstrap.servers": a})
    for i in range(RECORDS):
        producer.produce(wanted, key=f"k{i}".encode(), value=b"v")
        producer.produce(hostile, key=f"h{i}".encode(), value=b"v")
    assert producer.flush(30) == 0
    config = tmp_path / "hostile.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": {"A": {"bootstrap_servers": a}, "B": {"bootstrap_servers": b}},
                "flows": [{"source": "A", "target": "B", "topics": ["(a+)+$"], "groups": ["(a+)+$"], "audit": False}],
                "state_topic": f"mirrorlake.hostile-{uuid.uuid4().hex[:12]}",
                "heartbeats_topic": f"heartbeats-{uuid.uuid4().hex[:12]}",
            }
        )
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def copied() -> bool:
            assert child.poll() is None, child.communicate()
            topics = AdminClient({"bootstrap.servers": b}).list_topics(timeout=30).topics
            return f"A.{wanted}" in topics and len(read_partition(b, f"A.{wanted}", 0)) == RECORDS

        wait_for(copied, f"A.{wanted} copied whole")
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert "SIGTERM received, stopping" in err and f"{RECORDS} records" in out, (out, err)
    assert f"A.{hostile}" not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=30).topics
