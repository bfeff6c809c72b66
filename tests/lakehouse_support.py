"""Helpers for the lakehouse tests: hand-made state events on a real state topic, table comparison.

The events are built with the replicator's own dataclasses and codec, so the lakehouse reads
exactly what a replicator would publish; rounds of them exercise gaps, at-least-once replays,
duplicate events, late (out-of-order) events and changes that must delete gold rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from confluent_kafka import Producer

from replicator.events import (
    AuditWindow,
    Checkpoint,
    ConfigSnapshot,
    Event,
    Heartbeat,
    OffsetSync,
    Watermark,
    encode,
)

FLOW = "A->B"
TOPIC = "orders"
REMOTE = "A.orders"
T0 = 1_700_000_000_000


def produce(bootstrap: str, state_topic: str, events: Iterable[Event]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for event in events:
        producer.produce(state_topic, key=FLOW.encode(), value=encode(event))
    producer.flush(30)


def sync(p: int, u: int, d: int, t: int, reason: str, prev: tuple[int, int] | None = None) -> OffsetSync:
    return OffsetSync(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        source_cluster="A",
        target_cluster="B",
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        upstream_offset=u,
        downstream_offset=d,
        upstream_timestamp_ms=T0 + u,
        reason=reason,
        previous_upstream_offset=prev[0] if prev else None,
        previous_downstream_offset=prev[1] if prev else None,
    )


def checkpoint(group: str, p: int, c: int, d: int, t: int, method: str) -> Checkpoint:
    return Checkpoint(
        flow=FLOW,
        replicator_id="r1" if method != "mm2" else "mm2-import",
        emitted_at_ms=T0 + t,
        source_cluster="A",
        target_cluster="B",
        group=group,
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        upstream_offset=c,
        downstream_offset=d,
        method=method,
    )


def watermark(p: int, start: int, end: int, t: int, side: str = "source") -> Watermark:
    return Watermark(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        cluster="A" if side == "source" else "B",
        side=side,
        topic=TOPIC if side == "source" else REMOTE,
        source_topic=TOPIC,
        partition=p,
        log_start_offset=start,
        log_end_offset=end,
        observed_at_ms=T0 + t,
        max_timestamp_ms=T0 + end - 1 if end > start else None,
    )


def snapshot(side: str, t: int, partitions: int, configs: dict[str, str], acls: Sequence[str]) -> ConfigSnapshot:
    return ConfigSnapshot(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        cluster="A" if side == "source" else "B",
        side=side,
        topic=TOPIC if side == "source" else REMOTE,
        source_topic=TOPIC,
        exists=True,
        partitions=partitions,
        configs=configs,
        config_sources={k: "DYNAMIC_TOPIC_CONFIG" for k in configs},
        acls=tuple(sorted(acls)),
        digest=f"d{t}",
        reason="changed",
    )


def audit(side: str, p: int, start: int, end: int, count: int, checksum: int, t: int) -> AuditWindow:
    return AuditWindow(
        flow=FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + t,
        side=side,
        cluster="A" if side == "source" else "B",
        source_topic=TOPIC,
        target_topic=REMOTE,
        partition=p,
        window_start=start,
        window_end=end,
        record_count=count,
        checksum=checksum,
    )


def heartbeat(path: Sequence[str], origin_t: int, received_t: int | None) -> Heartbeat:
    return Heartbeat(
        flow=f"{path[-2]}->{path[-1]}" if len(path) > 1 else FLOW,
        replicator_id="r1",
        emitted_at_ms=T0 + (received_t or origin_t),
        origin_cluster=path[0],
        hop_path=tuple(path),
        origin_timestamp_ms=T0 + origin_t,
        received_at_ms=None if received_t is None else T0 + received_t,
        topic="heartbeats",
    )


def rows(df) -> list[tuple]:  # noqa: ANN001 - a pyspark DataFrame
    return sorted((tuple(r) for r in df.collect()), key=repr)


def assert_same_rows(left, right, what: str) -> None:  # noqa: ANN001 - pyspark DataFrames
    """Equal as multisets of rows (column order by name), with a readable difference otherwise."""
    right = right.select(*left.columns)
    only_left = left.exceptAll(right).collect()
    only_right = right.exceptAll(left).collect()
    assert not only_left and not only_right, f"{what}: only incremental {only_left[:5]}, only full {only_right[:5]}"
    assert left.count() == right.count(), what
