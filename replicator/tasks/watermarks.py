"""Watermarks: log-start, log-end (last stable offset) and newest timestamp of both sides of a flow.

RPO needs the source's end (what exists) next to the mapping (what was copied); retention or
deletion on either side shows as a log-start moving past records. One ``Watermark`` per partition
and side, emitted when it changed or when ``_REFRESH_S`` passed since the last one.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.events import Watermark
from replicator.events.model import now_ms
from replicator.kafka.admin import admin_client
from replicator.tasks.base import TaskContext

__all__ = ["WatermarkTask", "partition_watermarks"]

_TIMEOUT_S = 30
_REFRESH_S = 60.0

WatermarkValues = tuple[int, int, int | None, int | None]  # log start, log end, max timestamp, its offset


def partition_watermarks(
    admin: AdminClient, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], WatermarkValues]:
    """Log start, last stable offset and (newest timestamp, its offset) of each partition."""
    if not partitions:
        return {}
    results: dict[str, dict[tuple[str, int], Any]] = {}
    for name, spec in (
        ("earliest", OffsetSpec.earliest()),
        ("latest", OffsetSpec.latest()),
        ("max_ts", OffsetSpec.max_timestamp()),
    ):
        asked = {TopicPartition(t, p): spec for t, p in partitions}
        futures = admin.list_offsets(asked, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=_TIMEOUT_S)
        results[name] = {}
        for tp, future in futures.items():
            try:
                results[name][(tp.topic, tp.partition)] = future.result(timeout=_TIMEOUT_S)
            except KafkaException:
                continue  # a partition that vanished (deleted topic): its absence is the news
    out: dict[tuple[str, int], WatermarkValues] = {}
    for key, latest in results["latest"].items():
        start = results["earliest"].get(key)
        newest = results["max_ts"].get(key)
        if newest is not None and newest.offset >= 0 and newest.timestamp >= 0:
            max_ts, max_ts_offset = newest.timestamp, newest.offset
        else:
            max_ts = max_ts_offset = None
        out[key] = (start.offset if start is not None else 0, latest.offset, max_ts, max_ts_offset)
    return out


class WatermarkTask:
    name = "watermarks"
    in_final_round = True

    def __init__(self, ctx: TaskContext, source_conf: dict[str, Any], target_conf: dict[str, Any]) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.watermarks_interval_seconds
        self._admins = {"source": admin_client(source_conf), "target": admin_client(target_conf)}
        self._last: dict[tuple[str, str, int], tuple[WatermarkValues, float]] = {}

    def run(self) -> None:
        flow = self._ctx.flow
        remote = self._ctx.remote_topics()
        for side, cluster in (("source", flow.source), ("target", flow.target)):
            names = {r.name_on(side): r for r in remote.values()}
            partitions = [(name, p) for name, r in names.items() for p in range(r.partitions)]
            observed = now_ms()
            now = time.monotonic()
            for (topic, partition), values in partition_watermarks(self._admins[side], partitions).items():
                last = self._last.get((side, topic, partition))
                if last is not None and last[0] == values and now - last[1] < _REFRESH_S:
                    continue
                self._last[(side, topic, partition)] = (values, now)
                self._ctx.emit(
                    Watermark(
                        flow=flow.name,
                        replicator_id=self._ctx.replicator_id,
                        cluster=cluster,
                        side=side,
                        topic=topic,
                        source_topic=names[topic].source_topic,
                        partition=partition,
                        log_start_offset=values[0],
                        log_end_offset=values[1],
                        max_timestamp_ms=values[2],
                        max_timestamp_offset=values[3],
                        observed_at_ms=observed,
                    ),
                )

    def close(self) -> None:
        pass
