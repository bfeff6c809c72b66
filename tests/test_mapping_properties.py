"""Property tests: the exact offset mapping equals the ground truth of a simulated replication.

The simulation copies a source partition whose offsets have gaps (transaction markers,
compaction) to a target that also receives foreign records, through sessions that crash at
random points and replay from the last committed position (at-least-once), publishing syncs
exactly as the replicator does (``OffsetSyncTracker``) and committing only what a durable sync
covers. Syncs produced after the last durable flush of a crashed session are lost.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlake.groundtruth import expected_translation
from replicator.client.mapping import Point, build_segments, points_from_sync, translate
from replicator.flow.core.offset_sync import OffsetSyncTracker


def points_of(syncs) -> list[Point]:
    """The copied-record points of offset syncs (the tracker makes ``OffsetSync`` events)."""
    return [
        pt
        for sp in syncs
        for pt in points_from_sync(
            sp.upstream_offset,
            sp.downstream_offset,
            sp.reason,
            sp.previous_upstream_offset,
            sp.previous_downstream_offset,
        )
    ]


@st.composite
def replication_runs(draw):
    gaps = draw(st.lists(st.integers(0, 3), min_size=1, max_size=120))
    records, u = [], 0
    for g in gaps:
        u += g  # a gap of g offsets (markers, compacted records) before the next record
        records.append(u)
        u += 1
    lag_max = draw(st.integers(1, 20))
    copies: list[tuple[int, int]] = []
    syncs: list = []  # the durable offset syncs, as published
    d, pos = draw(st.integers(0, 5)), 0
    while pos < len(records):
        crash = draw(st.booleans())
        stop = draw(st.integers(pos + 1, len(records))) if crash else len(records)
        tracker = OffsetSyncTracker(lag_max)
        pending: list = []
        commit = pos
        for i in range(pos, stop):
            d += draw(st.integers(0, 2)) if draw(st.integers(0, 9)) == 0 else 0  # foreign records
            copies.append((records[i], d))
            sp = tracker.record("t", 0, records[i], d, 0)
            d += 1
            if sp is not None:
                pending.append(sp)
            if draw(st.integers(0, 4)) == 0:  # a flush: everything pending becomes durable
                pending += tracker.flush()
                syncs += pending
                pending = []
                commit = i + 1
        if crash:
            pos = commit  # the pending syncs are lost with the process
        else:
            pending += tracker.flush()
            syncs += pending
            pos = stop
    return records, copies, syncs


@settings(max_examples=400, deadline=None)
@given(replication_runs())
def test_translation_is_exact_for_every_offset(run):
    records, copies, syncs = run
    segments = build_segments(points_of(syncs))
    for c in range(0, records[-1] + 3):
        got = translate(segments, c)
        assert (got.downstream if got else None) == expected_translation(copies, c), c


@settings(max_examples=200, deadline=None)
@given(replication_runs())
def test_one_row_per_change_of_delta_not_per_record(run):
    records, copies, syncs = run
    segments = build_segments(points_of(syncs))
    # A segment is a contiguous run of one delta: never more rows than runs in the real copies.
    runs = 1 + sum(1 for (u0, d0), (u1, d1) in zip(copies, copies[1:], strict=False) if (u1 - u0, d1 - d0) != (1, 1))
    assert len(segments) <= runs


def test_seed_example_from_the_brief():
    # syncs (495, 500) then (596, 600), the latter knowing its predecessor (594, 599)
    segments = build_segments(
        points_from_sync(495, 500, "first", None, None) + points_from_sync(596, 600, "delta_change", 594, 599)
    )
    assert [(s.upstream_start, s.upstream_end, s.downstream_start, s.delta) for s in segments] == [
        (495, 594, 500, 5),
        (596, 596, 600, 4),
    ]
    assert translate(segments, 500).downstream == 505
    assert translate(segments, 595).downstream == 600  # a gap: right after the copy of 594
    assert translate(segments, 596).method == "exact"
