"""A mapping started from a snapshot equals the mapping replayed from every sync (pure, property-based)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.client.mapping import build_segments, translate
from replicator.client.mapping_index import Life, MappingIndex
from replicator.client.state_snapshot import FlowSnapshot, _fold, _key, _mapping_value
from replicator.events import Checkpoint, OffsetSync, TopicRecreated, encode
from tests.test_mapping_properties import points_of, replication_runs


def _events(syncs) -> list[OffsetSync]:
    return [
        OffsetSync(
            flow="A->B",
            source_cluster="A",
            target_cluster="B",
            source_topic="t",
            target_topic="A.t",
            partition=0,
            upstream_offset=s.upstream_offset,
            downstream_offset=s.downstream_offset,
            upstream_timestamp_ms=0,
            reason=s.reason,
            previous_upstream_offset=s.previous_upstream_offset,
            previous_downstream_offset=s.previous_downstream_offset,
            replicator_id="r",
        )  # fmt: skip
        for s in syncs
    ]


@settings(max_examples=300, deadline=None)
@given(replication_runs(), st.data())
def test_compacting_at_any_point_then_reading_on_gives_the_same_mapping(run, data):
    records, _copies, syncs = run
    cut = data.draw(st.integers(0, len(syncs)))
    events = _events(syncs)
    index = MappingIndex()
    index.add(events[:cut])
    index.compact()  # what a snapshot keeps
    index.add(events[cut:])  # the log read on from the snapshot's position
    full = build_segments(points_of(syncs))
    assert index.segments("A->B", "t", 0) == full
    for c in range(0, records[-1] + 3):
        assert index.translate("A->B", "t", 0, c) == translate(full, c)


@settings(max_examples=300, deadline=None)
@given(replication_runs(), st.data())
def test_a_seeded_mapping_rebuilt_after_each_of_several_reads_equals_a_full_replay(run, data):
    """Only the tail of a seeded partition is rebuilt when syncs arrive: read in several chunks
    (each followed by a translation, which rebuilds), it still equals the build from every sync."""
    records, _copies, syncs = run
    events = _events(syncs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(syncs)), min_size=1, max_size=4)))
    index = MappingIndex()
    index.add(events[: cuts[0]])
    index.compact()  # what a snapshot keeps
    for lo, hi in zip(cuts, [*cuts[1:], len(events)], strict=True):
        index.add(events[lo:hi])
        assert index.segments("A->B", "t", 0) == build_segments(points_of(syncs[:hi]))
    full = build_segments(points_of(syncs))
    for c in range(0, records[-1] + 3):
        assert index.translate("A->B", "t", 0, c) == translate(full, c)


def test_fold_takes_the_last_marker_latest_events_and_ignores_other_flows_and_garbage():
    cp = Checkpoint(
        flow="A->B", source_cluster="A", target_cluster="B", group="g", source_topic="t", target_topic="A.t",
        partition=0, upstream_offset=5, downstream_offset=7, method="exact", replicator_id="r", emitted_at_ms=10,
    )  # fmt: skip
    newer = replace(cp, upstream_offset=9, downstream_offset=11, emitted_at_ms=20)
    segs = build_segments(points_of(_events([])))
    records = [
        (_key("mapping", "A->B", "t", 0), _mapping_value("A.t", segs)),
        (_key("latest", "A->B", "checkpoint", "g", "A.t", 0), encode(newer)),
        (_key("latest", "A->B", "checkpoint", "g", "A.t", 0), encode(cp)),  # older, written later: ignored
        (_key("position", "A->B"), b'{"positions": {"0": 3, "1": 4}}'),
        (_key("position", "C->B"), b'{"positions": {"0": 99}}'),
        (_key("latest", "C->B", "checkpoint", "h", "C.t", 0), b"garbage"),  # another flow's: never read
        (b"v0|mapping|A->B|t|0", b"{}"),
    ]
    snap = _fold(records, "A->B")
    assert isinstance(snap, FlowSnapshot)
    assert snap.positions == {0: 3, 1: 4}
    assert snap.segments == {("t", 0): ("A.t", segs)}
    assert list(snap.latest.values()) == [newer]
    assert _fold(records[:3], "A->B") is None  # no marker: no snapshot, replay everything


@pytest.mark.parametrize(
    "bad",
    [
        (_key("latest", "A->B", "checkpoint", "h", "A.t", 0), b"garbage"),
        # a forged checkpoint that decodes: partition -1 (Kafka would read its lookups as nothing real)
        (
            _key("latest", "A->B", "checkpoint", "h", "A.t", 0),
            encode(
                Checkpoint(
                    flow="A->B",
                    source_cluster="A",
                    target_cluster="B",
                    group="h",
                    source_topic="t",
                    target_topic="A.t",
                    partition=-1,
                    upstream_offset=5,
                    downstream_offset=7,
                    method="exact",
                    replicator_id="r",
                )
            ),
        ),
        (_key("mapping", "A->B", "t", 0), b'{"target_topic": "A.t", "segments": [[-1, 0, 5, 4]]}'),
        (_key("mapping", "A->B", "t", 0), b'{"target_topic": "../A.t", "segments": [[0, 0, 5, 5]]}'),
        (_key("mapping", "A->B", "t", -3), b'{"target_topic": "A.t", "segments": [[0, 0, 5, 5]]}'),
        (_key("mapping", "A->B", "t", 0), b'{"target_topic": "A.t", "segments": [[9, 0, 5, 5]]}'),
    ],
    ids=["garbage", "forged-partition", "negative-offset", "illegal-topic", "negative-partition", "ends-first"],
)
def test_a_damaged_mapping_or_latest_record_means_a_full_replay(bad):
    """Without the record the snapshot would lack a group's checkpoint or a partition's segments."""
    marker = (_key("position", "A->B"), b'{"positions": {"0": 3}}')
    assert _fold([marker], "A->B") is not None
    assert _fold([bad, marker], "A->B") is None


def test_fold_keeps_seen_times_and_an_older_snapshot_means_a_full_replay():
    records = [
        (_key("seen", "A->B", "r|1"), b'{"ms": 7}'),
        (_key("seen", "A->B", "r|1"), b'{"ms": 5}'),  # an older time written later: the newest stays
        (_key("seen", "A->B", "r2"), b'{"ms": "x"}'),  # unreadable: ignored
        (_key("position", "A->B"), b'{"positions": {"0": 3}}'),
    ]
    snap = _fold(records, "A->B")
    assert snap is not None and snap.seen == {"r|1": 7}
    for old in (b"v1|", b"v2|"):  # before watermarks and lifecycle (v1), losses before copy (v2) were kept
        assert _fold([(key.replace(b"v3|", old, 1), value) for key, value in records], "A->B") is None


def test_a_recreated_topic_s_new_life_keeps_its_remote_topic_before_its_first_sync():
    """CI of b3cb400: the snapshot of a new life with no sync yet said its remote topic was "", a name
    the reader refuses, so every reader replayed the whole log. The remote topic is the old life's."""
    index = MappingIndex()
    old = OffsetSync(
        flow="A->B", source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t", partition=0,
        upstream_offset=9, downstream_offset=9, upstream_timestamp_ms=0, reason="flush", replicator_id="r",
        source_topic_id="old-id", emitted_at_ms=1_000,
    )  # fmt: skip
    recreated = TopicRecreated(
        flow="A->B", replicator_id="r", source_cluster="A", target_cluster="B", side="source", topic="t",
        source_topic="t", topic_id="new-id", previous_topic_id="old-id", partitions=1, log_start_offsets=(0,),
        log_end_offsets=(0,), policy="continue", noticed="running", emitted_at_ms=2_000,
    )  # fmt: skip
    index.add([old, recreated])
    assert index.life("A->B", "t", 0)[0] == "new-id" and index.segments("A->B", "t", 0) == []
    assert index.target_topic("A->B", "t") == "A.t"


def test_a_new_life_with_no_copy_is_unproven_whether_read_from_events_or_from_a_snapshot():
    """The restart rule of ``TopicLives``: a partition whose current life holds no copy (only a
    ``TopicRecreated`` started it, perhaps from a process that never held the partition) does not
    trust the flow's commit. A snapshot keeps only the current life: the rule must hold without the old."""
    sync = dict(
        flow="A->B", source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t", partition=0,
        upstream_timestamp_ms=0, reason="flush", replicator_id="r",
    )  # fmt: skip
    old = OffsetSync(**sync, upstream_offset=9, downstream_offset=9, source_topic_id="old-id", emitted_at_ms=1_000)
    recreated = TopicRecreated(
        flow="A->B", replicator_id="peer", source_cluster="A", target_cluster="B", side="source", topic="t",
        source_topic="t", topic_id="new-id", previous_topic_id="old-id", partitions=2, log_start_offsets=(0, 0),
        log_end_offsets=(0, 0), policy="continue", noticed="running", emitted_at_ms=2_000,
    )  # fmt: skip
    index = MappingIndex()
    index.add([old])
    assert not index.unproven_life("A->B", "t", 0)  # one life, copied
    index.add([recreated])
    assert index.unproven_life("A->B", "t", 0) and index.unproven_life("A->B", "t", 1)
    # the owner's read-on copies under the old id prove nothing of the new life
    index.add([replace(old, upstream_offset=10, downstream_offset=10, emitted_at_ms=3_000)])
    assert index.unproven_life("A->B", "t", 0)
    index.add([replace(old, upstream_offset=0, downstream_offset=11, source_topic_id="new-id", emitted_at_ms=4_000)])
    assert not index.unproven_life("A->B", "t", 0) and index.unproven_life("A->B", "t", 1)
    seeded = MappingIndex()
    seeded.seed("A->B", "t", 1, "A.t", [], topic_id="new-id", started_ms=2_000)  # a snapshot's empty new life
    assert seeded.unproven_life("A->B", "t", 1)
    assert not seeded.unproven_life("A->B", "t", 0)  # never seen: nothing said of it


def test_a_life_said_under_stop_is_held_until_something_of_it_is_copied():
    """``stopped_life``: the side of a re-creation said under policy ``stop`` whose life holds no copy
    (the restart of a flow that still stops on it stops again); not under another policy, not once
    a copy of the new life exists."""
    sync = dict(
        flow="A->B", source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t", partition=0,
        upstream_timestamp_ms=0, reason="flush", replicator_id="r", source_topic_id="s", target_topic_id="T1",
    )  # fmt: skip
    said = TopicRecreated(
        flow="A->B", replicator_id="peer", source_cluster="A", target_cluster="B", side="target", topic="A.t",
        source_topic="t", topic_id="T2", previous_topic_id="T1", partitions=1, log_start_offsets=(0,),
        log_end_offsets=(0,), policy="stop", noticed="start", emitted_at_ms=2_000,
    )  # fmt: skip
    index = MappingIndex()
    index.add([OffsetSync(**sync, upstream_offset=9, downstream_offset=9, emitted_at_ms=1_000)])
    assert index.stopped_life("A->B", "t", 0) is None
    index.add([said])
    assert index.stopped_life("A->B", "t", 0) == "target"
    recopied = replace(said, policy="recopy", topic_id="T3", previous_topic_id="T2", emitted_at_ms=3_000)
    index.add([recopied])
    assert index.stopped_life("A->B", "t", 0) is None  # said again under recopy: a life of its own
    index = MappingIndex()
    index.add([said, OffsetSync(**{**sync, "target_topic_id": "T2"}, upstream_offset=0, downstream_offset=0,
                                emitted_at_ms=4_000)])  # fmt: skip
    assert index.stopped_life("A->B", "t", 0) is None  # something of the life copied


def test_a_recreated_remote_topic_starts_a_life_of_its_own_and_a_snapshot_keeps_it():
    """A remote topic deleted and created again holds other records at the old offsets: the old copies'
    syncs (remote id ``T1``) must not translate into the new topic (``T2``). Syncs from before the
    remote id was stamped (v2) are the first remote id's life, not an older one."""
    sync = dict(
        flow="A->B", source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t", partition=0,
        upstream_timestamp_ms=0, reason="flush", replicator_id="r", source_topic_id="S",
    )  # fmt: skip
    v2 = OffsetSync(**sync, upstream_offset=0, downstream_offset=0, emitted_at_ms=1_000)
    v3 = OffsetSync(**sync, upstream_offset=99, downstream_offset=99, target_topic_id="T1", emitted_at_ms=2_000)
    recreated = TopicRecreated(
        flow="A->B", replicator_id="r", source_cluster="A", target_cluster="B", side="target", topic="A.t",
        source_topic="t", topic_id="T2", previous_topic_id="T1", partitions=1, log_start_offsets=(0,),
        log_end_offsets=(0,), policy="recopy", noticed="start", emitted_at_ms=3_000,
    )  # fmt: skip
    index = MappingIndex()
    index.add([v2, v3])
    assert index.life("A->B", "t", 0) == Life("S", 1_000, "T1")  # one life: the upgrade adopted T1
    assert index.translate("A->B", "t", 0, 50).downstream == 50
    index.add([recreated])
    assert index.life("A->B", "t", 0) == Life("S", 3_000, "T2") and index.unproven_life("A->B", "t", 0)
    assert index.translate("A->B", "t", 0, 50) is None  # nothing of the new remote topic copied yet
    late = replace(v3, upstream_offset=100, downstream_offset=100, emitted_at_ms=3_500)  # the old life's, said late
    recopy = replace(v3, upstream_offset=0, downstream_offset=0, target_topic_id="T2", emitted_at_ms=4_000)
    index.add([late, recopy, replace(recopy, upstream_offset=99, downstream_offset=99, emitted_at_ms=4_100)])
    assert not index.unproven_life("A->B", "t", 0)
    assert [(s.upstream_start, s.upstream_end) for s in index.segments("A->B", "t", 0)] == [(0, 99)]
    snap = _fold([(_key("mapping", "A->B", "t", 0), _mapping_value("A.t", index.segments("A->B", "t", 0),
                   index.life("A->B", "t", 0))), (_key("position", "A->B"), b'{"positions": {"0": 3}}')],
                 "A->B")  # fmt: skip
    assert snap is not None and snap.lives[("t", 0)] == Life("S", 3_000, "T2")
    seeded = MappingIndex()
    seeded.seed("A->B", "t", 0, "A.t", snap.segments[("t", 0)][1], *snap.lives[("t", 0)])
    assert seeded.life("A->B", "t", 0) == Life("S", 3_000, "T2") and seeded.unproven_life("A->B", "t", 0) is False


def _lives_story() -> list:
    """The chaos soak's seed 7 on one partition: copies of source topic s1 into remote topic T1;
    T1 deleted and created again (T2, said by two processes); s1 deleted and created again (s2,
    said twice), recopied into T2; again (s3) and copied after s2's copies. Every sync carries both ids."""
    sync = dict(
        flow="A->B", source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t", partition=0,
        upstream_timestamp_ms=0, replicator_id="r",
    )  # fmt: skip

    def copies(ms: int, s: str, t: str, u: int, d: int, n: int) -> list[OffsetSync]:
        first = OffsetSync(**sync, emitted_at_ms=ms, source_topic_id=s, target_topic_id=t, upstream_offset=u,
                           downstream_offset=d, reason="first")  # fmt: skip
        last = replace(first, emitted_at_ms=ms + 1, upstream_offset=u + n - 1, downstream_offset=d + n - 1,
                       reason="flush", previous_upstream_offset=u + n - 2,
                       previous_downstream_offset=d + n - 2)  # fmt: skip
        return [first, last]

    def said(ms: int, side: str, previous: str, new: str, by: str) -> TopicRecreated:
        return TopicRecreated(
            flow="A->B", replicator_id=by, source_cluster="A", target_cluster="B", side=side,
            topic="A.t" if side == "target" else "t", source_topic="t", topic_id=new, previous_topic_id=previous,
            partitions=1, log_start_offsets=(0,), log_end_offsets=(0,), policy="continue", noticed="running",
            emitted_at_ms=ms,
        )  # fmt: skip

    return [
        *copies(1_000, "s1", "T1", 0, 0, 300),
        said(2_000, "target", "T1", "T2", "p0"),
        said(2_300, "source", "s1", "s2", "p1"),
        said(2_301, "target", "T1", "T2", "p1"),
        said(2_500, "source", "s1", "s2", "p0"),
        *copies(2_600, "s2", "T2", 0, 0, 671),
        said(4_000, "source", "s2", "s3", "p1"),
        said(4_100, "source", "s2", "s3", "p0"),
        *copies(4_200, "s3", "T2", 0, 671, 45),
    ]


@settings(max_examples=200, deadline=None)
@given(st.permutations(_lives_story()))
def test_the_current_life_does_not_depend_on_the_order_the_log_is_read_in(events):
    """The state log's partitions interleave the processes' events: a re-creation can be read after the
    copies of a later life. The chaos soak read seed 7's remote re-creation after s3's copies, and the
    index paired it with s3 by the life current when it was read, then elected s2's life (2,380 offsets
    translated through the old copies). Whatever the order: s3's copies into T2 are current."""
    index = MappingIndex()
    index.add(events)
    assert index.life("A->B", "t", 0)[::2] == ("s3", "T2")
    assert index.translate("A->B", "t", 0, 10).downstream == 681
    assert index.segments("A->B", "t", 0) == [build_segments(points_of(_lives_story()[-2:]))[0]]
    # before s3's copies, its life is current and translates nothing
    early = MappingIndex()
    early.add([e for e in events if e.emitted_at_ms < 4_200])
    assert early.life("A->B", "t", 0)[::2] == ("s3", "T2") and early.translate("A->B", "t", 0, 10) is None


def test_a_sync_emitted_before_the_re_creation_it_belongs_to_was_said_keeps_its_copies():
    """Two processes notice a re-creation: one says it at 4,000 and is read first; the other's copies of
    the new life, synced at 3,900 (it said it earlier, read later), start the life earlier than said.
    The life made for the saying must take those copies, not lose them to the election."""
    story = _lives_story()
    said_s3 = next(e for e in story if isinstance(e, TopicRecreated) and e.topic_id == "s3" and e.replicator_id == "p1")
    early = [replace(e, emitted_at_ms=e.emitted_at_ms - 300) for e in story[-2:]]  # s3's copies at 3,900
    index = MappingIndex()
    index.add([e for e in story if e.emitted_at_ms < 4_000])
    index.add([said_s3, *early])
    assert index.life("A->B", "t", 0)[::2] == ("s3", "T2")
    assert index.translate("A->B", "t", 0, 10).downstream == 681
