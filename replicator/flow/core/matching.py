"""Copies found on the target by content, and the offset syncs that prove them.

A process killed with SIGKILL leaves copies on the target that no durable offset sync names;
recovery reads the target past the last copy the mapping knows and the source from the next
upstream offset, matches them by content (``LogRecord.hash``: key, value, headers without the
provenance header, timestamp), in order, and publishes the matched pairs as syncs with reason
``recovered`` (``recovery_syncs``'s contract below).

Contract of the published syncs (``replicator.client.mapping.points_from_sync``): each maximal run
of matched pairs adjacent on both sides becomes one sync at its first pair, carrying the copy
before it (``(U, D)`` or the previous run's end) as ``previous_*`` (a boundary unless adjacent),
and, for runs of two or more, one at its last pair carrying the pair before it. Target records
that match nothing (another producer's, another flow's) get no sync: they are not copies.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from replicator.events import OffsetSync, SyncReason
from replicator.flow.core.offset_sync import SyncOrigin

__all__ = ["Hashed", "TopicIds", "LOOKAHEAD", "match_copies", "recovery_syncs"]

LOOKAHEAD = 10_000  # source records a copy may be ahead of the previous match (skipped records)

Hashed = tuple[int, int]  # (offset, record hash)
TopicIds = tuple[str | None, str | None]  # (source topic id, remote topic id); None: not known


def match_copies(
    target: Sequence[Hashed], source: Sequence[Hashed], lookahead: int = LOOKAHEAD, expect_from: int | None = None
) -> list[Hashed]:
    """``(upstream, downstream)`` pairs, in target order: each target record is matched to the next
    source record with its content, scanning at most ``lookahead`` source records past the previous
    match (a copy in order); failing that, to the latest *earlier* source record with its content, and
    the order goes on from there (a second copy of records copied before: a killed writer's batch that
    reached the target after the flow had copied them again). Both sequences in offset order.

    ``expect_from``: the source offset the first in-order copy is looked for at (default: the first
    source record); the source records before it are there to be found as second copies only.
    """
    pairs: list[Hashed] = []
    seen: dict[int, list[int]] = {}  # hash -> indices of the source records scanned so far, ascending
    scanned = 0  # source[:scanned] are in ``seen``
    i = 0 if expect_from is None else bisect_left(source, expect_from, key=lambda r: r[0])

    def scan_to(end: int) -> None:
        nonlocal scanned
        for k in range(scanned, end):
            seen.setdefault(source[k][1], []).append(k)
        scanned = max(scanned, end)

    scan_to(i)
    for d, h in target:
        limit = min(len(source), i + lookahead)
        j = i
        while j < limit and source[j][1] != h:
            j += 1
        if j == limit:  # not ahead: a second copy of an earlier record, or no copy at all
            scan_to(limit)
            before = seen.get(h, [])
            k = bisect_left(before, i) - 1
            if k < 0:
                continue  # another producer's record, or a copy beyond the look-ahead: no pair
            j = before[k]  # the latest earlier record with this content
        pairs.append((source[j][0], d))
        i = j + 1
    return pairs


def recovery_syncs(
    origin: SyncOrigin,
    source_topic: str,
    target_topic: str,
    partition: int,
    last_copy: tuple[int, int] | None,
    pairs: Sequence[Hashed],
    timestamps: dict[int, int],
    ids: TopicIds = (None, None),
) -> list[OffsetSync]:
    """The syncs that prove every pair (see the module's contract); ``last_copy`` is ``(U, D)``, None
    when the partition has no mapping (the first run's first sync then carries no ``previous_*``).
    ``ids``: the (source, remote) topic ids of the topics the pairs were read from, the mapping's
    life they belong to; an id-less sync joins whatever life is current when it is read, which after
    a re-creation is another topic's (seed 197 of the soak: a takeover's matches in a remote topic
    deleted later put its copies into the recopied topic's mapping)."""
    out: list[OffsetSync] = []
    prev: tuple[int, int] | None = last_copy
    k = 0
    while k < len(pairs):
        start = k
        while k + 1 < len(pairs) and pairs[k + 1][0] == pairs[k][0] + 1 and pairs[k + 1][1] == pairs[k][1] + 1:
            k += 1
        first, last = pairs[start], pairs[k]
        out.append(_sync(origin, source_topic, target_topic, partition, first, prev, timestamps, ids))
        if k > start:
            out.append(_sync(origin, source_topic, target_topic, partition, last, pairs[k - 1], timestamps, ids))
        prev = last
        k += 1
    return out


def _sync(
    origin: SyncOrigin,
    source_topic: str,
    target_topic: str,
    partition: int,
    pair: Hashed,
    previous: tuple[int, int] | None,
    timestamps: dict[int, int],
    ids: TopicIds,
) -> OffsetSync:
    return OffsetSync(
        flow=origin.flow,
        replicator_id=origin.replicator_id,
        source_cluster=origin.source_cluster,
        target_cluster=origin.target_cluster,
        source_topic=source_topic,
        target_topic=target_topic,
        partition=partition,
        upstream_offset=pair[0],
        downstream_offset=pair[1],
        upstream_timestamp_ms=timestamps.get(pair[0], -1),
        reason=SyncReason.RECOVERED,
        previous_upstream_offset=previous[0] if previous else None,
        previous_downstream_offset=previous[1] if previous else None,
        source_topic_id=ids[0],
        target_topic_id=ids[1],
    )
