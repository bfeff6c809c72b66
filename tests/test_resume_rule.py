"""Where an at-least-once flow resumes after a crash (pure: no cluster): past every copy it knows,
never past a record it has not copied (issue 39 item 1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replicator.client.mapping import Segment
from replicator.events import Lifecycle, OffsetSync, SyncReason
from replicator.flow.core.ownership import Ownership
from replicator.flow.core.resume import LEFT_COPIES, Coverage, PreviousRun, resume_point


def _seg(lo: int, hi: int, delta: int = 0) -> Segment:
    return Segment(downstream_start=lo + delta, upstream_start=lo, upstream_end=hi, downstream_end=hi + delta)


def test_coverage_merges_touching_and_overlapping_segments():
    known = Coverage([_seg(10, 19), _seg(20, 24, 3), _seg(22, 30), _seg(40, 40)])
    assert [u for u in range(0, 45) if u in known] == [*range(10, 31), 40]
    assert known.last == 40
    assert Coverage([]).last is None and 5 not in Coverage([])


def test_a_crash_resumes_past_the_copies_a_sync_or_recovery_knows():
    known = Coverage([_seg(0, 40), _seg(41, 52, 7)])  # mapped up to 40; 41..52 recovered by content
    records = [(u, False) for u in range(30, 53)]
    assert resume_point(30, records, known) == 53


def test_the_walk_stops_at_the_first_record_never_copied_even_with_known_copies_after_it():
    """The reverse flow of a failback (the reverted first attempt's loss): the target holds originals
    of source records 60..79, matched by content, but source records 30..59 were never copied."""
    known = Coverage([_seg(0, 29), _seg(60, 79, -40)])
    records = [(u, False) for u in range(0, 80)]
    assert resume_point(0, records, known) == 30


def test_records_the_flow_never_copies_and_offsets_never_returned_are_walked_over():
    known = Coverage([_seg(0, 4), _seg(6, 9, -1), _seg(12, 14, -3)])
    # 5: a record from the target (a cycle: never copied); 10 and 11: a transaction's marker and an
    # aborted record, which the reader does not return
    records = [(u, u == 5) for u in [*range(0, 10), 12, 13, 14]]
    assert resume_point(0, records, known) == 15


def test_a_short_read_resumes_where_it_ended():
    known = Coverage([_seg(0, 99)])
    assert resume_point(10, [(u, False) for u in range(10, 40)], known) == 40  # not 100
    assert resume_point(10, [], known) == 10


@given(
    st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=60),
    st.integers(min_value=0, max_value=20),
)
def test_the_resume_never_skips_a_record_it_has_not_copied(flags, start):
    """Every record before the resume is a known copy or skipped; the resume is the first record
    that is neither, or one past the last record read."""
    offsets = [start + i for i, (returned, _k, _s) in enumerate(flags) if returned]
    known_set = {start + i for i, (_r, k, _s) in enumerate(flags) if k}
    known = Coverage([_seg(u, u) for u in known_set])
    records = [(u, flags[u - start][2]) for u in offsets]
    at = resume_point(start, records, known)
    walked = [(u, s) for u, s in records if u < at]
    assert all(s or u in known_set for u, s in walked)
    stops = [u for u, s in records if not s and u not in known_set]
    assert at == (stops[0] if stops else (offsets[-1] + 1 if offsets else start))


def _life(rid: str, state: str, at: int, flow: str = "A->B") -> Lifecycle:
    return Lifecycle(flow=flow, replicator_id=rid, state=state, emitted_at_ms=at)


def _previous(own: Lifecycle, *events: Lifecycle) -> PreviousRun:
    previous = PreviousRun(own)
    for e in (*events, own):
        previous.take(e)
    return previous


def test_only_a_run_that_did_not_stop_cleanly_is_resumed_past_its_commit():
    """After a clean stop, copies past the commit mean the position was moved back on purpose."""
    me = _life("me", "started", 100)
    assert _previous(me).crashed  # nothing known: resuming past known copies never loses a record
    assert _previous(me, _life("r1", "started", 10)).crashed  # killed
    assert _previous(me, _life("r1", "stopped", 10), _life("r2", "error", 15)).crashed
    assert not _previous(me, _life("r1", "started", 10), _life("r2", "stopped", 15)).crashed
    # one id for every run (a configured replicator_id): its own previous run counts
    assert not _previous(me, _life("me", "started", 10), _life("me", "stopped", 20)).crashed
    assert _previous(me, _life("me", "stopped", 10), _life("me", "started", 20)).crashed
    assert _previous(me, _life("r1", "stopped", 10, flow="B->A")).crashed  # another flow's stop


def _sync(rid: str, at: int, flow: str = "A->B", partition: int = 0) -> OffsetSync:
    return OffsetSync(
        flow=flow, replicator_id=rid, source_cluster="A", target_cluster="B", source_topic="t", target_topic="A.t",
        partition=partition, upstream_offset=5, downstream_offset=5, upstream_timestamp_ms=0, reason=SyncReason.FLUSH,
        emitted_at_ms=at,
    )  # fmt: skip


def test_a_peer_that_copied_after_the_last_clean_stop_and_never_stopped_makes_it_a_crash():
    """The soak's case: r2 stopped cleanly at 20; r1, running since 10, took r2's partitions over,
    copied (its syncs at 25) and was killed. r2 comes back as ``me``: its own stop is the newest
    lifecycle event, yet the commits are r1's, behind r1's copies."""
    me = _life("me", "started", 100)
    r1_started, r2_stopped = _life("r1", "started", 10), _life("r2", "stopped", 20)
    previous = _previous(me, r1_started, r2_stopped)
    for e in (_sync("r1", 15), _sync("r1", 25)):
        previous.take(e)
    assert previous.crashed
    # r1 copied only before the stop (it was dead by then, crashed long ago): the stop stands
    previous = _previous(me, r1_started, r2_stopped)
    previous.take(_sync("r1", 15))
    assert not previous.crashed
    # r1 stopped cleanly too, after its copies: every process stopped, a rewind is honoured
    previous = _previous(me, r1_started, r2_stopped, _life("r1", "stopped", 30))
    previous.take(_sync("r1", 25))
    assert not previous.crashed
    # a stop after lost partitions (a session timed out while the source was down) left copies behind
    left = Lifecycle(flow="A->B", replicator_id="r2", state="stopped", reason=LEFT_COPIES, emitted_at_ms=20)
    assert _previous(me, r1_started, left).crashed
    # this run's own syncs and another flow's say nothing about the previous run
    previous = _previous(me, r1_started, r2_stopped)
    for e in (_sync("me", 110), _sync("r1", 25, flow="B->A")):
        previous.take(e)
    assert not previous.crashed


def test_a_clean_stop_speaks_for_the_partitions_its_process_copied_last():
    """The 2026-12-02 soak's 23 second copies: r1 copied t[0] (syncs to 28) and was SIGKILLed; r2,
    which held only t[1], stopped cleanly at 40 and came back as ``me``. The flow's newest word is
    a clean stop, but t[0]'s last copier never stopped: t[0] resumes past its known copies, t[1]
    (r2's, synced before r2's stop) at its commit."""
    me = _life("me", "started", 100)
    previous = _previous(me, _life("r1", "started", 10), _life("r2", "started", 11), _life("r2", "stopped", 40))
    for e in (_sync("r1", 20), _sync("r2", 25, partition=1), _sync("r1", 28)):
        previous.take(e)
    assert not previous.crashed  # the flow-wide rule alone read r2's stop as the end of everything
    crashed = previous.verdict()
    assert crashed("t", 0) and not crashed("t", 1)
    assert not crashed("t", 7)  # never synced by anyone: the flow's word (a clean stop)
    # t[1] moved to r1 after r2's sync and r1 copied it on: r1's crash speaks for it too
    previous.take(_sync("r1", 30, partition=1))
    assert previous.verdict()("t", 1)
    # r1 stopped cleanly after its copies: both partitions' commits stand (a rewind is honoured)
    previous.take(_life("r1", "stopped", 50))
    crashed = previous.verdict()
    assert not crashed("t", 0) and not crashed("t", 1)
    # a stop that left copies behind is no clean stop for its partitions
    previous.take(Lifecycle(flow="A->B", replicator_id="r1", state="stopped", reason=LEFT_COPIES, emitted_at_ms=60))
    assert previous.verdict()("t", 0)


def test_one_id_for_every_run_judges_its_earlier_runs_syncs_not_this_ones():
    """A configured replicator_id: "me"'s syncs before this start are its previous run's; after it, this run's."""
    me = _life("me", "started", 100)
    previous = _previous(me, _life("me", "started", 10), _life("me", "stopped", 40))
    previous.take(_sync("me", 30))
    assert not previous.verdict()("t", 0)  # copied, then stopped cleanly
    previous = _previous(me, _life("me", "stopped", 40), _life("me", "started", 50))
    assert previous.verdict()("t", 0)  # the run after the stop was killed
    previous = _previous(me, _life("r1", "started", 10), _life("me", "stopped", 40))
    previous.take(_sync("r1", 30))
    previous.take(_sync("me", 120))  # this run's own: r1 stays t[0]'s last copier
    assert previous.verdict()("t", 0)
    assert _previous(me).verdict()("t", 0)  # nothing known: a crash


def test_a_run_killed_after_its_syncs_is_not_vouched_for_by_a_later_run_of_its_id():
    """The simulator's seed 5, cut down: r1's run copies t[0] and is killed; the next run of r1 (a
    pod restarted under its name) starts and stops cleanly holding nothing. That stop is its own run's,
    not the killed one's: t[0] resumes past its known copies."""
    me = _life("r0", "started", 200)
    previous = _previous(me, _life("r1", "started", 10), _life("r1", "started", 50), _life("r1", "stopped", 60))
    previous.take(_sync("r1", 30))
    assert not previous.crashed  # the flow's newest word is a clean stop, and nobody copied after it
    assert previous.verdict()("t", 0)  # but t[0]'s copier never stopped: its run ended at r1's next start
    previous = _previous(me, _life("r1", "started", 10), _life("r1", "stopped", 40), _life("r1", "started", 50))
    previous.take(_sync("r1", 30))
    assert previous.verdict()("t", 0)  # a later run of r1 still going (or killed): the flow crashed
    previous = _previous(me, _life("r1", "started", 10), _life("r1", "stopped", 40), _life("r1", "started", 50))
    previous.take(_life("r1", "stopped", 70))
    previous.take(_sync("r1", 30))
    assert not previous.verdict()("t", 0)  # the run that copied stopped cleanly at 40


_EVENT = st.one_of(
    st.builds(
        _life,
        st.sampled_from(["me", "r1", "r2"]),
        st.sampled_from(["started", "stopped", "error"]),
        st.integers(min_value=0, max_value=150),
    ),
    st.builds(
        _sync,
        st.sampled_from(["me", "r1", "r2"]),
        st.integers(min_value=0, max_value=150),
        partition=st.integers(min_value=0, max_value=2),
    ),
)


@given(st.lists(_EVENT, max_size=20), st.lists(st.booleans(), max_size=40))
def test_two_views_handing_the_same_log_judge_as_one(events, picks):
    """The state lane's view and the loop's (``StateView.fork``) both hand the log to one
    ``PreviousRun``, each in log order, at their own pace: every event arrives twice, interleaved.
    The verdict is the one a single reading gives."""
    me = _life("me", "started", 100)
    once, twice = PreviousRun(me), PreviousRun(me)
    for e in events:
        once.take(e)
    lanes = [list(events), list(events)]
    for pick in picks:
        lane = lanes[pick] or lanes[not pick]
        if lane:
            twice.take(lane.pop(0))
    for e in (*lanes[0], *lanes[1]):
        twice.take(e)
    assert once.crashed == twice.crashed
    judged_once, judged_twice = once.verdict(), twice.verdict()
    assert [judged_once("t", p) for p in range(4)] == [judged_twice("t", p) for p in range(4)]


def test_every_assignment_holds_its_partitions_for_recovery_but_a_start_of_its_own():
    own = Ownership(exactly_once=False)
    # the first assignment too: a peer may have copied on since this process started (seed 197)
    assert own.assign([(("t", 0), None), (("u", 0), None)]) == []
    assert own.held == [("t", 0), ("u", 0)]
    assert own.assign([(("t", 1), None), (("t", 2), 40)], relive=[("t", 2)]) == []  # a re-created topic's: held
    assert own.assign([(("t", 3), 40)]) == [(("t", 3), 40)]
    assert own.held == [("t", 0), ("u", 0), ("t", 1), ("t", 2)] and own.assigned == {("t", 3)}


def test_a_held_partition_taken_away_is_dropped_named_as_never_assigned_and_the_stop_is_not_clean():
    own = Ownership(exactly_once=False)
    own.assign([(("t", 0), None), (("t", 1), None)])
    assert own.revoke(iter([("t", 1), ("t", 5)])) == {("t", 1)}
    assert own.held == [("t", 0)] and own.left_copies  # this run never reconciled t[1]'s commit
    assert own.taken_over([("t", 0)], {("t", 0): 70}, {}) == [(("t", 0), 70)]
    assert own.held == [] and own.assigned == {("t", 0)}


def test_a_resume_revoked_before_its_commit_or_a_loss_makes_the_stop_unclean_a_plain_revoke_does_not():
    own = Ownership(exactly_once=False)
    own.assign([(("t", 0), None), (("t", 1), 5)])
    own.taken_over([("t", 0)], {("t", 0): 70}, {})
    own.revoke([("t", 1)])  # assigned at a start of its own, nothing due: a clean revoke
    assert not own.left_copies
    due = own.resets(now=0.0)
    assert due == ([], [(("t", 0), 70)])
    own.resets_refused(*due, now=0.0)  # the coordinator moved: asked again a second later
    assert own.resets(now=0.5) is None and own.resume_due == [(("t", 0), 70)]
    own.revoke([("t", 0)])  # revoked with its resume still uncommitted
    assert own.left_copies and own.resume_due == []
    lost = Ownership(exactly_once=False)
    lost.assign([(("t", 0), 3)])
    lost.lose([("t", 0)])
    assert lost.left_copies
    once = Ownership(exactly_once=True)
    assert once.assign([(("t", 0), None)]) == [(("t", 0), None)]  # nothing held: an aborted transaction left nothing
    once.lose([("t", 0)])
    assert not once.left_copies


def test_a_start_not_committed_makes_the_stop_unclean():
    """The simulator's seed 324: a takeover's resume past known copies refused while the coordinator
    was away, then a SIGTERM: the stop cannot vouch for that partition's commit."""
    own = Ownership(exactly_once=False)
    own.assign([(("t", 0), None)])
    own.taken_over([("t", 0)], {("t", 0): 5}, {})
    assert not own.clean
    due = own.resets(now=0.0)
    assert due is not None
    own.resets_refused(*due, now=0.0)
    assert not own.clean and not own.left_copies
    due = own.resets(now=None)  # the stop's last try, whatever the back-off
    assert due == ([], [(("t", 0), 5)])
    assert own.clean  # committed now (the caller gives nothing back)
