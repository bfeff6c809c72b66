"""Recovering the offset syncs of copies a killed process left without one (pure: no cluster)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlake.groundtruth import GroundTruth
from replicator.client.mapping_index import MappingIndex
from replicator.events import OffsetSync, SyncReason
from replicator.flow.core.matching import match_copies, recovery_syncs
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.syncs.gap_recovery import downstream_gaps

ORIGIN = SyncOrigin("A->B", "r1", "A", "B")


def _sync(u: int, d: int, reason: str, prev: tuple[int, int] | None = None) -> OffsetSync:
    return OffsetSync(
        flow="A->B", replicator_id="r0", source_cluster="A", target_cluster="B", source_topic="t",
        target_topic="A.t", partition=0, upstream_offset=u, downstream_offset=d, upstream_timestamp_ms=0,
        reason=reason, previous_upstream_offset=prev[0] if prev else None,
        previous_downstream_offset=prev[1] if prev else None,
    )  # fmt: skip


def test_matching_skips_foreign_target_records_and_uncopied_source_records():
    source = [(10, 1), (11, 2), (12, 99), (13, 3), (14, 4)]  # 12 was never copied (a cycle)
    target = [(50, 1), (51, 2), (52, 77), (53, 3), (54, 4)]  # 52 is another producer's
    assert match_copies(target, source) == [(10, 50), (11, 51), (13, 53), (14, 54)]


def test_recovered_syncs_give_every_orphan_its_exact_row():
    # the killed process: u 0..9 at d 0..9, durable syncs up to (4, 4); copies 5..9 at d 5..9 are orphans;
    # a foreign record at d 10; then it had copied u 10..12 at d 11..13
    copies = [(u, u) for u in range(10)] + [(u, u + 1) for u in range(10, 13)]
    durable = [_sync(0, 0, SyncReason.FIRST), _sync(4, 4, SyncReason.LAG_MAX, (3, 3))]
    pairs = [(u, d) for u, d in copies if d > 4]
    recovered = recovery_syncs(ORIGIN, "t", "A.t", 0, (4, 4), pairs, {})
    assert {s.reason for s in recovered} == {SyncReason.RECOVERED}
    index = MappingIndex()
    index.add([*durable, *recovered])
    truth = GroundTruth(copies)
    for u, d in copies:
        got = index.reverse("A->B", "t", 0, d)
        assert got is not None and (got.upstream, got.method) == (u, "exact"), (u, d, got)
    for c in range(14):
        got = index.translate("A->B", "t", 0, c)
        assert (got.downstream if got else None) == truth.translate(c), c
    assert index.reverse("A->B", "t", 0, 10).method == "after_last_copy"  # the foreign record has no row


def test_a_partition_without_any_durable_sync_is_recovered_from_its_first_copy():
    pairs = [(u, u + 3) for u in range(5)]
    index = MappingIndex()
    index.add(recovery_syncs(ORIGIN, "t", "A.t", 0, None, pairs, {}))
    assert [(s.upstream_start, s.upstream_end, s.downstream_start) for s in index.segments("A->B", "t", 0)] == [
        (0, 4, 3)
    ]


def test_a_late_batch_of_earlier_records_is_matched_as_their_second_copies():
    source = [(u, 1000 + u) for u in range(100)]
    gap = [(61 + i, 1030 + i) for i in range(20)]  # between copies (60, 60) and (61, 81): 30..49 again
    assert match_copies(gap, source, expect_from=61) == [(30 + i, 61 + i) for i in range(20)]
    tail = [(100 + i, 1060 + i) for i in range(5)] + [(105 + i, 1090 + i) for i in range(5)]
    assert match_copies(tail, source, expect_from=90) == [
        *[(60 + i, 100 + i) for i in range(5)],  # a late batch of 60..64
        *[(90 + i, 105 + i) for i in range(5)],  # then the flow's own copies, in order
    ]
    assert match_copies([(7, 5555)], source, expect_from=50) == []  # another producer's record


@given(
    n=st.integers(5, 60),
    data=st.data(),
)
@settings(max_examples=200, deadline=None)
def test_gaps_read_back_make_the_mapping_the_latest_copy_of_every_record(n, data):
    """The flow's copies in order, a late batch of earlier records landing between two of them (a
    gap the flow's syncs jump over) or after the last (the next start's tail), maybe a foreign
    record: the gap task's and the tail recovery's steps give the truth."""
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(a + 1, n))
    k = data.draw(st.integers(b - 1, n - 1))  # the flow had copied up to k when the batch landed
    foreign = data.draw(st.booleans())
    hashes = {u: 1000 + u for u in range(n)}
    target: list[tuple[int, int | None]] = [(u, u) for u in range(k + 1)]  # (downstream, upstream or None)
    late = [(k + 1 + i, u) for i, u in enumerate(range(a, b))]
    target += late
    if foreign:
        target.append((len(target), None))
    target += [(len(target) + i, u) for i, u in enumerate(range(k + 1, n))]
    own = [(u, d) for d, u in target if u is not None and (d, u) not in late]
    index = MappingIndex()
    index.add(recovery_syncs(ORIGIN, "t", "A.t", 0, None, own, {}))
    source = [(u, hashes[u]) for u in range(n)]
    on_target = {d: (hashes[u] if u is not None else 7) for d, u in target}
    for before, after in downstream_gaps(index.segments("A->B", "t", 0)):
        gap = [(d, on_target[d]) for d in range(before.downstream_end + 1, after.downstream_start)]
        pairs = match_copies(gap, source, expect_from=before.upstream_end + 1)
        index.add(recovery_syncs(ORIGIN, "t", "A.t", 0, (before.upstream_end, before.downstream_end), pairs, {}))
    last = max(index.segments("A->B", "t", 0), key=lambda s: s.downstream_end)
    tail = [(d, on_target[d]) for d in range(last.downstream_end + 1, len(target))]  # the next start's part
    pairs = match_copies(tail, source, expect_from=last.upstream_end + 1)
    index.add(recovery_syncs(ORIGIN, "t", "A.t", 0, (last.upstream_end, last.downstream_end), pairs, {}))
    truth = GroundTruth([(u, d) for d, u in target if u is not None])
    for c in range(n + 1):
        got = index.translate("A->B", "t", 0, c)
        assert (got.downstream if got else None) == truth.translate(c), (c, index.segments("A->B", "t", 0))


def test_the_stretches_no_known_copy_holds_past_the_commit_are_all_searched():
    """A killed peer's copies can sit before a synced copy: a process frozen past its session drained
    its late copies after them and synced those (the simulator, seed 1914). Recovery searches every
    stretch the mapping does not hold, from the floor of the commit: past the oldest known copy of
    the newest record before the commit."""
    from replicator.client.mapping import Segment
    from replicator.flow.core.takeover import unmapped

    zombie = Segment(downstream_start=4, upstream_start=0, upstream_end=2, downstream_end=6)
    assert unmapped([zombie], (0, 7), commit=0) == [(0, 4, None)]  # the peer's copies before the zombie's
    assert unmapped([zombie], (0, 9), commit=0) == [(0, 4, None), (7, 9, (2, 6))]  # and the tail
    assert unmapped([], (3, 9), commit=5) == [(3, 9, None)]  # no mapping: the whole partition
    early = Segment(downstream_start=0, upstream_start=0, upstream_end=9, downstream_end=9)
    late = Segment(downstream_start=15, upstream_start=10, upstream_end=19, downstream_end=24)
    # a foreign write (10..14) between two runs: searched while the commit is below it, not once past it
    assert unmapped([early, late], (0, 25), commit=10) == [(10, 15, (9, 9))]
    assert unmapped([early, late], (0, 30), commit=20) == [(25, 30, (19, 24))]
