"""One harness holds every engine equal on generated histories of replication state.

Hypothesis generates the state events of a flow A->B (``histories``): per partition a replication
with gaps, foreign records on the target, crashes and at-least-once replays
(``tests.test_mapping_properties.replication_runs``), syncs republished by a second writer and
records delivered twice to the state topic, checkpoints of two groups moving over time, source
watermarks (v2 as the replicator writes them, and v1) and target ones (the target's log start may
delete copies), heartbeats over several paths (a late hop changes the next hop's latency), config
snapshots with damaged ACLs and audit windows (divergence), a failover and a failback, all spread
over rounds in which events arrive late. Each round goes bronze -> silver -> gold on two lakehouses sharing one
silver: incremental gold on the DuckDB twins, incremental gold on Spark. Then, for every gold table:

    DuckDB incremental == Spark incremental == Spark full build (``GoldTable.compute``)

and against the Python rules of the client core and ``replicator.failover`` on the same events:
the mapping (``MappingIndex``), every group's exact translation, the SQL ``failover_plan`` and
``consistent_cut`` macros against ``build_plan``'s rows and cut, and the dashboard's reverse
translation against ``replicator.client.mapping.reverse_translate`` for every target offset.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from replicator.client.mapping import reverse_translate, translate
from replicator.client.mapping_index import MappingIndex
from replicator.config import parse_config
from replicator.events import Event, Failback, encode
from replicator.failover.plan import build_plan
from replicator.failover.state import flow_state_from_events
from replicator.failover.target import TimePosition
from tests import lakehouse_support as ev
from tests.test_mapping_properties import replication_runs

pytestmark = pytest.mark.spark

PARTITIONS = 2
GROUPS = ("g1", "g2")
# principal|host|operation|permission|pattern_type|resource_name; the last one damaged (3 fields)
ACLS = (
    "User:a|*|READ|ALLOW|LITERAL|orders",
    "User:b|*|ALL|ALLOW|LITERAL|orders",
    "User:c|*|WRITE|ALLOW|LITERAL|orders",
    "User:a|*|READ|ALLOW|LITERAL|A.orders",
    "User:d|*|READ",
)
CONFIG = parse_config(
    {
        "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [{"source": "A", "target": "B", "topics": [ev.TOPIC]}],
    }
)


@dataclass
class History:
    """A generated history: its events by round (bytes as delivered: duplicates included), and
    the copies each partition's replication made (upstream offset, downstream offset)."""

    rounds: list[list[bytes]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    copies: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    end_ms: int = 0


@st.composite
def histories(draw: st.DrawFn) -> History:
    n_rounds = draw(st.integers(2, 3))
    clock = itertools.count(1)
    placed: list[tuple[int, Event]] = []

    def put(event: Event, at_least: int = 0) -> None:
        placed.append((draw(st.integers(at_least, n_rounds - 1)), event))

    history = History()
    for p in range(PARTITIONS):
        records, copies, syncs = draw(replication_runs())
        history.copies[p] = copies
        for s in syncs:
            prev = (s.previous_upstream_offset, s.previous_downstream_offset)
            event = ev.sync(p, s.upstream_offset, s.downstream_offset, next(clock), s.reason, prev)
            put(event)
            if draw(st.integers(0, 9)) == 0:  # a second writer republishes it (a new event id)
                put(ev.sync(p, s.upstream_offset, s.downstream_offset, next(clock), s.reason, prev))
        behind = draw(st.integers(0, 5))  # records not replicated yet
        source_end = records[-1] + 1 + behind
        target_end = copies[-1][1] + 1 + draw(st.integers(0, 2))
        for _ in range(draw(st.integers(1, 2))):
            mark = ev.watermark(p, 0, source_end, next(clock))
            if draw(st.integers(0, 3)):  # v2, as the replicator writes them: the tail measured
                mark = replace(
                    mark,
                    read_position=max(u for u, _d in copies) + 1,
                    position_source="sync",
                    unreplicated_records=behind,
                    unreplicated_bytes=10 * behind,
                    oldest_unreplicated_timestamp_ms=ev.T0 + records[-1] + 1 if behind else None,
                )
            put(mark)
            start = draw(st.integers(0, target_end))  # retention or delete-records on the target
            put(ev.watermark(p, start, target_end, next(clock), side="target"))
        for group in GROUPS:
            for _ in range(draw(st.integers(0, 2))):
                committed = draw(st.integers(0, records[-1] + 2))
                put(ev.checkpoint(group, p, committed, committed, next(clock), "exact"))
        for side in ("source", "target"):
            window = draw(st.integers(0, 2))
            put(ev.audit(side, p, 0, 100, 10 - window * (side == "target"), window, next(clock)))
    for side in ("source", "target"):
        configs = {
            "retention.ms": str(draw(st.sampled_from([1000, 2000]))),
            "cleanup.policy": draw(st.sampled_from(["delete", "compact"])),  # compact: audits count what went
        }
        acls = draw(st.lists(st.sampled_from(ACLS), unique=True))
        put(ev.snapshot(side, next(clock), PARTITIONS + draw(st.integers(0, 1)), configs, acls))
    for origin in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([("A", "B"), ("A", "B", "C"), ("B", "A"), ("C", "A", "B")]))
        t = next(clock)
        for hop in range(2, len(path) + 1):
            put(ev.heartbeat(path[:hop], t, t + hop + origin))
    if draw(st.booleans()):
        put(ev.failover(next(clock), "g1", [(p, 1, 1) for p in range(PARTITIONS)]))
        put(_failback(next(clock)))
    history.end_ms = ev.T0 + next(clock)

    for n in range(n_rounds):
        bodies = []
        for r, event in placed:
            if r == n:
                body = encode(event)
                bodies += [body, body] if draw(st.integers(0, 19)) == 0 else [body]  # delivered twice
                history.events.append(event)
        history.rounds.append(bodies)
    return history


def _failback(t: int) -> Failback:
    return Failback(
        flow=ev.FLOW,
        replicator_id="failback@h",
        emitted_at_ms=ev.T0 + t,
        source_cluster="A",
        target_cluster="B",
        action="groups",
        records=0,
        ranges=(),
        groups=("g1",),
        offsets=(),
        host="h",
        user="u",
    )


def _positions_at(copies: dict[int, list[tuple[int, int]]]):  # noqa: ANN202 - build_plan's PositionsAt
    """Positions by time on the target: a copy of source offset u has timestamp T0 + u (``ev.sync``)."""

    def at(partitions: list[tuple[str, int]], ts: int) -> dict[tuple[str, int], TimePosition]:
        out = {}
        for topic, p in partitions:
            offsets = [d for u, d in copies[p] if ev.T0 + u >= ts]
            end = max(d for _u, d in copies[p]) + 1
            out[(topic, p)] = TimePosition(min(offsets) if offsets else end, 0, end)
        return out

    return at


def _rows(table: Any, columns: list[str]) -> list[tuple]:
    return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())


# Each example is a few dozen Spark jobs (about 100 s here): one per CI run (a new one each run), more with
# MIRRORLAKE_HARNESS_EXAMPLES=N; no shrinking (a failure prints the whole history and the table).
EXAMPLES = int(os.environ.get("MIRRORLAKE_HARNESS_EXAMPLES", "1"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
@given(histories())
def test_every_engine_and_the_python_rules_agree(spark, tmp_path_factory, history: History):
    from lakehouse.sql import LakehouseSQL

    lakes = ev.EngineLakehouses(tmp_path_factory.mktemp("harness"))
    paths = lakes.paths
    for bodies in history.rounds:
        lakes.round(spark, bodies)

    lakes.assert_equal_to_full_builds(spark, "after the last round")

    flow = CONFIG.flow(ev.FLOW)
    state = flow_state_from_events(flow, history.events, history.end_ms)
    index = MappingIndex()
    index.add(history.events)
    sql = LakehouseSQL(paths["duckdb"].root)
    try:
        mapping = sql.arrow(
            "SELECT partition, downstream_start, upstream_start, upstream_end, downstream_end FROM offset_mapping"
        )
        for p in range(PARTITIONS):
            segments = sorted(index.segments(ev.FLOW, ev.TOPIC, p))
            got = [r[1:] for r in _rows(mapping, mapping.column_names) if r[0] == p]
            assert got == [(s.downstream_start, s.upstream_start, s.upstream_end, s.downstream_end) for s in segments]
            _check_reverse(sql, segments, p, history.copies[p])
        _check_translations(sql, index)
        if state.checkpoints:
            _check_plan(sql, build_plan(state, list(state.groups()), {}, _positions_at(history.copies)))
    finally:
        sql.close()


def _check_reverse(sql, segments, p: int, copies: list[tuple[int, int]]) -> None:  # noqa: ANN001
    from dashboards.data import last_copied
    from dashboards.data import reverse_translate as dashboard_reverse

    assert last_copied(sql, ev.FLOW, ev.TOPIC, p) == (max(s.upstream_end for s in segments) if segments else None)

    for d in range(0, max(d for _u, d in copies) + 3):
        core = reverse_translate(segments, d)
        shown = dashboard_reverse(sql, ev.FLOW, ev.TOPIC, p, d)
        want = (core.upstream, str(core.method)) if core else None
        assert ((shown.upstream, shown.method) if shown else None) == want, (p, d)


def _check_translations(sql, index: MappingIndex) -> None:  # noqa: ANN001
    """Gold ``group_offsets`` and the ``translate_group`` macro translate as the client core does."""
    groups = sql.arrow('SELECT "group", partition, committed_offset, exact_offset, exact_method FROM group_offsets')
    for group, p, committed, exact, method in _rows(groups, groups.column_names):
        want = translate(index.segments(ev.FLOW, ev.TOPIC, p), committed)
        assert (exact, method) == ((want.downstream, str(want.method)) if want else (None, None)), (group, p)
        (row,) = sql.arrow(
            "SELECT target_offset FROM translate_group(?, ?) WHERE partition = ?", [ev.FLOW, group, p]
        ).to_pylist()
        assert row["target_offset"] == (want.downstream if want else None), (group, p)


def _check_plan(sql, plan) -> None:  # noqa: ANN001
    """The SQL ``failover_plan``/``consistent_cut`` macros answer what ``replicator.failover`` plans."""
    columns = ["group", "partition", "committed_offset", "target_offset", "records_lost", "records_reread"]
    columns += ["records_deleted_on_target", "records_unreplicated"]
    macro = _rows(sql.arrow("SELECT * FROM failover_plan(?)", [ev.FLOW]), columns)
    python = sorted(
        (
            row.group,
            row.partition,
            row.committed_offset,
            row.target_offset,
            row.records_lost,
            row.records_reread,
            row.records_deleted_on_target or 0,
            row.records_unreplicated,
        )
        for group in plan.groups
        for row in group.partitions
    )
    assert macro == python
    (cut,) = sql.arrow("SELECT cut_ms FROM consistent_cut(?)", [ev.FLOW]).to_pylist()
    assert cut["cut_ms"] == plan.consistent_cut_ms
