"""Ground truth for offset translation and failover, from the records actually on the source and target.

Records are matched by content (key, value, headers, timestamp), never through mirrorlake's own
state, so tests and benches can hold the replicator, the mapping and every failover figure to it.
It reads whole partitions: a verification tool for tests, benches and drills, not a hot path.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from replicator.client.mapping import Segment
from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.events import Event, OffsetSync
from replicator.kafka.log_bounds import partition_bounds


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


def read_partition(
    bootstrap: str | Mapping[str, str], topic: str, partition: int, *, isolation: str = "read_committed"
) -> list[Rec]:
    """Every record of one partition, from its log start to its current end. The partition exists
    (callers read what they created or saw): "unknown" is a broker that has just restarted.
    ``bootstrap``: an address, or a client config (a secured cluster's, with its credentials)."""
    client = {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)
    consumer = Consumer(
        {
            **client,
            "group.id": "groundtruth",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        low, high = partition_bounds(consumer, topic, partition, listed=True)  # asked again while a leader is elected
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, partition, low)])
        out: list[Rec] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msgs = consumer.consume(10000, 1.0)
            done = False
            for m in msgs:
                if m.error():
                    done = True  # partition EOF
                    continue
                offset = m.offset()
                assert offset is not None  # a record without error has its coordinates
                out.append(Rec(partition, offset, m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
            if done:
                return out
        raise AssertionError(f"reading {topic}[{partition}] at {bootstrap} did not reach its end")
    finally:
        consumer.close()


def copies_by_content(source: list[Rec], target: list[Rec]) -> list[tuple[int, int]]:
    """(upstream, downstream) pairs, matching each target record to the source record it copies.

    Records carry unique keys in these tests; a target record whose key is not on the source is
    a foreign record and has no pair.
    """
    by_key = {r.key: r.offset for r in source}
    return [(by_key[r.key], r.offset) for r in target if r.key in by_key]


class GroundTruth:
    """The brief's definition of the exact translation, from every copy on the target.

    Translation of committed offset ``c``: the downstream offset of the latest copy of ``c``; if
    ``c`` has no copy, right after the latest copy of the last replicated record before it; if
    nothing before it was replicated, the latest copy of the first replicated record after it.
    """

    def __init__(self, copies: list[tuple[int, int]]) -> None:
        self.latest: dict[int, int] = {}
        for u, d in copies:
            self.latest[u] = max(d, self.latest.get(u, -1))
        self.ups = sorted(self.latest)

    def translate(self, c: int) -> int | None:
        if c in self.latest:
            return self.latest[c]
        i = bisect.bisect_left(self.ups, c)
        if i > 0:
            return self.latest[self.ups[i - 1]] + 1
        return self.latest[self.ups[0]] if self.ups else None


@dataclass(frozen=True)
class ResumeCost:
    """What resuming at a target offset costs a group, counted record by record (DESIGN.md's
    definitions, the ones ``replicator.client.failover_cost`` computes from the mapping)."""

    lost: int  # replicated records >= committed with no copy at or after the resume offset
    reread: int  # copies at or after the resume offset of records < committed
    duplicated: int  # copies at or after it of records >= committed, beyond the first of each


def resume_cost(source: list[Rec], target: list[Rec], committed: int, resume: int) -> ResumeCost:
    """The cost of resuming at ``resume`` on ``target`` for a group that committed ``committed`` on
    ``source``, by content (``copies_by_content``: records carry unique keys)."""
    copies = copies_by_content(source, target)
    after = [u for u, d in copies if d >= resume]
    after_unread = [u for u in after if u >= committed]
    copied_unread = {u for u, _d in copies if u >= committed}
    return ResumeCost(
        lost=len(copied_unread - set(after_unread)),
        reread=sum(1 for u in after if u < committed),
        duplicated=len(after_unread) - len(set(after_unread)),
    )


def expected_translation(copies: list[tuple[int, int]], c: int) -> int | None:
    """One-off form of ``GroundTruth(copies).translate(c)``."""
    return GroundTruth(copies).translate(c)


def state_events(bootstrap: str, state_topic: str) -> list[Event]:
    """Every event in a cluster's state topic (undecodable records are skipped: other tests plant some)."""
    return read_state_log({"bootstrap.servers": bootstrap}, state_topic).events


def syncs_for(events: list[Event], topic: str) -> list[OffsetSync]:
    return [e for e in events if isinstance(e, OffsetSync) and e.source_topic == topic]


def mapping_from_events(syncs: list[OffsetSync], partition: int) -> list[Segment]:
    """The segments of one partition of the syncs' (single) flow and topic, as the replicator builds them."""
    index = MappingIndex()
    index.add(syncs)
    keys = {(s.flow, s.source_topic) for s in syncs}
    assert len(keys) <= 1, keys
    return index.segments(*keys.pop(), partition) if keys else []
