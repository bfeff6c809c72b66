"""The Grafana boards for the replicator's /metrics: ours, and Strimzi's MM2 board, query only what it exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from replicator.events.model import now_ms
from replicator.flow.runner import FlowStats
from replicator.metrics.connect_metrics import connect_families
from replicator.metrics.mm2_metrics import SAMPLE_S, WindowedValue
from replicator.metrics.observability import FlowCollector

BOARD = Path(__file__).parent.parent / "dashboards" / "grafana" / "mirrorlake-replicator.json"
STRIMZI_MM2_BOARD = Path(__file__).parent / "data" / "strimzi-mm2-dashboard-metrics.txt"


def _metrics_text() -> str:
    stats = FlowStats(records=10, bytes=1000, syncs=2, lag={("orders", 0): 5}, last_record_age_s=0.5)
    stats.source, stats.target = "A", "B"
    stats.latency.observe(0.02)
    stats.mm2.partition("A.orders", 0).copied(10, 1000, now_ms() - 50)
    stats.mm2.partition("A.orders", 0).replication_latency_ms.add(20.0)
    stats.mm2.checkpoint_written(("app", "A.orders", 0), 12.0)
    stats.state, stats.subscribed, stats.assigned = "running", True, [("orders", 0)]
    stats.connectors = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
    stats.leading, stats.in_flight = (lambda: True), (lambda: 3)
    stats.offset_commit_ms.add(4.0)
    registry = CollectorRegistry()
    registry.register(FlowCollector(lambda: [("A->B", stats)]))
    return generate_latest(registry).decode()


def _exported() -> set[str]:
    text = _metrics_text()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def strimzi_mm2_board() -> tuple[set[str], set[str]]:
    """(names /metrics must export, names documented as not exported) of Strimzi's MM2 board."""
    lines = [line for line in STRIMZI_MM2_BOARD.read_text().splitlines() if line and not line.startswith("#")]
    not_exported = {line.split("#")[0].strip() for line in lines if "# not exported" in line}
    return {line.split("#")[0].strip() for line in lines} - not_exported, not_exported


def _queried(board: dict) -> set[str]:
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return {name for e in exprs for name in re.findall(r"\b(mirrorlake_[a-z_]+)", e)}


def test_every_metric_the_board_queries_is_exported():
    board = json.loads(BOARD.read_text())
    queried = _queried(board)
    assert queried, "the board queries no mirrorlake metric"
    missing = queried - _exported()
    assert not missing, f"the Grafana board queries metrics /metrics does not export: {sorted(missing)}"


def test_every_exported_metric_has_a_panel():
    """Of mirrorlake's own metrics (the MM2-named ones are for MM2's boards)."""
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in _exported() if n.startswith("mirrorlake_")}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in _queried(json.loads(BOARD.read_text()))}
    assert families <= shown, f"exported but on no panel: {sorted(families - shown)}"


def test_every_mirror_connector_series_strimzis_mm2_board_queries_is_exported_with_its_labels():
    wanted, not_exported = strimzi_mm2_board()
    assert len(wanted) == 21 and not any(n.startswith("kafka_connect_mirror_") for n in not_exported)
    assert all(n.startswith(("jvm_", "container_")) for n in not_exported - {"kafka_producer_buffer_available_bytes"})
    assert not wanted - _exported(), f"missing: {sorted(wanted - _exported())}"
    labels = {
        s.name: set(s.labels)
        for family in text_string_to_metric_families(_metrics_text())
        for s in family.samples
        if s.name.startswith("kafka_connect_mirror_")
    }
    source = {"source", "target", "topic", "partition"}
    assert all(v == source for k, v in labels.items() if "mirrorsourceconnector" in k)
    assert labels["kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms"] == source | {"group"}


def test_windowed_value_keeps_min_max_avg_and_rate_over_two_samples():
    w = WindowedValue()
    assert w.window(0.0) is None and w.rate(0.0) == 0.0 and w.last is None
    w.add(10.0, now=0.0)
    w.add(30.0, now=1.0)
    w.add(20.0, now=SAMPLE_S + 1)  # a second sample
    assert w.window(SAMPLE_S + 2) == (10.0, 30.0, 20.0) and w.last == 20.0
    assert w.rate(SAMPLE_S + 2) == 60.0 / (SAMPLE_S + 2)
    assert w.window(2 * SAMPLE_S + 0.5) == (20.0, 20.0, 20.0)  # the first sample left the window
    w.add(5.0, now=3 * SAMPLE_S)  # a third sample pushes the oldest out
    assert w.window(3 * SAMPLE_S) == (5.0, 20.0, 12.5)


def test_connect_and_client_series_carry_strimzis_labels_and_mirrorlakes_values():
    """Labels as Strimzi's JMX rules make them (quoted ObjectName values kept), values from the flow's stats."""
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(_metrics_text())
        for s in family.samples
        if s.name.startswith(("kafka_connect_worker", "kafka_connect_coordinator", "kafka_connect_connector_task",
                              "kafka_connect_source_task", "kafka_consumer", "kafka_producer"))
    }  # fmt: skip
    task = (("connector", '"A->B.MirrorSourceConnector"'), ("task", "0"))
    consumer = '"A->B|MirrorSourceConnector|0|replication-consumer"'
    assert samples == {
        ("kafka_connect_worker_connector_count", ()): 3.0,  # leading: source, checkpoint, heartbeat
        ("kafka_connect_worker_task_count", ()): 3.0,
        ("kafka_connect_worker_rebalance_rebalancing", ()): 0.0,
        ("kafka_connect_coordinator_assigned_connectors", (("clientid", "connect-1"),)): 3.0,
        ("kafka_connect_coordinator_assigned_tasks", (("clientid", "connect-1"),)): 3.0,
        ("kafka_connect_connector_task_offset_commit_avg_time_ms", task): 4.0,
        ("kafka_connect_source_task_source_record_active_count", task): 3.0,
        (
            "kafka_consumer_fetch_manager_records_lag",
            (("clientid", consumer), ("partition", "0"), ("topic", "orders")),
        ): 5.0,
        ("kafka_consumer_incoming_byte_total", (("clientid", consumer),)): 1000.0,
        (
            "kafka_producer_outgoing_byte_total",
            (("clientid", '"connector-producer-A->B.MirrorSourceConnector-0"'),),
        ): 1000.0,
    }


def test_a_standby_process_counts_the_source_connector_only_and_a_flow_without_partitions_rebalances():
    stats = FlowStats(state="running", subscribed=True)
    stats.connectors = ("MirrorSourceConnector", "MirrorCheckpointConnector")
    families = {f.name: f.samples[0].value for f in connect_families([("A->B", stats)]) if f.samples}
    assert families["kafka_connect_worker_connector_count"] == 1.0
    assert families["kafka_connect_worker_rebalance_rebalancing"] == 1.0
    assert "kafka_connect_connector_task_offset_commit_avg_time_ms" not in families  # no commit timed yet
    stats.state = "stopped"
    families = {f.name: f.samples[0].value for f in connect_families([("A->B", stats)]) if f.samples}
    assert families["kafka_connect_worker_connector_count"] == 0.0
    assert families["kafka_connect_worker_rebalance_rebalancing"] == 0.0
