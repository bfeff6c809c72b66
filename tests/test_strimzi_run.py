"""The introduction's minimal KafkaMirrorMaker2 resource runs as printed but for its addresses (issue 35 item 1).

Its mirror selects every topic (no ``topicsPattern``), so it runs between two brokers of this module's
own, PLAINTEXT, holding nothing but what the test writes. Judged by what the target holds: every
record of the source topic, in order, under the default policy's name; and, as Strimzi runs a mirror
with only a ``sourceConnector``, no checkpoints and no heartbeats.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlake.groundtruth import read_partition
from mirrorlake.localkafka import LocalBroker
from replicator.client.state_reader import read_state_log
from replicator.events import Checkpoint, Heartbeat
from tests.broker_pair import broker_pair

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[1]
INTRO = ROOT.parent / "shared" / "strimzi" / "intro-examples.yaml"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Iterator[dict[str, LocalBroker]]:
    with broker_pair(tmp_path_factory.mktemp("strimzi"), "Strimzi clusters") as brokers:
        yield brokers


def test_the_minimal_resource_replicates_every_topic_as_printed(plain, tmp_path):
    source, target = plain["S"], plain["T"]
    topics = [f"orders-{uuid.uuid4().hex[:6]}", f"payments-{uuid.uuid4().hex[:6]}"]
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for topic in topics:
        for i in range(50):
            producer.produce(topic, key=f"{topic}-{i}".encode(), value=b"v", partition=i % 2)
    assert producer.flush(60) == 0

    resource = list(yaml.safe_load_all(INTRO.read_text()))[2]
    resource["spec"]["clusters"][0]["bootstrapServers"] = source.bootstrap
    resource["spec"]["clusters"][1]["bootstrapServers"] = target.bootstrap
    path = tmp_path / "kmm2.yaml"
    path.write_text(yaml.safe_dump(resource))
    ran = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(path), "--until-caught-up"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "fields mirrorlake does not use: spec.version" in ran.stderr

    for topic in topics:
        for p in (0, 1):
            on_s = [r.key for r in read_partition(source.bootstrap, topic, p)]
            on_t = [r.key for r in read_partition(target.bootstrap, f"my-cluster-source.{topic}", p)]
            assert on_t == on_s and len(on_s) == 25
    events = read_state_log({"bootstrap.servers": target.bootstrap}, "mirrorlake.events").events
    assert events and not [e for e in events if isinstance(e, Checkpoint | Heartbeat)]
