"""Which state topics the bronze ingest reads: a flow's target without a state topic yet is skipped
with a warning naming it (Spark's Kafka source would fail the whole build on it), the others are read."""

from __future__ import annotations

import logging
import uuid

import pytest

from ingest.bronze import start_bronze_ingest
from ingest.paths import LakehousePaths
from mirrorlake.traffic import ensure_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_target_without_a_state_topic_is_skipped_and_named(spark, kafka_clusters, tmp_path, caplog):
    state_topic = f"bronze-src-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_clusters.bootstrap("B"), state_topic, 1)  # A->B has run; nothing ever ran into C
    flows = [{"source": "A", "target": "B", "topics": ["x"]}, {"source": "A", "target": "C", "topics": ["x"]}]
    config = kafka_clusters.config(flows=flows, state_topic=state_topic)
    with caplog.at_level(logging.WARNING, logger="ingest.bronze"):
        queries = start_bronze_ingest(spark, config, LakehousePaths(tmp_path), available_now=True)
    try:
        assert [q.name for q in queries] == ["bronze-B"]
    finally:
        for q in queries:
            q.awaitTermination()
    assert f"cluster C has no state topic {state_topic} yet" in caplog.text
