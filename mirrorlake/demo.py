"""``mirrorlake demo``: local clusters, sample traffic, replication, lakehouse build, summary.

Leaves the clusters running (``mirrorlake clusters down`` stops them) so the dashboard and SQL
can be tried on the result. Safe to run again: each run adds traffic and replicates it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from ingest.paths import LakehousePaths
from ingest.spark import spark_session
from lakehouse.build import BuildReport, build_lakehouse
from lakehouse.sql import LakehouseSQL
from mirrorlake.localkafka import local_brokers, up
from mirrorlake.progress import Steps
from mirrorlake.traffic import TrafficReport, ensure_topic, produce_sample_traffic
from replicator.client.group_offsets import commit_offsets
from replicator.client.policy import policy_from_config
from replicator.client.translation import translate_offsets
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ConfigError
from replicator.flow.runtime import Replicator
from replicator.kafka.log_bounds import topic_bounds
from replicator.kafka.settings import RDKAFKA_LOG

__all__ = ["DemoSummary", "run_demo", "render_summary", "DEMO_TOPIC", "DEMO_GROUP"]

_log = logging.getLogger(__name__)

DEMO_TOPIC = "orders"
DEMO_GROUP = "demo-app"


def _consume_some(bootstrap: str, topic: str, records: int, group: str = DEMO_GROUP) -> dict[int, int]:
    """A consumer group on the source that read about ``records`` records, an equal share of every
    partition, and committed: each partition gets a checkpoint. Returns the committed offsets.

    (A subscribed consumer reading ``records`` in arrival order may never reach one partition, which
    then has no committed offset and no checkpoint to show.)
    """
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "logger": RDKAFKA_LOG}
    )
    try:
        bounds = topic_bounds(consumer, topic)
        if not bounds:
            raise ConfigError(f"demo topic {topic!r} has no partitions on {bootstrap}")
        share = max(1, records // len(bounds))
        committed: dict[int, int] = {}
        for partition, (start, end) in sorted(bounds.items()):
            committed[partition] = _read_share(consumer, topic, partition, start, min(end, start + share))
        commit_offsets(consumer, [TopicPartition(topic, p, o) for p, o in committed.items()])
        return committed
    finally:
        consumer.close()


def _read_share(consumer: Consumer, topic: str, partition: int, start: int, stop: int) -> int:
    """Read ``[start, stop)`` of one partition; the position after the last record read.

    Ends at the first record at or past ``stop``, or when two seconds bring nothing new (the range
    may end in transaction markers or aborted records, which a read_committed reader never sees).
    """
    consumer.assign([TopicPartition(topic, partition, start)])
    position = start
    while position < stop:
        offsets = [
            o for m in consumer.consume(1000, timeout=2.0) if m.error() is None and (o := m.offset()) is not None
        ]
        if not offsets or max(offsets) >= stop:
            position = max([position, *(o + 1 for o in offsets if o < stop)])
            break
        position = max(offsets) + 1
    return position


@dataclass(frozen=True)
class DemoSummary:
    flow: str
    traffic: TrafficReport
    replicated_records: int
    build: BuildReport
    sample_partition: int
    sample_upstream: int
    sample_downstream: int | None
    segments_per_partition: list[tuple[int, int]]
    group_offsets: list[tuple[str, int, int, int]]  # target topic, partition, source offset, target offset


def run_demo(
    config: MirrorlakeConfig, *, records: int = 20_000, partitions: int = 3, steps: Steps | None = None
) -> DemoSummary:
    """Run the demo's steps, reported to ``steps`` (default: plain log lines)."""
    flows = [f for f in config.enabled_flows() if DEMO_TOPIC in f.topics or ".*" in f.topics]
    if not flows:
        raise ConfigError(f"the demo needs an enabled flow whose topics include {DEMO_TOPIC!r}")
    flow = flows[0]
    steps = steps or Steps(rich=False)
    running_before = {b.alias for b in local_brokers(config) if b.is_running()}
    with steps.step("start the local Kafka clusters"):
        up(config)
    try:
        return _demo_steps(config, flow, records, partitions, steps)
    except BaseException:  # a failed demo leaves no broker of its own behind (those running before stay)
        started = [b for b in local_brokers(config) if b.alias not in running_before]
        _log.warning("demo failed: stopping the local brokers it started (%s)", ", ".join(b.alias for b in started))
        for broker in started:
            broker.stop()
        raise


def _demo_steps(config: MirrorlakeConfig, flow: FlowConfig, records: int, partitions: int, steps: Steps) -> DemoSummary:
    source = config.cluster(flow.source).bootstrap_servers
    with steps.step(f"produce {records} sample records to {DEMO_TOPIC}"):
        ensure_topic(source, DEMO_TOPIC, partitions)
        traffic = produce_sample_traffic(source, DEMO_TOPIC, records=records, partitions=partitions)
    with steps.step(f"consume half as group {DEMO_GROUP}"):
        _consume_some(source, DEMO_TOPIC, records // 2)
    with steps.step(f"replicate {flow.name} until caught up"):
        stats = Replicator(config, flows=[flow.name], status_port=None).run_until_caught_up()
    checkpoints = translate_offsets(config, flow.name, DEMO_GROUP)
    with steps.step("start Spark (the first run resolves its packages)"):
        spark = spark_session(config.spark)
    report = build_lakehouse(spark, config, on_stage=steps.stage)
    steps.stage("query the lakehouse")
    sql = LakehouseSQL(LakehousePaths.of(config.lakehouse).root)
    try:
        key = [flow.name, DEMO_TOPIC]
        per_partition = sql.query(
            "SELECT partition, count(*) FROM offset_mapping WHERE flow = ? AND source_topic = ? "
            "GROUP BY partition ORDER BY partition",
            key,
        ).rows
        # The last replicated offset of partition 0 sits behind transaction gaps, so its
        # translation differs from the identity.
        upstream = sql.query(
            "SELECT max(upstream_end) FROM offset_mapping WHERE flow = ? AND source_topic = ? AND partition = 0", key
        ).rows[0][0]
        translated = sql.query("SELECT translate_offset(?, ?, 0, ?)", [*key, upstream]).rows[0][0]
    finally:
        sql.close()
    return DemoSummary(
        flow=flow.name,
        traffic=traffic,
        replicated_records=stats[flow.name].records,
        build=report,
        sample_partition=0,
        sample_upstream=upstream,
        sample_downstream=translated,
        segments_per_partition=[(int(p), int(n)) for p, n in per_partition],
        group_offsets=[(t, p, c.upstream_offset, c.downstream_offset) for (t, p), c in sorted(checkpoints.items())],
    )


def render_summary(s: DemoSummary, config: MirrorlakeConfig) -> str:
    """What the demo prints at the end: what happened, and the commands to try next."""
    resumes = ", ".join(f"{t}[{p}] {src} -> {dst}" for t, p, src, dst in s.group_offsets)
    source, target = s.flow.split("->")
    remote = policy_from_config(config.replication_policy).format_remote_topic(source, DEMO_TOPIC)
    lines = [
        "",
        f"mirrorlake demo: flow {s.flow}, topic {DEMO_TOPIC} on {source} -> {remote} on {target}",
        f"  produced      {s.traffic.plain_records} records + {s.traffic.committed_records} in committed and "
        f"{s.traffic.aborted_records} in aborted transactions",
        f"  replicated    {s.replicated_records} records this run",
        f"  lakehouse     {s.build.bronze_rows} state events in bronze, {s.build.offset_syncs} offset syncs, "
        f"{s.build.mapping_segments} mapping segments ({s.build.quarantined} quarantined)",
        "  segments/partition " + ", ".join(f"p{p}: {n}" for p, n in s.segments_per_partition),
        f"  translation   {s.flow} {DEMO_TOPIC}[{s.sample_partition}] offset {s.sample_upstream} -> "
        f"{s.sample_downstream} on the target",
        f"  group {DEMO_GROUP} (committed on the source) resumes on the target at: {resumes}",
        f"  lakehouse at  {LakehousePaths.of(config.lakehouse).root}",
        "",
        "Next: .venv/bin/mirrorlake dashboard   (http://127.0.0.1:8501)",
        '      .venv/bin/mirrorlake sql "SELECT * FROM offset_mapping ORDER BY partition, downstream_start"',
        f"      .venv/bin/mirrorlake translate --flow '{s.flow}' --group {DEMO_GROUP}",
        "      .venv/bin/mirrorlake clusters down   (the clusters keep running until then)",
    ]
    return "\n".join(lines)
