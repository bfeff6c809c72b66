"""The demo's consumer group commits on every partition, so the demo shows a resume point for each.

Seen in a demo run: the summary listed the group's target positions for p1 and p2 only. A
subscribed consumer that stops after half the records may never have read partition 0.
"""

from __future__ import annotations

import pytest

from mirrorlake.demo import _consume_some
from mirrorlake.traffic import ensure_topic, produce_sample_traffic
from replicator.client.group_offsets import committed_offsets

pytestmark = pytest.mark.kafka


def test_the_demo_group_commits_an_equal_share_of_every_partition(kafka_clusters, unique_topic):
    bootstrap = kafka_clusters.bootstrap("A")
    topic, group = unique_topic("demo-orders"), unique_topic("demo-app")
    ensure_topic(bootstrap, topic, 3)
    produce_sample_traffic(bootstrap, topic, records=3_000, partitions=3)

    returned = _consume_some(bootstrap, topic, 1_500, group=group)

    committed = {o.partition: o.offset for o in committed_offsets({"bootstrap.servers": bootstrap}, group, {topic})}
    assert committed == returned
    assert sorted(committed) == [0, 1, 2]
    # about half of each partition: 500 records each, give or take the transaction markers read past
    assert all(480 <= offset <= 520 for offset in committed.values()), committed
