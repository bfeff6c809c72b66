"""Recovering the offset syncs of copies a killed process left without one (pure: no cluster)."""

from __future__ import annotations

from mirrorlake.groundtruth import GroundTruth
from replicator.client.mapping_index import MappingIndex
from replicator.events import OffsetSync, SyncReason
from replicator.flow.syncs.offset_sync import SyncOrigin
from replicator.flow.syncs.tail_recovery import match_copies, recovery_syncs

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
