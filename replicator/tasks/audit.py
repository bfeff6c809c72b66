"""Audit windows: count and checksum of each window of source offsets, read on both sides.

Windows are fixed ranges of *upstream* offsets ``[k*N, (k+1)*N)`` per source partition. The
source side reads the source partition; the target side reads the target partition independently
(never trusting the copy loop) and maps each record back to its upstream offset through the exact
offset mapping, so the two sides' rows compare directly: equal counts and checksums mean the
target holds exactly the source's records of that window. A record altered, lost, or deleted by
retention on either side shows as a difference. Records of another producer on the target are
outside the mapping and not counted; extra copies from at-least-once replays are counted in
``extra_copies`` (the checksum takes each source record once, from its latest copy).

A window is audited once it is complete on the source (the last stable offset passed it) and
replicated (the mapping covers its last record). On a compacted target topic the cleaner later
removes copies from inside windows already audited, which a single audit never sees; those
windows are read again on the target, a few per run in turn, and a new ``target`` row is emitted
when what the target holds changed (or, after a restart, when it holds fewer records than the
mapping copied there), so the latest rows per window show the loss. The checksum is the sum mod 2^64 (as a signed
long) of a 64-bit BLAKE2b of each record's key, value, headers (the provenance header left out:
it differs by design) and timestamp: order-independent, so a replay cannot change it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message, TopicPartition

from replicator.client.failover_cost import interval_union
from replicator.client.mapping import Segment
from replicator.client.provenance import PROVENANCE_HEADER
from replicator.events import AuditWindow, Event
from replicator.kafka.admin import admin_client, partition_counts
from replicator.kafka.clients import new_consumer
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, reader_config
from replicator.metadata.topic_configs import compacted_topics
from replicator.tasks.base import STATE_LANE, TaskContext
from replicator.tasks.watermarks import partition_watermarks

__all__ = ["AuditTask", "RangeReader", "record_hash", "WindowSum", "add_hash"]

_log = logging.getLogger(__name__)
_MAX_WINDOWS_PER_RUN = 20
_MASK = (1 << 64) - 1


def record_hash(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None, timestamp: int
) -> int:
    """A 64-bit hash of what replication must preserve (unsigned)."""
    h = hashlib.blake2b(digest_size=8)
    for part in (key, value):
        h.update(b"\x00" if part is None else len(part).to_bytes(4, "big") + part)
    for name, hv in headers or ():
        if name != PROVENANCE_HEADER:
            h.update(name.encode() + b"\x00" + (b"\xff" if hv is None else len(hv).to_bytes(4, "big") + hv))
    h.update(timestamp.to_bytes(8, "big", signed=True))
    return int.from_bytes(h.digest(), "big")


def add_hash(total: int, h: int) -> int:
    return (total + h) & _MASK


def _signed(total: int) -> int:
    return total - (1 << 64) if total >= 1 << 63 else total


@dataclass
class WindowSum:
    count: int = 0
    checksum: int = 0  # unsigned accumulator
    first: int | None = None
    last: int | None = None
    extra_copies: int = 0

    def add(self, offset: int, h: int) -> None:
        self.count += 1
        self.checksum = add_hash(self.checksum, h)
        self.first = offset if self.first is None else min(self.first, offset)
        self.last = offset if self.last is None else max(self.last, offset)


def _hash_of(msg: Message) -> int:
    return record_hash(msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])  # type: ignore[arg-type]


class RangeReader:
    """Reads ``[start, end)`` of one partition (read_committed), whatever markers or gaps lie inside."""

    def __init__(self, conf: dict[str, Any], client_id: str) -> None:
        self._consumer = new_consumer(reader_config(conf, client_id))

    def read(self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0) -> list[Message]:
        if end <= start:
            return []
        tp = TopicPartition(topic, partition, start)
        self._consumer.assign([tp])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in self._consumer.consume(5000, timeout=BOUNDED_READ_WAIT_S):
                if msg.error() is None and msg.offset() < end:  # type: ignore[operator]
                    out.append(msg)
            (pos,) = self._consumer.position([TopicPartition(topic, partition)])
            if pos.offset >= end:
                break
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            if high is not None and pos.offset >= high >= 0 and out and out[-1].offset() >= high - 1:  # type: ignore[operator]
                break  # the partition ends before ``end`` (markers at its end)
        self._consumer.unassign()
        return out

    def close(self) -> None:
        self._consumer.close()


def _copied(segments: list[Segment], window_start: int, n: int) -> int:
    """How many distinct records of ``[window_start, window_start + n)`` the mapping says were copied."""
    last = window_start + n - 1
    spans = interval_union((max(s.upstream_start, window_start), min(s.upstream_end, last)) for s in segments)
    return sum(hi - lo + 1 for lo, hi in spans)


class AuditTask:
    name = "audit"
    in_final_round = True
    lane = STATE_LANE

    def __init__(self, ctx: TaskContext, source_conf: dict[str, Any], target_conf: dict[str, Any]) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.audit_interval_seconds
        self._n = ctx.flow.audit_window_records
        self._source_admin = admin_client(source_conf)
        self._target_admin = admin_client(target_conf)
        name = f"{ctx.replicator_id}-{ctx.flow.name}-audit"
        self._source = RangeReader(source_conf, f"{name}-source")
        self._target = RangeReader(target_conf, f"{name}-target")
        self._next: dict[tuple[str, int], int] = {}  # next window start per source partition
        self._compacted: set[str] = set()  # target topics with cleanup.policy compact (this run)
        self._recheck: dict[tuple[str, int], int] = {}  # next audited window to read again (compacted)
        self._held: dict[tuple[str, int, int], tuple[int, int]] = {}  # last target (count, checksum) emitted
        ctx.view.subscribe("audit_window", self._audited)

    def _audited(self, event: Event) -> None:
        """Continue after the last window this flow audited (read back from the state log)."""
        if isinstance(event, AuditWindow) and event.flow == self._ctx.flow.name and event.side == "target":
            key = (event.source_topic, event.partition)
            self._next[key] = max(self._next.get(key, 0), event.window_end)

    def run(self) -> None:
        self._ctx.view.refresh()
        remote = self._ctx.remote_topics()
        partitions = [(t, p) for t, r in remote.items() for p in range(r.partitions)]
        marks = partition_watermarks(self._source_admin, partitions)
        on_target = partition_counts(self._target_admin)
        self._compacted = compacted_topics(
            self._target_admin, {r.target_topic for r in remote.values()} & set(on_target)
        )
        for (topic, partition), (log_start, lso, _ts, _tso) in marks.items():
            segments = self._ctx.view.index.segments(self._ctx.flow.name, topic, partition)
            target_topic = remote[topic].target_topic
            if segments and partition < on_target.get(target_topic, 0):  # a missing target: no audit
                self._audit_partition(topic, partition, target_topic, segments, log_start, lso)
                if target_topic in self._compacted:
                    self._reaudit(topic, partition, target_topic, segments, log_start)

    def _first_window(self, segments: list[Segment], log_start: int) -> int:
        lowest = max(log_start, min(s.upstream_start for s in segments))
        return lowest if lowest % self._n == 0 else (lowest // self._n + 1) * self._n

    def _audit_partition(
        self, topic: str, partition: int, target_topic: str, segments: list[Segment], log_start: int, lso: int
    ) -> None:
        n = self._n
        start = self._next.get((topic, partition))
        if start is None:
            start = self._first_window(segments, log_start)
        end = min(lso // n * n, start + _MAX_WINDOWS_PER_RUN * n)
        if end <= start:
            return
        replicated = max(s.upstream_end for s in segments)
        source: dict[int, WindowSum] = {}
        for msg in self._source.read(topic, partition, start, end):
            u: int = msg.offset()  # type: ignore[assignment]
            source.setdefault(u // n * n, WindowSum()).add(u, _hash_of(msg))
        windows = []
        for ws in range(start, end, n):
            last = source[ws].last if ws in source else ws - 1
            if replicated < (last if last is not None else ws - 1):
                break  # not replicated yet: audit it later
            windows.append(ws)
        if not windows:
            return
        target = self._target_sums(target_topic, partition, segments, windows[0], windows[-1] + n)
        for ws in windows:
            self._emit("source", topic, target_topic, partition, ws, source.get(ws, WindowSum()))
            self._emit("target", topic, target_topic, partition, ws, target.get(ws, WindowSum()))
            if target_topic in self._compacted:
                held = target.get(ws, WindowSum())
                self._held[(topic, partition, ws)] = (held.count, held.checksum)
        self._next[(topic, partition)] = windows[-1] + n

    def _reaudit(self, topic: str, partition: int, target_topic: str, segments: list[Segment], log_start: int) -> None:
        """Read again, on the compacted target, the next few windows already audited (in turn)."""
        n, end = self._n, self._next.get((topic, partition))
        first = self._first_window(segments, log_start)
        if end is None or end <= first:
            return
        start = self._recheck.get((topic, partition), first)
        start = first if start < first or start >= end else start
        stop = min(end, start + _MAX_WINDOWS_PER_RUN * n)
        target = self._target_sums(target_topic, partition, segments, start, stop)
        for ws in range(start, stop, n):
            held = target.get(ws, WindowSum())
            before = self._held.get((topic, partition, ws))
            changed = (
                before != (held.count, held.checksum) if before is not None else held.count < _copied(segments, ws, n)
            )
            if changed:
                _log.info(
                    "audit: %s[%d] window %d holds %d records on the target now",
                    target_topic,
                    partition,
                    ws,
                    held.count,
                )
                self._emit("target", topic, target_topic, partition, ws, held)
            self._held[(topic, partition, ws)] = (held.count, held.checksum)
        self._recheck[(topic, partition)] = stop

    def _target_sums(
        self, target_topic: str, partition: int, segments: list[Segment], lo: int, hi: int
    ) -> dict[int, WindowSum]:
        """Per window: the distinct source records of ``[lo, hi)`` found on the target (latest copy each)."""
        inside = [s for s in segments if s.upstream_start < hi and s.upstream_end >= lo]
        if not inside:
            return {}
        d_lo = min(max(lo, s.upstream_start) + s.delta for s in inside)
        d_hi = max(min(hi - 1, s.upstream_end) + s.delta for s in inside) + 1
        latest: dict[int, tuple[int, int]] = {}  # upstream -> (downstream, hash) of its latest copy
        copies: dict[int, int] = {}
        for msg in self._target.read(target_topic, partition, d_lo, d_hi):
            d: int = msg.offset()  # type: ignore[assignment]
            seg = next((s for s in inside if s.downstream_start <= d <= s.downstream_end), None)
            if seg is None:
                continue  # not a copy made by this flow
            u = d - seg.delta
            if lo <= u < hi:
                copies[u] = copies.get(u, 0) + 1
                if u not in latest or latest[u][0] < d:
                    latest[u] = (d, _hash_of(msg))
        sums: dict[int, WindowSum] = {}
        for u, (d, h) in latest.items():
            window = sums.setdefault(u // self._n * self._n, WindowSum())
            window.add(d, h)
            window.extra_copies += copies[u] - 1
        return sums

    def _emit(self, side: str, topic: str, target_topic: str, partition: int, ws: int, w: WindowSum) -> None:
        flow = self._ctx.flow
        self._ctx.emit(
            AuditWindow(
                flow=flow.name,
                replicator_id=self._ctx.replicator_id,
                side=side,
                cluster=flow.source if side == "source" else flow.target,
                source_topic=topic,
                target_topic=target_topic,
                partition=partition,
                window_start=ws,
                window_end=ws + self._n,
                record_count=w.count,
                checksum=_signed(w.checksum),
                first_offset=w.first,
                last_offset=w.last,
                extra_copies=w.extra_copies,
            ),
        )

    def close(self) -> None:
        self._source.close()
        self._target.close()
