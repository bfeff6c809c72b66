"""``replicator.failover.plan`` on hand-made state (pure: no cluster): figures, cut, time, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.client.state_snapshot import FlowSnapshot, latest_key
from replicator.config import parse_config
from replicator.errors import FailoverError
from replicator.events import Checkpoint, Failover, Lifecycle, OffsetSync, Watermark
from replicator.failover.plan import build_plan, select_groups
from replicator.failover.state import flow_state_from_events
from replicator.failover.target import GroupActivity, TimePosition
from replicator.failover.times import parse_time
from replicator.failover.unmapped import presumed_sources

T = 1_700_000_000_000
CONFIG = parse_config(
    {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B", "topics": ["orders"]}],
    },
    source="test",
)
FLOW = CONFIG.flow("A->B")
BASE = {"flow": "A->B", "replicator_id": "r1"}
ENDS = {"source_cluster": "A", "target_cluster": "B", "source_topic": "orders", "target_topic": "A.orders"}


def _events(committed: int = 50, measured: bool = True) -> list:
    extra = (
        {
            "read_position": 100,
            "position_source": "flow",
            "unreplicated_records": 10,
            "unreplicated_bytes": 100,
            "oldest_unreplicated_timestamp_ms": T + 100,
        }
        if measured
        else {}
    )
    return [
        OffsetSync(**BASE, **ENDS, partition=0, upstream_offset=0, downstream_offset=0, upstream_timestamp_ms=T,
                   reason="first", emitted_at_ms=T + 1),
        OffsetSync(**BASE, **ENDS, partition=0, upstream_offset=99, downstream_offset=99, upstream_timestamp_ms=T + 99,
                   reason="flush", previous_upstream_offset=98, previous_downstream_offset=98, emitted_at_ms=T + 2),
        Checkpoint(**BASE, **ENDS, group="g", partition=0, upstream_offset=committed, downstream_offset=committed,
                   method="exact", emitted_at_ms=T + 3),
        Watermark(**BASE, cluster="A", side="source", topic="orders", source_topic="orders", partition=0,
                  log_start_offset=0, log_end_offset=110, observed_at_ms=T + 200, **extra),
        Lifecycle(**BASE, state="started", emitted_at_ms=T),
    ]  # fmt: skip


def _positions_at(partitions, ts):
    """The target holds offset o with timestamp T + o, offsets 0..99."""
    return {tp: TimePosition(min(100, max(0, ts - T)), 0, 100) for tp in partitions}


def _plan(events, **kw):
    state = flow_state_from_events(FLOW, events, T + 1000)
    return build_plan(state, select_groups(state, None), {"g": GroupActivity(0, "EMPTY")}, _positions_at, **kw)


def test_exact_translation_rpo_and_consistent_cut():
    plan = _plan(_events())
    (risk,) = plan.partitions
    assert (risk.records, risk.bytes, risk.seconds, risk.exact) == (10, 100, 0.1, True)
    assert plan.consistent_cut_ms == T + 100
    (row,) = plan.groups[0].partitions
    assert (row.target_offset, row.method, row.records_lost, row.records_reread) == (50, "exact", 0, 0)
    assert row.records_unreplicated == 10
    assert (row.lost_at_cut, row.reread_at_cut) == (50, 0)  # the cut is past what the group read


def test_a_group_past_the_last_copy_resumes_after_it():
    plan = _plan(_events(committed=50) + [_late_checkpoint(105)])
    (row,) = plan.groups[0].partitions
    assert (row.method, row.target_offset, row.records_lost, row.records_reread) == ("after_last_copy", 100, 0, 0)
    assert row.records_unreplicated == 110 - 105  # past the read position: an offset bound
    assert (row.lost_at_cut, row.reread_at_cut) == (0, 0)


def _late_checkpoint(c: int) -> Checkpoint:
    return Checkpoint(**BASE, **ENDS, group="g", partition=0, upstream_offset=c, downstream_offset=100,
                      method="after_last_copy", emitted_at_ms=T + 4)  # fmt: skip


def test_time_based_cost_beside_the_exact_translation():
    plan = _plan(_events(), at_ms=T + 40)
    (row,) = plan.groups[0].partitions
    assert (row.target_offset, row.method, row.records_reread, row.records_lost) == (40, "timestamp", 10, 0)
    assert (row.exact_offset, row.lost_at_exact, row.reread_at_exact) == (50, 0, 0)


def test_v1_watermark_gives_an_offset_bound_and_unknown_bytes():
    plan = _plan(_events(measured=False))
    (risk,) = plan.partitions
    assert (risk.records, risk.bytes, risk.exact) == (10, None, False)


def test_bad_input_is_a_clear_error():
    with pytest.raises(FailoverError, match="in the future"):
        _plan(_events(), at_ms=T + 10_000)
    state = flow_state_from_events(FLOW, _events(), T + 1000)
    with pytest.raises(FailoverError, match="matches no group"):
        select_groups(state, "nope.*")
    with pytest.raises(FailoverError, match="not a valid regular expression"):
        select_groups(state, "(")
    with pytest.raises(FailoverError, match="no group has a checkpoint"):
        select_groups(flow_state_from_events(FLOW, [], T), None)
    with pytest.raises(FailoverError, match="expected an ISO 8601 time"):
        parse_time("yesterday")
    assert parse_time("2023-11-14T22:13:20Z") == T == parse_time(str(T))


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1969-12-31T23:59:59.999Z", -1),  # the case: Kafka reads -1 as "latest"
        ("1970-01-01T00:00:00Z", 0),
        ("-2", -2),  # "earliest", as a bare epoch
        ("0001-01-01T00:00:00+14:00", -62_135_647_200_000),
        ("9999-12-31T23:59:59.999-12:00", 253_402_343_999_999),
        ("2023-11-14T23:13:20+01:00", T),
        ("2023-11-14T10:13:20-12:00", T),
        (" 2023-11-14T22:13:20z ", T),
    ],
)
def test_every_time_parses_to_the_instant_it_names(text: str, ms: int):
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("0000-01-01T00:00:00Z", "year 0 is out of range"),
        ("²", "not a time"),  # a Unicode digit: str.isdigit() says yes, int() says no
        ("", "not a time"),
        ("1" * 30, "out of range"),  # not read as an ISO basic date (1111-11-11T11:11...)
        ("2026-13-01T00:00:00Z", "month must be in 1..12"),
        ("\x1b]0;owned\x07" + "x" * 100_000, "chars"),
    ],
)
def test_a_time_that_names_no_instant_is_one_clear_error(text: str, why: str):
    with pytest.raises(FailoverError, match="expected an ISO 8601 time") as caught:
        parse_time(text)
    message = str(caught.value)
    assert why in message and "\x1b" not in message and len(message) < 300, message


def _recording(positions):
    asked: list[int] = []

    def lookup(partitions, ts):
        asked.append(ts)
        return positions(partitions, ts)

    return asked, lookup


@pytest.mark.parametrize("at_ms", [-1, -2, -62_135_647_200_000, 0], ids=["-1 latest", "-2 earliest", "year 1", "0"])
def test_a_time_before_every_record_resumes_at_the_first_with_its_exact_cost(at_ms: int):
    """The target holds 0..99 (timestamps T+o); the group committed 50: resuming at the first record
    re-reads 0..49. No sentinel reaches the lookup."""
    state = flow_state_from_events(FLOW, _events(), T + 1000)
    asked, lookup = _recording(_positions_at)
    plan = build_plan(state, ["g"], {}, lookup, at_ms=at_ms)
    (row,) = plan.groups[0].partitions
    assert (row.target_offset, row.method, row.records_lost, row.records_reread) == (0, "timestamp", 0, 50)
    assert min(asked) >= 0 and plan.at_ms == at_ms


def test_a_time_before_a_trimmed_target_s_first_record_resumes_at_its_log_start():
    """Records below 20 were deleted on the target: the first record there is 20, where a consumer
    resuming at that time starts (the plan no longer refuses it), re-reading 20..49."""
    state = flow_state_from_events(FLOW, _events(), T + 1000)
    trimmed = lambda parts, ts: {tp: TimePosition(max(20, min(100, ts - T)), 20, 100) for tp in parts}  # noqa: E731
    (row,) = build_plan(state, ["g"], {}, trimmed, at_ms=T + 5).groups[0].partitions
    assert (row.target_offset, row.records_lost, row.records_reread) == (20, 0, 30)


def test_a_time_in_the_future_is_refused_before_anything_is_looked_up():
    state = flow_state_from_events(FLOW, _events(), T + 1000)
    asked, lookup = _recording(_positions_at)
    with pytest.raises(FailoverError, match="in the future"):
        build_plan(state, ["g"], {}, lookup, at_ms=parse_time("9999-12-31T23:59:59Z"))
    assert asked == []


def test_state_keeps_earlier_failovers_and_the_latest_of_each_thing():
    done = Failover(**BASE, source_cluster="A", target_cluster="B", mode="unplanned", groups=("g",), offsets=(),
                    records_lost=0, records_reread=0, host="h", user="u")  # fmt: skip
    state = flow_state_from_events(FLOW, [*_events(), _late_checkpoint(120), done], T + 1000)
    assert [f.groups for f in state.failovers] == [("g",)]
    assert state.checkpoints[("g", "orders", 0)].upstream_offset == 120
    assert state.last_copy()[("orders", 0)] == 99
    assert state.lifecycle["r1"].state == "started"


def test_a_failover_seen_twice_counts_once():
    """At-least-once state topic, or a snapshot read mid-write: the same event in ``latest`` and the tail."""
    done = Failover(**BASE, source_cluster="A", target_cluster="B", mode="unplanned", groups=("g",), offsets=(),
                    records_lost=0, records_reread=0, host="h", user="u")  # fmt: skip
    snap = FlowSnapshot("A->B", latest={latest_key(done): done})
    state = flow_state_from_events(FLOW, [*_events(), done, done], T + 1000, snapshot=snap)
    assert state.failovers == [done]


def test_copies_deleted_from_the_target_count_as_lost_with_their_cause():
    deleted = Watermark(**BASE, cluster="B", side="target", topic="A.orders", source_topic="orders", partition=0,
                        log_start_offset=60, log_end_offset=100, observed_at_ms=T + 300)  # fmt: skip
    plan = _plan([*_events(committed=50), deleted])
    (risk,) = plan.partitions
    assert (risk.target_log_start, risk.deleted_on_target) == (60, 60)
    assert (risk.deleted_source_range, risk.deleted_target_range) == ((0, 59), (0, 59))
    assert risk.records == 10 and plan.records_deleted_on_target == 60  # the RPO stays apart
    (row,) = plan.groups[0].partitions
    assert (row.target_offset, row.method) == (60, "log_start")  # where a consumer would be reset to
    assert (row.records_lost, row.records_deleted_on_target, row.records_reread) == (10, 10, 0)
    assert row.lost_cause == "deleted from the target by retention/deletion"


def test_a_target_log_start_below_the_copies_changes_nothing():
    kept = Watermark(**BASE, cluster="B", side="target", topic="A.orders", source_topic="orders", partition=0,
                     log_start_offset=0, log_end_offset=100, observed_at_ms=T + 300)  # fmt: skip
    (row,) = _plan([*_events(), kept]).groups[0].partitions
    assert (row.method, row.records_lost, row.records_deleted_on_target, row.lost_cause) == ("exact", 0, 0, None)


@given(
    first=st.integers(0, 50),
    count=st.integers(0, 40),
    lost=st.lists(st.tuples(st.integers(0, 120), st.integers(1, 30)).map(lambda t: (t[0], t[0] + t[1])), max_size=5),
)
def test_presumed_copies_are_the_next_offsets_outside_every_range_lost_before_copy(first, count, lost):
    """With the source down, the copies past the last mapped one are presumed to hold, in order, the
    source offsets after it that were not deleted before their copy."""
    got = presumed_sources(first, count, lost)
    assert len(got) == count and got == sorted(set(got))
    assert not any(lo <= o < hi for o in got for lo, hi in lost)
    if got:  # no offset skipped but a lost one
        assert all(any(lo <= o < hi for lo, hi in lost) for o in range(first, got[-1]) if o not in got)
