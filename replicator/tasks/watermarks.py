"""Watermarks: log-start, log-end (last stable offset) and newest timestamp of both sides of a flow.

RPO needs the source's end (what exists) next to the mapping (what was copied); retention or
deletion on either side shows as a log-start moving past records. One ``Watermark`` per partition
and side, emitted when it changed or when ``_REFRESH_S`` passed since the last one.

Source side (watermark v2): the flow's replicated position and the tail after it, measured by
reading it (``replicator.tasks.tails``). The log end is listed first, the position asked second, so
a record counted at risk really was not on the target when the position was taken. Positions come
from the running copy loop (``replicator.tasks.read_positions``) and, for partitions it does not
hold (another process of the flow, or no loop at all: ``mirrorlake observe``), from the flow's
committed positions (source group, or the target's positions topic in exactly-once mode).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import IsolationLevel
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.client.group_offsets import committed_offsets
from replicator.events import Watermark
from replicator.events.model import now_ms
from replicator.kafka.admin import admin_client, listed_offsets
from replicator.kafka.position_store import PositionStore
from replicator.kafka.settings import consumer_group_id
from replicator.tasks.base import WATERMARKS_LANE, TaskContext
from replicator.tasks.read_positions import PositionSnapshot
from replicator.tasks.tails import Tail, TailReader

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
        # a partition that vanished (deleted topic) is left out: its absence is the news
        results[name] = listed_offsets(
            admin, partitions, spec, isolation=IsolationLevel.READ_COMMITTED, timeout_s=_TIMEOUT_S, skip_failed=True
        )
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
    lane = WATERMARKS_LANE

    def __init__(
        self,
        ctx: TaskContext,
        source_conf: dict[str, Any],
        target_conf: dict[str, Any],
        read_positions: Callable[[], PositionSnapshot | None] | None = None,
    ) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.watermarks_interval_seconds
        self._admins = {"source": admin_client(source_conf), "target": admin_client(target_conf)}
        self._target_conf = target_conf
        self._source_conf = source_conf
        self._read_positions = read_positions
        self._tails = TailReader(source_conf, f"{ctx.replicator_id}-{ctx.flow.name}-tails")
        self._last: dict[tuple[str, str, int], tuple[tuple[Any, ...], float]] = {}

    def _positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str]]:
        """(replicated position, where it comes from) of each source partition that has one."""
        snapshot = self._read_positions() if self._read_positions is not None else None
        live = snapshot.positions if snapshot is not None else {}
        out = {tp: (live[tp], "flow") for tp in partitions if tp in live}
        missing = [tp for tp in partitions if tp not in live]
        if missing:
            flow = self._ctx.flow
            if flow.exactly_once:
                store = PositionStore(self._ctx.config.positions_topic, flow.name, self._target_conf)
                committed = store.read(missing)
            else:
                offsets = committed_offsets(self._source_conf, consumer_group_id(flow), {t for t, _ in missing})
                committed = {(o.topic, o.partition): o.offset for o in offsets}
            out.update({tp: (committed[tp], "committed") for tp in missing if tp in committed})
        return out

    def run(self) -> None:
        flow = self._ctx.flow
        remote = self._ctx.remote_topics()
        # the target first: a source observation then has the target's log start of its round before it
        for side, cluster in (("target", flow.target), ("source", flow.source)):
            names = {r.name_on(side): r for r in remote.values()}
            partitions = [(name, p) for name, r in names.items() for p in range(r.partitions)]
            # stamped before the log ends are asked for: each is read after this moment, so it holds
            # every record acknowledged before it. Stamped after the positions and the tails were read
            # (seconds, under load), a watermark said "log end 144,009 at t" while the source had
            # acknowledged records up to 158,104 a second before t (issue 60): a plan then left out
            # 14,000 records per partition that never reached the target
            observed = now_ms()
            marks = partition_watermarks(self._admins[side], partitions)
            positions = self._positions(partitions) if side == "source" else {}
            tails = self._tails.measure(
                {tp: (max(pos, marks[tp][0]), marks[tp][1]) for tp, (pos, _) in positions.items() if tp in marks}
            )
            now = time.monotonic()
            for (topic, partition), values in marks.items():
                position, origin = positions.get((topic, partition), (None, None))
                tail: Tail | None = tails.get((topic, partition))
                seen = (*values, position, tail)
                last = self._last.get((side, topic, partition))
                if last is not None and last[0] == seen and now - last[1] < _REFRESH_S:
                    continue
                self._last[(side, topic, partition)] = (seen, now)
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
                        read_position=position,
                        position_source=origin,
                        unreplicated_records=tail.records if tail else None,
                        unreplicated_bytes=tail.bytes if tail else None,
                        oldest_unreplicated_timestamp_ms=tail.oldest_timestamp_ms if tail else None,
                    ),
                )

    def close(self) -> None:
        self._tails.close()
