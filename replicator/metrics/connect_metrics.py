"""The Kafka Connect and Java client series Strimzi's MM2 board charts, as a mirrorlake process has them.

An MM2 deployment runs, per flow ``S->T``, the connectors ``S->T.MirrorSourceConnector``,
``S->T.MirrorCheckpointConnector`` and ``S->T.MirrorHeartbeatConnector`` in Kafka Connect workers;
Strimzi's JMX exporter rules (``examples/metrics/kafka-mirror-maker-2-metrics.yaml``) name their
worker, coordinator, task and client metrics as below. A mirrorlake process is the worker: it runs
one copy loop per flow (the flow's source *task*, on the partitions its consumer group gives it)
and, in the one process that leads the flow's state tasks, its checkpoints and heartbeats (the
other two connectors and their tasks). Each series means, for a mirrorlake process:

- ``kafka_connect_worker_connector_count`` (no labels) and
  ``kafka_connect_coordinator_assigned_connectors{clientid}``: per running flow, 1 (its source
  connector) in every process, plus its checkpoint and heartbeat connectors (those it has enabled) in
  the process that leads its state tasks; so summed over processes, an MM2 deployment's count.
- ``kafka_connect_worker_task_count`` and ``kafka_connect_coordinator_assigned_tasks{clientid}``:
  the same count (one task per connector, as MM2 runs for one worker's share).
- ``kafka_connect_worker_rebalance_rebalancing``: 1 while a running flow of this process has
  subscribed to topics and holds no partition (waiting for its group's assignment; also when the
  group has more processes than partitions), else 0.
- ``kafka_connect_connector_task_offset_commit_avg_time_ms{connector,task}``: per flow's source
  connector, the average over 60 s of an offset commit's time: exactly-once, a transaction's commit
  (drain, positions, ``commit_transaction``); at-least-once, storing the positions durable syncs
  cover for the consumer's auto-commit, and the synchronous commits at revocation and stop.
  With no commit in the window, the last commit's time; none before the first (Connect says NaN,
  which would make the board's average NaN).
- ``kafka_connect_source_task_source_record_active_count{connector,task}``: records produced to
  the target and not yet acknowledged (the copier's in-flight count).
- ``kafka_consumer_fetch_manager_records_lag{clientid,topic,partition}``: per assigned source
  partition, ``mirrorlake_record_lag`` (the source high watermark minus the flow's position).
- ``kafka_consumer_incoming_byte_total{clientid}`` and ``kafka_producer_outgoing_byte_total
  {clientid}``: ``mirrorlake_bytes`` (key + value bytes of the copied records); the Java clients
  also count protocol overhead, headers and (outgoing) state events, so MM2's are larger.

``task`` is ``0`` in every process (one source task per flow and process); Prometheus's target
labels (the pod) tell processes apart. Label values keep the double quotes the JMX exporter keeps
from quoted ObjectName values, as the board's regular expressions expect (``connector=~"\\".*
SourceConnector\\""``). Everything is read from the flows' stats at scrape time.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from replicator.config.model import FlowConfig

__all__ = ["COORDINATOR_CLIENT_ID", "connect_families", "mm2_connectors", "quoted"]

COORDINATOR_CLIENT_ID = "connect-1"  # the Connect worker's group coordinator client
SOURCE, CHECKPOINT, HEARTBEAT = "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"


def mm2_connectors(flow: FlowConfig, *, continuous: bool) -> tuple[str, ...]:
    """The MM2 connectors a flow stands for, as ``flow_state_tasks`` enables their work."""
    connectors = [SOURCE]
    if flow.emit_checkpoints or flow.sync_group_offsets:
        connectors.append(CHECKPOINT)
    if flow.emit_heartbeats and continuous:
        connectors.append(HEARTBEAT)
    return tuple(connectors)


def quoted(value: str) -> str:
    """A label value as the JMX exporter keeps a quoted ObjectName value: with its double quotes."""
    return f'"{value}"'


def _connectors_here(stats: Any) -> int:
    if stats.state != "running":
        return 0
    return len(stats.connectors) if stats.leading() else 1


def connect_families(flows: list[tuple[str, Any]]) -> list[Metric]:
    """The series of this module's docstring for ``flows`` ((name, ``FlowStats``) pairs)."""
    connectors = sum(_connectors_here(stats) for _name, stats in flows)
    rebalancing = any(s.state == "running" and s.subscribed and not s.assigned for _n, s in flows)
    families: list[Metric] = [
        GaugeMetricFamily("kafka_connect_worker_connector_count", "MM2 connectors run here (mirrorlake)", connectors),
        GaugeMetricFamily("kafka_connect_worker_task_count", "MM2 tasks run here (mirrorlake)", connectors),
        GaugeMetricFamily(
            "kafka_connect_worker_rebalance_rebalancing", "1 while a flow waits for its assignment", int(rebalancing)
        ),
    ]
    for attribute in ("assigned_connectors", "assigned_tasks"):
        coordinator = GaugeMetricFamily(
            f"kafka_connect_coordinator_{attribute}", f"MM2 {attribute} (mirrorlake)", labels=["clientid"]
        )
        coordinator.add_metric([COORDINATOR_CLIENT_ID], connectors)
        families.append(coordinator)
    commit = GaugeMetricFamily(
        "kafka_connect_connector_task_offset_commit_avg_time_ms",
        "average offset commit time over 60 s (mirrorlake)",
        labels=["connector", "task"],
    )
    active = GaugeMetricFamily(
        "kafka_connect_source_task_source_record_active_count",
        "records produced, not yet acknowledged (mirrorlake)",
        labels=["connector", "task"],
    )
    lag = GaugeMetricFamily(
        "kafka_consumer_fetch_manager_records_lag", "mirrorlake_record_lag", labels=["clientid", "topic", "partition"]
    )
    incoming = CounterMetricFamily(
        "kafka_consumer_incoming_byte", "key and value bytes copied (mirrorlake)", labels=["clientid"]
    )
    outgoing = CounterMetricFamily(
        "kafka_producer_outgoing_byte", "key and value bytes copied (mirrorlake)", labels=["clientid"]
    )
    for name, stats in flows:
        connector = f"{name}.{SOURCE}"
        task = [quoted(connector), "0"]
        window = stats.offset_commit_ms.window()
        if window is not None or stats.offset_commit_ms.last is not None:
            commit.add_metric(task, window[2] if window is not None else stats.offset_commit_ms.last)
        active.add_metric(task, stats.in_flight())
        consumer = quoted(f"{name}|{SOURCE}|0|replication-consumer")
        for (topic, partition), value in sorted(stats.lag.items()):
            lag.add_metric([consumer, topic, str(partition)], value)
        incoming.add_metric([consumer], stats.bytes)
        outgoing.add_metric([quoted(f"connector-producer-{connector}-0")], stats.bytes)
    return [*families, commit, active, lag, incoming, outgoing]
