"""Copies on the target that the mapping does not know yet: a killed replicator's last writes.

At-least-once publishes an offset sync only after the target acknowledged the copy, so a
replicator killed mid-stream leaves copies past its partition's last mapped copy ``(U, D)`` with
no sync. A plan that ignores them resumes a group that committed past ``U`` at ``D + 1`` and says
"re-read 0", while the consumer re-reads every one of them. A plan accounts for them first:

* **source answers**: they are matched to source records by content (``TailRecovery``, as the
  flow's own restart and ``failback`` do) and their syncs join the plan's mapping, so every figure
  is exact. ``apply`` publishes those syncs (reason ``recovered``) before it writes offsets, so the
  lakehouse's mapping holds them too.
* **source down**: nothing can say which source records they hold. The ``n`` records read on the
  target past ``D`` are *presumed* to be copies of the ``n`` source offsets after ``U``, in order,
  leaving out the ranges the flow said were deleted before their copy (``records_lost_before_copy``:
  it copied on from the new log start): what a single copying process writes when the source
  partition has no other gaps (no transaction markers, no compaction holes, no records the flow
  skips) and nobody else writes to the target topic. The
  presumed syncs join the plan's mapping in memory only (never published), the plan's rows say
  ``copies_presumed`` and how many records ``unmapped_copies`` holds: where the presumption fails,
  the figures can be off by at most that many records.

A partition whose first sync never became durable (no ``(U, D)``) has no anchor: its records are
counted (``unmapped_copies``) and presumed nothing.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException

from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.events import OffsetSync
from replicator.failover.state import FlowState
from replicator.flow.core.matching import recovery_syncs
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.syncs.tail_recovery import TailRecovery
from replicator.kafka.connectivity import answers_metadata
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.tasks.audit import RangeReader

__all__ = ["UnmappedCopies", "account_for_unmapped_copies", "PartitionRef", "presumed_sources"]

_log = logging.getLogger(__name__)
_MAX_TAIL = 1_000_000  # records read past one partition's last mapped copy (a bound on a plan's cost)
_CHUNK = 20_000
PartitionRef = tuple[str, str, int]  # (source topic, target topic, partition)


@dataclass(frozen=True)
class UnmappedCopies:
    """What the target held past one partition's last mapped copy when the plan read it."""

    source_topic: str
    target_topic: str
    partition: int
    first_offset: int  # the target offset the search started at (after the last mapped copy)
    end_offset: int  # the target's log end then
    records: int  # records in [first_offset, end_offset)
    matched: int  # of them, matched to source records by content (the source answered)
    presumed: tuple[int, int] | None  # source offsets taken as copied, the source being down

    @property
    def presumed_records(self) -> int:
        return 0 if self.presumed is None else self.presumed[1] - self.presumed[0] + 1


def presumed_sources(first: int, count: int, lost: Sequence[tuple[int, int]]) -> list[int]:
    """``count`` source offsets from ``first`` on, in order, none inside a range ``[from, to)`` of
    ``lost`` (records deleted before their copy: never copied)."""
    out: list[int] = []
    spans = sorted(lost)
    offset, i = first, 0
    while len(out) < count:
        while i < len(spans) and spans[i][1] <= offset:
            i += 1
        if i < len(spans) and spans[i][0] <= offset:
            offset = spans[i][1]  # past the lost range
            continue
        end = spans[i][0] if i < len(spans) else offset + count - len(out)
        take = min(end - offset, count - len(out))
        out.extend(range(offset, offset + take))
        offset += take
    return out


def _last_copy(state: FlowState, topic: str, partition: int) -> tuple[int, int] | None:
    segments = state.index.segments(state.flow.name, topic, partition)
    if not segments:
        return None
    seg = max(segments, key=lambda s: s.downstream_end)
    return seg.upstream_end, seg.downstream_end


def _record_offsets(reader: RangeReader, topic: str, partition: int, start: int, end: int) -> list[int]:
    out: list[int] = []
    position = start
    while position < end:
        msgs = reader.read(topic, partition, position, min(end, position + _CHUNK))
        if not msgs:
            break
        out += [m.offset() for m in msgs]  # type: ignore[misc]
        position = out[-1] + 1
    return out


def account_for_unmapped_copies(
    config: MirrorlakeConfig, state: FlowState, partitions: Sequence[PartitionRef]
) -> tuple[dict[tuple[str, int], UnmappedCopies], list[OffsetSync]]:
    """Find each partition's copies past its last mapped copy and add their syncs (matched, or
    presumed with the source down) to ``state``'s mapping; returns what was found per source
    partition and the matched syncs (those ``apply`` publishes; presumed ones never are)."""
    flow = state.flow
    target_conf = config.cluster(flow.target).client_config()
    try:
        with throwaway_reader(target_conf, "mirrorlake-failover-tails") as consumer:
            bounds = log_bounds(consumer, [(t, p) for _s, t, p in partitions], skip_missing=True)
    except KafkaException as exc:
        raise FailoverError(f"cannot read the target's log ends: {kafka_error_reason(exc)}") from exc
    searched: list[tuple[PartitionRef, int, int]] = []
    for ref in partitions:
        topic, target_topic, partition = ref
        if (target_topic, partition) not in bounds:
            continue
        low, end = bounds[(target_topic, partition)]
        last = _last_copy(state, topic, partition)
        first = max(low, last[1] + 1) if last is not None else low
        if end > first:
            searched.append((ref, first, end))
    if not searched:
        return {}, []
    origin = SyncOrigin(flow.name, f"failover@{socket.gethostname()}-{os.getpid()}", flow.source, flow.target)
    if answers_metadata(config.cluster(flow.source).client_config(), timeout_s=3.0):
        return _matched(config, state, origin, searched)
    return _presumed(config, state, origin, searched), []


def _matched(
    config: MirrorlakeConfig, state: FlowState, origin: SyncOrigin, searched: list[tuple[PartitionRef, int, int]]
) -> tuple[dict[tuple[str, int], UnmappedCopies], list[OffsetSync]]:
    flow = state.flow
    recovery = TailRecovery(
        origin, config.cluster(flow.source).client_config(), config.cluster(flow.target).client_config(),
        max_tail=_MAX_TAIL,
    )  # fmt: skip
    try:
        syncs, report = recovery.run(state.index, [ref for ref, _f, _e in searched], {})
    except KafkaException as exc:
        raise FailoverError(f"cannot match the target's copies to {flow.source}: {kafka_error_reason(exc)}") from exc
    found = {(r.source_topic, r.partition): r for r in report}
    state.index.add(syncs)
    out: dict[tuple[str, int], UnmappedCopies] = {}
    for (topic, target_topic, partition), first, end in searched:
        r = found.get((topic, partition))
        if r is None:
            continue  # nothing readable there (markers, aborted records) or past the bound
        out[(topic, partition)] = UnmappedCopies(topic, target_topic, partition, first, end, r.tail, r.matched, None)
        _log.info(
            "flow %s: %s[%d]: %d records past the last mapped copy on %s, %d of them copies matched on %s",
            flow.name, topic, partition, r.tail, flow.target, r.matched, flow.source,
        )  # fmt: skip
    return out, syncs


def _presumed(
    config: MirrorlakeConfig, state: FlowState, origin: SyncOrigin, searched: list[tuple[PartitionRef, int, int]]
) -> dict[tuple[str, int], UnmappedCopies]:
    flow = state.flow
    out: dict[tuple[str, int], UnmappedCopies] = {}
    reader = RangeReader(config.cluster(flow.target).client_config(), "mirrorlake-failover-tails")
    try:
        for (topic, target_topic, partition), first, end in searched:
            if end - first > _MAX_TAIL:
                _log.warning(
                    "flow %s: %s[%d] has %d target offsets past its last mapped copy: not read, nothing presumed",
                    flow.name, target_topic, partition, end - first,
                )  # fmt: skip
                continue
            offsets = _record_offsets(reader, target_topic, partition, first, end)
            last = _last_copy(state, topic, partition)
            presumed = None
            if offsets and last is not None:
                sources = presumed_sources(last[0] + 1, len(offsets), state.lost_before_copy(topic, partition))
                pairs = list(zip(sources, offsets, strict=True))
                life = state.index.life(flow.name, topic, partition)  # the presumed copies are of the current life
                ids = (life.topic_id, life.target_topic_id)
                state.index.add(recovery_syncs(origin, topic, target_topic, partition, last, pairs, {}, ids))
                presumed = (pairs[0][0], pairs[-1][0])
            if offsets:
                out[(topic, partition)] = UnmappedCopies(
                    topic, target_topic, partition, first, end, len(offsets), 0, presumed
                )
                _log.warning(
                    "flow %s: %s[%d]: %d records past the last mapped copy on %s and %s does not answer: "
                    "presumed to be copies of source offsets %s",
                    flow.name, target_topic, partition, len(offsets), flow.target, flow.source,
                    f"{presumed[0]}..{presumed[1]}" if presumed else "(none: no mapped copy to count from)",
                )  # fmt: skip
    except KafkaException as exc:
        raise FailoverError(f"cannot read the target's unmapped copies: {kafka_error_reason(exc)}") from exc
    finally:
        reader.close()
    return out
